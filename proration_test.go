package billing_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// prorationPrices are the plans of the proration tests: a free one and
// four paid, monthly and yearly.
var prorationPrices = billing.PriceListMap{
	"Z:v1": 0,
	"A:v1": billing.MustParseAmount("10.00"), "B:v1": billing.MustParseAmount("20.00"),
	"C:v1": billing.MustParseAmount("30.00"), "D:v1": billing.MustParseAmount("5.00"),
	"A:v1/YEARLY": billing.MustParseAmount("120.00"), "B:v1/YEARLY": billing.MustParseAmount("240.00"),
}

// newProrationEnv is a collector with the proration plans, issuing
// invoices, on one layout; the clock starts at start.
func newProrationEnv(t *testing.T, st userStore, start time.Time) *invoiceEnv {
	t.Helper()
	e := newInvoiceEnv(t, st, func(c *billing.Config) { c.Prices = prorationPrices })
	e.clock.Set(start)
	return e
}

// paidPeriod subscribes the user to tier on term at the clock's now and
// charges the first period.
func (e *invoiceEnv) paidPeriod(t *testing.T, tier string, term billing.Term) {
	t.Helper()
	start := e.clock.Now()
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: tier, Term: term})
	require.NoError(t, err)
	e.runAt(t, start.Add(time.Minute), billing.RunScheduled)
}

// next returns the user's one SCHEDULED period (not a one-off charge).
func (e *invoiceEnv) next(t *testing.T) billing.Period {
	t.Helper()
	var out []billing.Period
	for _, r := range e.records(t) {
		if r.Status == billing.StatusScheduled && !r.IsOneOff() {
			out = append(out, r)
		}
	}
	require.Len(t, out, 1)
	return out[0]
}

// TestProrationPeersExamples: the documented examples of the peers, by
// the second over the period's real length, each line rounded half to
// even: an upgrade from $10 to $20 on day 15 of a 30-day month nets
// $5.00; a downgrade credits the unused half; anchors on the 31st and
// on 29 February; a yearly plan over 366 days. The lines are the
// change's answer, the preview's, the next period's and the next
// charge's (one call to the processor, at the sum).
func TestProrationPeersExamples(t *testing.T) {
	t.Parallel()
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	cases := []struct {
		name                 string
		start, at, next      time.Time
		term                 billing.Term
		from, to             string
		credit, charge, want string // the lines and the next charge
		fractions            [2]string
	}{
		{"upgrade on day 15 of 30", day(2026, 11, 1), day(2026, 11, 16), day(2026, 12, 1), billing.TermMonthly,
			"A:v1", "B:v1", "5.00", "10.00", "25.00", [2]string{"1000*1296000/2592000", "2000*1296000/2592000"}},
		{"downgrade on day 15 of 30", day(2026, 11, 1), day(2026, 11, 16), day(2026, 12, 1), billing.TermMonthly,
			"B:v1", "A:v1", "10.00", "5.00", "5.00", [2]string{"2000*1296000/2592000", "1000*1296000/2592000"}},
		{"anchor on the 31st, February of 28 days", day(2027, 1, 31), day(2027, 2, 14), day(2027, 2, 28), billing.TermMonthly,
			"A:v1", "B:v1", "5.00", "10.00", "25.00", [2]string{"1000*1209600/2419200", "2000*1209600/2419200"}},
		// 14 of 29 days: 4.8275… and 9.6551…
		{"29 February", day(2028, 2, 29), day(2028, 3, 15), day(2028, 3, 29), billing.TermMonthly,
			"A:v1", "B:v1", "4.83", "9.66", "24.83", [2]string{"1000*1209600/2505600", "2000*1209600/2505600"}},
		// 2028 has 366 days; 184 are left on 1 July: 60.3278… and 120.6557…
		{"yearly over a leap year", day(2028, 1, 1), day(2028, 7, 1), day(2029, 1, 1), billing.TermYearly,
			"A:v1", "B:v1", "60.33", "120.66", "300.33", [2]string{"12000*15897600/31622400", "24000*15897600/31622400"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newProrationEnv(t, memoryUserStores()[0], tc.start)
			e.paidPeriod(t, tc.from, tc.term)
			require.Equal(t, 1, e.pay.CallCount())
			e.clock.Set(tc.at)
			req := billing.ChangePlanRequest{UserRequest: ur(e.user, "change-1"), Tier: tc.to}
			preview, err := e.c.PreviewChangePlan(t.Context(), req, time.Time{})
			require.NoError(t, err)
			ch, err := e.c.ChangePlan(t.Context(), req)
			require.NoError(t, err)

			require.Len(t, ch.Adjustments, 2)
			credit, charge := ch.Adjustments[0], ch.Adjustments[1]
			assert.True(t, credit.Credit)
			assert.False(t, charge.Credit)
			assert.Equal(t, billing.MustParseAmount(tc.credit), credit.Amount, "credit")
			assert.Equal(t, billing.MustParseAmount(tc.charge), charge.Amount, "charge")
			assert.Equal(t, tc.fractions, [2]string{credit.Fraction, charge.Fraction})
			for _, l := range ch.Adjustments {
				assert.Equal(t, tc.at, l.Start)
				assert.Equal(t, tc.next, l.End)
				assert.Equal(t, "change-1", l.Request)
			}
			assert.Equal(t, ch.Adjustments, preview.Adjustments, "the preview is what the change did")
			assert.Equal(t, billing.MustParseAmount(tc.want), preview.NextChargeAmount)
			assert.Equal(t, tc.next, preview.NextChargeDate)

			v := mustView(t, e.freeEnv)
			assert.Equal(t, billing.MustParseAmount(tc.want), v.NextChargeAmount)
			assert.Equal(t, ch.Adjustments, e.next(t).Adjustments, "on the next period")

			e.runAt(t, tc.next.Add(time.Minute), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 2, "the next charge, once")
			assert.Equal(t, billing.MustParseAmount(tc.want), calls[1].Request.Amount)
		})
	}
}

// TestProrationOnTheInvoice (every layout, in memory and on the local
// DynamoDB server): an upgrade on day 15 of 30 puts the plan, the new
// plan's remaining time and the old plan's unused time on the next
// invoice, whose total is what is charged; the history row of the change
// keeps the exact fractions; the key repeated changes nothing more, and
// given with another proration is refused.
func TestProrationOnTheInvoice(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newProrationEnv(t, st, nov1)
			e.paidPeriod(t, "A:v1", billing.TermMonthly)
			e.clock.Set(nov1.AddDate(0, 0, 15))
			req := billing.ChangePlanRequest{UserRequest: ur(e.user, "up-1"), Tier: "B:v1"}
			first, err := e.c.ChangePlan(ctx, req)
			require.NoError(t, err)
			require.Len(t, first.Adjustments, 2)

			again, err := e.c.ChangePlan(ctx, req)
			require.NoError(t, err)
			assert.True(t, again.Repeated)
			require.Len(t, e.next(t).Adjustments, 2, "a repeat adds nothing")

			req.Proration = billing.ProrateNone
			_, err = e.c.ChangePlan(ctx, req)
			var reused *billing.RequestKeyError
			require.ErrorAs(t, err, &reused)

			rows, err := e.hist.ListByUser(ctx, e.user)
			require.NoError(t, err)
			var fractions []string
			for _, r := range rows {
				if r.Change == billing.EventTierChanged {
					for _, a := range r.Adjustments {
						fractions = append(fractions, a.Fraction)
					}
				}
			}
			assert.Equal(t, []string{"1000*1296000/2592000", "2000*1296000/2592000"}, fractions, "the history row keeps the exact fractions")

			e.runAt(t, nov1.AddDate(0, 1, 0).Add(time.Minute), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 2)
			assert.Equal(t, billing.MustParseAmount("25.00"), calls[1].Request.Amount)

			invs := e.invoices(t)
			require.Len(t, invs, 2)
			inv := invs[1]
			type line struct {
				Kind   billing.LineKind
				Amount int64
			}
			var lines []line
			for _, l := range inv.Lines {
				lines = append(lines, line{l.Kind, l.Amount})
			}
			assert.Equal(t, []line{{billing.LinePlan, 2000}, {billing.LineProration, 1000}, {billing.LineUnusedTime, 500}}, lines)
			assert.Equal(t, int64(2500), inv.Total)
			assert.Equal(t, int64(2500), inv.AmountPaid)
			assert.Equal(t, billing.InvoicePaid, inv.Status)
			assert.Equal(t, billing.Amount(inv.Total), calls[1].Request.Amount, "what is charged is the invoice's total")

			// The period after carries nothing: the plan alone.
			assert.Empty(t, e.next(t).Adjustments)
			assert.Equal(t, billing.MustParseAmount("20.00"), e.next(t).Amount)
		})
	}
}

// TestProrationDowngradeCreditGoesToBalance: a downgrade from $30 to $5
// on the second day of 30 credits $29.00 and charges $4.83 for the rest
// of the period: more than the next charge. That charge is zero (no call
// to the processor, never a negative one), the rest is the customer's
// balance, which pays the following periods until it runs out: nothing is
// refunded and no cent is lost.
func TestProrationDowngradeCreditGoesToBalance(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			e := newProrationEnv(t, st, nov1)
			e.paidPeriod(t, "C:v1", billing.TermMonthly)
			e.clock.Set(nov1.AddDate(0, 0, 1))
			ch, err := e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "down-1"), Tier: "D:v1"})
			require.NoError(t, err)
			require.Len(t, ch.Adjustments, 2)
			assert.Equal(t, billing.MustParseAmount("29.00"), ch.Adjustments[0].Amount)
			assert.Equal(t, billing.MustParseAmount("4.83"), ch.Adjustments[1].Amount)
			assert.Equal(t, billing.Amount(0), mustView(t, e.freeEnv).NextChargeAmount)

			// 5.00 + 4.83 - 29.00 leaves 19.17 of balance after December;
			// January to March are paid by it, April pays 0.83 of 5.00.
			wantBalance := []string{"19.17", "14.17", "9.17", "4.17", "0.00", "0.00"}
			var charged []billing.Amount
			events := 0
			for i, b := range wantBalance {
				e.runAt(t, nov1.AddDate(0, i+1, 0).Add(time.Minute), billing.RunScheduled)
				assert.Equal(t, billing.MustParseAmount(b), e.next(t).Balance, "balance after month %d", i+1)
				assert.Equal(t, billing.MustParseAmount(b), mustView(t, e.freeEnv).Balance)
				if got := e.events.OfType(billing.EventBalanceChanged); len(got) > events {
					assert.Equal(t, billing.MustParseAmount(b), got[len(got)-1].Amount, "the event says the balance after")
					events = len(got)
				}
			}
			assert.Equal(t, 5, events, "one event per change: 19.17, 14.17, 9.17, 4.17, 0.00")
			for _, c := range e.pay.Calls()[1:] {
				charged = append(charged, c.Request.Amount)
			}
			assert.Equal(t, []billing.Amount{billing.MustParseAmount("0.83"), billing.MustParseAmount("5.00")}, charged)

			// Every period has its invoice: the four the balance and the
			// credit covered are paid without a charge, and show it.
			invs := e.invoices(t)
			require.Len(t, invs, 7, "November, then December to May")
			type doc struct {
				Total, Paid, Due int64
				Covered          bool
			}
			var docs []doc
			for _, inv := range invs[1:] {
				assert.Equal(t, billing.InvoicePaid, inv.Status)
				docs = append(docs, doc{inv.Total, inv.AmountPaid, inv.AmountDue, strings.HasPrefix(inv.TransactionID, "covered:")})
			}
			assert.Equal(t, []doc{{0, 0, 0, true}, {500, 500, 0, true}, {500, 500, 0, true}, {500, 500, 0, true},
				{500, 500, 0, false}, {500, 500, 0, false}}, docs)
			var dec []billing.LineKind
			for _, l := range invs[1].Lines {
				dec = append(dec, l.Kind)
			}
			assert.Equal(t, []billing.LineKind{billing.LinePlan, billing.LineProration, billing.LineUnusedTime}, dec,
				"December: the plan and the change's lines, the credit capped at what they come to")
			var jan []string
			for _, l := range invs[2].Lines {
				jan = append(jan, fmt.Sprint(l.Kind, " ", l.Amount))
			}
			assert.Equal(t, []string{"plan 500", "credit 500"}, jan, "January: paid by the balance")
			// Every cent of the credit is accounted for: 19.17 of balance
			// paid 5.00 × 3 + 4.17.
		})
	}
}

// TestProrationSameDayFromFreePlanChargesOnce: Kill Bill raised "double
// billing" on a same-day change from a $0 plan. Here the free period
// credits nothing, the new plan's remaining time is charged once with the
// next period, and nothing else is charged.
func TestProrationSameDayFromFreePlanChargesOnce(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	e := newProrationEnv(t, memoryUserStores()[0], nov1)
	e.paidPeriod(t, "Z:v1", billing.TermMonthly)
	require.Zero(t, e.pay.CallCount(), "a free period is not charged")
	e.clock.Set(nov1.Add(2 * time.Hour))
	ch, err := e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "up-1"), Tier: "B:v1"})
	require.NoError(t, err)
	require.Len(t, ch.Adjustments, 2)
	assert.Zero(t, ch.Adjustments[0].Amount, "nothing was paid: nothing to credit")
	// 20.00 × (30 days - 2 hours) / 30 days = 19.9444…
	assert.Equal(t, billing.MustParseAmount("19.94"), ch.Adjustments[1].Amount)
	e.runAt(t, nov1.Add(3*time.Hour), billing.RunScheduled)
	require.Zero(t, e.pay.CallCount(), "nothing more is due before the next period")
	e.runAt(t, nov1.AddDate(0, 1, 0).Add(time.Minute), billing.RunScheduled)
	calls := e.pay.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, billing.MustParseAmount("39.94"), calls[0].Request.Amount)
}

// TestProrationOfChangeRules: a change at the next period, a change
// without proration and a change during a trial add no lines; an unknown
// proration is a field error.
func TestProrationOfChangeRules(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	e := newProrationEnv(t, memoryUserStores()[0], nov1)
	e.paidPeriod(t, "A:v1", billing.TermMonthly)
	e.clock.Set(nov1.AddDate(0, 0, 10))
	ctx := t.Context()

	ch, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "k1"), Tier: "B:v1", Proration: billing.ProrateNone})
	require.NoError(t, err)
	assert.Empty(t, ch.Adjustments)
	assert.Equal(t, billing.MustParseAmount("20.00"), mustView(t, e.freeEnv).NextChargeAmount)

	ch, err = e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "k2"), Tier: "A:v1", When: billing.ChangeAtNextPeriod})
	require.NoError(t, err)
	assert.Empty(t, ch.Adjustments)

	_, err = e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "k3"), Tier: "C:v1", When: billing.ChangeAtNextPeriod, Proration: billing.ProrateNextCharge})
	var fe *billing.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "Proration", fe.Field)
	_, err = e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "k4"), Tier: "C:v1", Proration: "DAILY"})
	require.ErrorAs(t, err, &fe)
	assert.Empty(t, e.next(t).Adjustments)

	trial := newProrationEnv(t, memoryUserStores()[0], nov1)
	_, err = trial.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "t", UserID: trial.user, Tier: "A:v1", TrialDays: 14})
	require.NoError(t, err)
	trial.runAt(t, nov1.Add(time.Minute), billing.RunScheduled)
	trial.clock.Set(nov1.AddDate(0, 0, 3))
	ch, err = trial.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(trial.user, "t1"), Tier: "B:v1"})
	require.NoError(t, err)
	assert.Empty(t, ch.Adjustments, "nothing is paid during a trial")
}

// TestProrationSequencesStayBounded is a property test: any sequence of
// plan changes inside one paid period (random plans, $0 to $99.99, at
// random instants) never bills that period more than the highest plan's
// full price for it, nor less than zero; no credit is more than what was
// paid or owed and not credited yet; and the next charge is the plan with
// the lines, less the balance, never negative, and what the processor is
// asked for. A failing seed is named and replays alone.
func TestProrationSequencesStayBounded(t *testing.T) {
	t.Parallel()
	prices := billing.PriceListMap{}
	tiers := []string{"P0:v1", "P1:v1", "P2:v1", "P3:v1", "P4:v1", "P5:v1"}
	for i, tier := range tiers {
		prices[tier] = []billing.Amount{0, 333, 999, 2000, 4999, 9999}[i]
	}
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	end := nov1.AddDate(0, 1, 0)
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 43))
			e := newInvoiceEnv(t, memoryUserStores()[rng.IntN(2)], func(c *billing.Config) { c.Prices = prices })
			e.clock.Set(nov1)
			cur := tiers[rng.IntN(len(tiers))]
			e.paidPeriod(t, cur, billing.TermMonthly)
			paid := prices[cur]
			top := paid
			at := nov1
			for n := rng.IntN(6) + 1; n > 0; n-- {
				at = at.Add(time.Duration(rng.Int64N(int64(end.Sub(at))/2 + 1)))
				to := tiers[rng.IntN(len(tiers))]
				if to == cur {
					continue
				}
				e.clock.Set(at)
				before := e.next(t)
				ch, err := e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, fmt.Sprint("c", n)), Tier: to})
				require.NoError(t, err)
				cur, top = to, max(top, prices[to])
				var paidFor, credited billing.Amount = paid, 0
				for _, a := range before.Adjustments {
					if a.Credit {
						credited += a.Amount
					} else {
						paidFor += a.Amount
					}
				}
				for _, a := range ch.Adjustments {
					if a.Credit {
						assert.LessOrEqual(t, a.Amount, paidFor-credited, "a credit is at most what is paid and not credited")
					}
				}
			}
			next := e.next(t)
			var period billing.Amount = paid
			for _, a := range next.Adjustments {
				if a.Credit {
					period -= a.Amount
				} else {
					period += a.Amount
				}
			}
			assert.GreaterOrEqual(t, period, billing.Amount(0), "the period is never billed below zero")
			assert.LessOrEqual(t, period, top, "nor above the highest plan's full price")
			due, applied, left := next.Due()
			assert.GreaterOrEqual(t, due, billing.Amount(0))
			assert.Equal(t, max(next.Amount+period-paid, 0), due+applied)
			assert.Equal(t, max(paid-period-next.Amount, 0), left)

			e.runAt(t, end.Add(time.Minute), billing.RunScheduled)
			calls := e.pay.Calls()
			if paid == 0 {
				calls = append([]billingtest.Call{{}}, calls...)
			}
			if due == 0 {
				assert.Len(t, calls, 1, "nothing is charged at zero")
				return
			}
			require.Len(t, calls, 2)
			assert.Equal(t, due, calls[1].Request.Amount, "the processor is asked for the next charge")
			if invs := e.invoices(t); assert.NotEmpty(t, invs) {
				last := invs[len(invs)-1]
				assert.Equal(t, int64(due), last.Total, "the invoice's total is the charge")
			}
		})
	}
}

// TestProrationDateMoveIntoPaidPeriod (every layout): the user moves the
// renewal (3 March, the end of the paid period from 3 February) to 20
// February. The move is prorated: the renewal is charged on the 20th, a
// full period from then, less the 11 days of 28 it paid for already
// (9.99 × 11 / 28 = 3.9246… → 3.92): 6.07, once; the period after costs
// the plan again.
func TestProrationDateMoveIntoPaidPeriod(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newUserEnv(t, st)
			e.subscribeAndPay(t)
			e.clock.Set(feb3.AddDate(0, 0, 7))
			to := feb3.AddDate(0, 0, 17) // 20 February, 09:00
			ch, err := e.c.MoveBillingDate(t.Context(), billing.MoveBillingDateRequest{UserRequest: ur(e.user, "m1"), Date: to})
			require.NoError(t, err)
			require.Len(t, ch.Adjustments, 1)
			credit := ch.Adjustments[0]
			assert.True(t, credit.Credit)
			assert.Equal(t, billing.MustParseAmount("3.92"), credit.Amount)
			assert.Equal(t, "999*950400/2419200", credit.Fraction)
			assert.Equal(t, to, credit.Start)
			assert.Equal(t, feb3.AddDate(0, 1, 0), credit.End)
			renewal := e.latestRec(t)
			assert.Equal(t, to, renewal.BillingDate)
			assert.Equal(t, billing.MustParseAmount("6.07"), ch.Subscription.NextChargeAmount)

			e.clock.Set(to.Add(time.Hour))
			_, err = e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
			require.NoError(t, err)
			calls := e.pay.Calls()
			require.Len(t, calls, 2)
			assert.Equal(t, billing.MustParseAmount("6.07"), calls[1].Request.Amount)
			next := e.latestRec(t)
			assert.Equal(t, to.AddDate(0, 1, 0), next.BillingDate, "a full period from the 20th")
			v, err := e.c.Subscription(t.Context(), e.user)
			require.NoError(t, err)
			assert.Equal(t, to.AddDate(0, 1, 0), v.PaidThrough, "the paid month ended where the moved one started")
			assert.Equal(t, billing.MustParseAmount("9.99"), next.Amount)
			assert.Empty(t, next.Adjustments)
		})
	}
}

// TestProrationTermChangeStartsAFullPeriodNow (every layout): on day 15
// of a 30-day month a monthly $10.00 plan becomes yearly at $120.00. The
// next period starts at that instant, a full year at the yearly price,
// less the 15 unused days of the month paid ($5.00): one charge of
// $115.00 by the next run, and the year after is billed from that day.
// A term change at the next period is refused; without proration
// nothing is credited.
func TestProrationTermChangeStartsAFullPeriodNow(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := nov1.AddDate(0, 0, 15)
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newProrationEnv(t, st, nov1)
			e.paidPeriod(t, "A:v1", billing.TermMonthly)
			e.clock.Set(at)
			_, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "y0"), Tier: "A:v1", Term: billing.TermYearly, When: billing.ChangeAtNextPeriod})
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe)

			yearly := billing.ChangePlanRequest{UserRequest: ur(e.user, "y1"), Tier: "A:v1", Term: billing.TermYearly}
			preview, err := e.c.PreviewChangePlan(ctx, yearly, time.Time{})
			require.NoError(t, err)
			ch, err := e.c.ChangePlan(ctx, yearly)
			require.NoError(t, err)
			require.Len(t, ch.Adjustments, 1)
			assert.Equal(t, ch.Adjustments, preview.Adjustments)
			assert.Equal(t, billing.MustParseAmount("115.00"), preview.NextChargeAmount)
			assert.Equal(t, at, preview.NextChargeDate)
			assert.True(t, ch.Adjustments[0].Credit)
			assert.Equal(t, billing.MustParseAmount("5.00"), ch.Adjustments[0].Amount)
			next := e.next(t)
			assert.Equal(t, at, next.BillingDate, "the new period starts now")
			assert.Equal(t, billing.TermYearly, next.Term)
			assert.Equal(t, billing.MustParseAmount("120.00"), next.Amount)
			assert.Equal(t, billing.MustParseAmount("115.00"), ch.Subscription.NextChargeAmount)
			assert.Equal(t, at, ch.Subscription.NextChargeDate)

			again, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "y1"), Tier: "A:v1", Term: billing.TermYearly})
			require.NoError(t, err)
			assert.True(t, again.Repeated)

			e.runAt(t, at.Add(time.Minute), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 2)
			assert.Equal(t, billing.MustParseAmount("115.00"), calls[1].Request.Amount)
			after := e.next(t)
			assert.Equal(t, at.AddDate(1, 0, 0), after.BillingDate, "a year from the change")
			v := mustView(t, e.freeEnv)
			assert.Equal(t, at, v.CurrentPeriodStart)
			assert.Equal(t, at.AddDate(1, 0, 0), v.PaidThrough)
			// Cancelled now a month in, the refund is the year's unused share.
			e.clock.Set(at.AddDate(0, 1, 0))
			left, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "cancel"), When: billing.CancelNow})
			require.NoError(t, err)
			// 120.00 × (365 - 30) / 365 days = 110.136…
			assert.Equal(t, billing.MustParseAmount("110.13"), left.Refund)
			assert.Equal(t, billing.MustParseAmount("120.00"), after.Amount)
		})
	}
}

// lossyInvoices loses the answer of its k-th change (CreateDraft,
// Finalize, MarkPaid), made all the same: a crash after the store applied
// it.
type lossyInvoices struct {
	billing.Invoices
	k, n int
}

func (l *lossyInvoices) lose() bool { l.n++; return l.n == l.k }

func (l *lossyInvoices) CreateDraft(ctx context.Context, inv *billing.Invoice) (billing.Invoice, error) {
	out, err := l.Invoices.CreateDraft(ctx, inv)
	if err == nil && l.lose() {
		return billing.Invoice{}, errors.New("answer lost")
	}
	return out, err
}

func (l *lossyInvoices) Finalize(ctx context.Context, id string, at time.Time) (billing.Invoice, error) {
	out, err := l.Invoices.Finalize(ctx, id, at)
	if err == nil && l.lose() {
		return billing.Invoice{}, errors.New("answer lost")
	}
	return out, err
}

func (l *lossyInvoices) MarkPaid(ctx context.Context, id, tx string, at time.Time) (billing.Invoice, error) {
	out, err := l.Invoices.MarkPaid(ctx, id, tx, at)
	if err == nil && l.lose() {
		return billing.Invoice{}, errors.New("answer lost")
	}
	return out, err
}

// TestCoveredInvoiceOnceWhateverIsLost: the invoice of a charge a
// downgrade's credit covers is issued before the period completes; with
// the answer of each of its store calls lost in turn, the run failing and
// the next one going on, the period has one invoice, numbered after
// November's without a gap, paid as covered, and nothing is charged.
func TestCoveredInvoiceOnceWhateverIsLost(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for k := 1; k <= 4; k++ {
		t.Run(fmt.Sprint("lose=", k), func(t *testing.T) {
			t.Parallel()
			lossy := &lossyInvoices{}
			e := newInvoiceEnv(t, memoryUserStores()[0], func(c *billing.Config) {
				c.Prices = prorationPrices
				lossy.Invoices = c.Invoices
				c.Invoices = lossy
			})
			e.clock.Set(nov1)
			e.paidPeriod(t, "C:v1", billing.TermMonthly)
			e.clock.Set(nov1.AddDate(0, 0, 1))
			_, err := e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "down"), Tier: "D:v1"})
			require.NoError(t, err)
			dec := e.next(t)
			lossy.k, lossy.n = k, 0
			e.clock.Set(nov1.AddDate(0, 1, 0).Add(time.Minute))
			_, _ = e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
			e.runAt(t, nov1.AddDate(0, 1, 0).Add(time.Hour), billing.RunScheduled)

			require.Equal(t, 1, e.pay.CallCount(), "November only: December is covered")
			var decInvs []billing.Invoice
			for _, inv := range e.invoices(t) {
				if slices.Contains(inv.PeriodIDs, dec.SubscriptionID) {
					decInvs = append(decInvs, inv)
				}
			}
			require.Len(t, decInvs, 1, "one invoice for the period")
			assert.Equal(t, billing.InvoicePaid, decInvs[0].Status)
			assert.Equal(t, "covered:"+dec.SubscriptionID, decInvs[0].TransactionID)
			assert.Equal(t, "ACME-0002", decInvs[0].Number, "no number skipped")
		})
	}
}
