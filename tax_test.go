package billing_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

// taxEnv is a collector issuing invoices, with a fake tax engine and a
// $10.00 plan (Plus:v2).
type taxEnv struct {
	*invoiceEnv
	tax *billingtest.TaxRate
}

func newTaxEnv(t *testing.T, st userStore, tax *billingtest.TaxRate, mut ...func(*billing.Config)) *taxEnv {
	t.Helper()
	e := &taxEnv{tax: tax}
	e.invoiceEnv = newInvoiceEnv(t, st, append([]func(*billing.Config){func(c *billing.Config) {
		c.Tax = tax
		c.Prices = billing.PriceListMap{"Plus:v2": billing.MustParseAmount("10.00")}
	}}, mut...)...)
	return e
}

// subscribe subscribes the user to Plus:v2 ($10.00) and returns the
// first period, due at once; change, when not nil, is applied to it as
// stored (a coupon, a proration line, a balance).
func (e *taxEnv) subscribe(t *testing.T, change func(*billing.Period)) billing.Period {
	t.Helper()
	sub, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	rec, err := e.repo.GetByID(t.Context(), sub.Subscription.SubscriptionID)
	require.NoError(t, err)
	if change == nil {
		return rec
	}
	next := rec.Clone()
	change(&next)
	next.LastRunDate = rec.LastRunDate.Add(time.Second)
	require.NoError(t, e.repo.Update(t.Context(), &rec, &next))
	return next
}

// run runs the scheduled collection at at and returns its report, which
// may list failures.
func (e *taxEnv) run(t *testing.T, at time.Time, kind billing.RunKind) *billing.Report {
	t.Helper()
	e.clock.Set(at)
	rep, err := e.c.Run(t.Context(), billing.RunRequest{Kind: kind})
	require.NoError(t, err)
	return rep
}

func (e *taxEnv) period(t *testing.T, id string) billing.Period {
	t.Helper()
	p, err := e.repo.GetByID(t.Context(), id)
	require.NoError(t, err)
	return p
}

// lineAmounts returns the kinds and amounts of inv's lines.
func lineAmounts(inv billing.Invoice) map[billing.LineKind]int64 {
	out := map[billing.LineKind]int64{}
	for _, l := range inv.Lines {
		out[l.Kind] += l.Amount
	}
	return out
}

// TestTaxExclusiveAndInclusive: 20 % on $10.00 with exclusive prices
// charges $12.00 (the provider asked about $10.00), with a tax line on
// the invoice adding to its total; with inclusive prices it charges
// $10.00, of which $1.67 is tax. The period keeps the tax (and its history
// row shows it); the next period does not carry it.
func TestTaxExclusiveAndInclusive(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		for _, tc := range []struct {
			name                   string
			inclusive              bool
			charged, tax, total    int64
			wantLines              map[billing.LineKind]int64
			wantDescription, descr string
		}{
			{"exclusive", false, 1200, 200, 1200, map[billing.LineKind]int64{billing.LinePlan: 1000, billing.LineTax: 200}, "VAT 20%", "VAT 20%"},
			{"inclusive", true, 1000, 167, 1000, map[billing.LineKind]int64{billing.LinePlan: 1000, billing.LineTax: 167}, "Tax", ""},
		} {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := newTaxEnv(t, st, &billingtest.TaxRate{BasisPoints: 2000, Inclusive: tc.inclusive, Description: tc.descr})
				first := e.subscribe(t, nil)
				e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)

				calls := e.pay.Calls()
				require.Len(t, calls, 1)
				assert.Equal(t, billing.Amount(tc.charged), calls[0].Request.Amount, "charged")
				taxCalls := e.tax.Calls()
				require.Len(t, taxCalls, 1)
				assert.Equal(t, billing.Amount(1000), taxCalls[0].Amount, "taxable")
				assert.Equal(t, "USD", taxCalls[0].Currency)
				assert.Equal(t, first.SubscriptionID, taxCalls[0].SubscriptionID)
				assert.Equal(t, "Plus:v2", taxCalls[0].Tier)

				invs := e.invoices(t)
				require.Len(t, invs, 1)
				inv := invs[0]
				assert.Equal(t, tc.wantLines, lineAmounts(inv))
				assert.Equal(t, tc.tax, inv.Tax)
				assert.Equal(t, tc.total, inv.Total)
				assert.Equal(t, tc.inclusive, inv.TaxInclusive)
				assert.Equal(t, billing.InvoicePaid, inv.Status)
				assert.Equal(t, tc.charged, inv.AmountPaid)
				require.NoError(t, inv.Validate())
				for _, l := range inv.Lines {
					if l.Kind == billing.LineTax {
						assert.Equal(t, tc.wantDescription, l.Description)
					}
				}

				paid := e.period(t, first.SubscriptionID)
				assert.Equal(t, billing.StatusCompleted, paid.Status)
				assert.Equal(t, billing.Tax{Amount: billing.Amount(tc.tax), Inclusive: tc.inclusive, Description: tc.wantDescription}, paid.Tax)
				rows, err := e.hist.ListByUser(t.Context(), e.user)
				require.NoError(t, err)
				var completed int
				for _, r := range rows {
					if r.SubscriptionID == first.SubscriptionID && r.Status == billing.StatusCompleted {
						completed++
						assert.Equal(t, paid.Tax, r.Tax, "the history row shows the tax")
					}
				}
				assert.Equal(t, 1, completed)
				for _, r := range e.records(t) {
					if r.SubscriptionID != first.SubscriptionID {
						assert.False(t, r.Tax.Fixed(), "the next period carries no tax")
					}
				}
			})
		}
	}
}

// TestTaxOrder: a 25 % coupon and a $2.00 proration charge, then the tax
// on what they leave, then the customer's balance: $10.00 less 25 % is
// $7.50, with $2.00 is $9.50, taxed 20 % ($1.90) is $11.40. A $5.00
// balance pays part of it ($6.40 charged, none left); a $12.00 balance
// pays all of it (nothing charged, the invoice paid by the balance with
// its tax line) and $0.60 goes on to the next period.
func TestTaxOrder(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		for _, tc := range []struct {
			name           string
			balance        billing.Amount
			charged        int64 // 0: no charge
			applied, after billing.Amount
		}{
			{"balance pays part", 500, 640, 500, 0},
			{"balance pays all", 1200, 0, 1140, 60},
		} {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := newTaxEnv(t, st, &billingtest.TaxRate{BasisPoints: 2000, Description: "VAT 20%"})
				first := e.subscribe(t, func(p *billing.Period) {
					p.Discounts = []billing.Discount{{CouponID: "quarter", Request: "c1", PercentOff: 2500, ChargesLeft: 1}}
					p.Adjustments = []billing.Adjustment{{Request: "chg", Description: "Remaining time on Pro", Tier: "Pro:v1",
						PeriodID: "before", Start: feb3.AddDate(0, 0, -10), End: feb3, Length: 28 * 86400,
						Price: 560, Amount: 200, Fraction: "560*864000/2419200"}}
					p.Balance = tc.balance
				})
				e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)

				taxCalls := e.tax.Calls()
				require.Len(t, taxCalls, 1)
				assert.Equal(t, billing.Amount(950), taxCalls[0].Amount, "taxed after the coupon, with the proration, before the balance")
				calls := e.pay.Calls()
				if tc.charged == 0 {
					assert.Empty(t, calls, "the balance pays all")
				} else {
					require.Len(t, calls, 1)
					assert.Equal(t, billing.Amount(tc.charged), calls[0].Request.Amount)
				}
				invs := e.invoices(t)
				require.Len(t, invs, 1)
				inv := invs[0]
				require.NoError(t, inv.Validate())
				assert.Equal(t, map[billing.LineKind]int64{billing.LinePlan: 1000, billing.LineDiscount: 250,
					billing.LineProration: 200, billing.LineTax: 190, billing.LineCredit: int64(tc.applied)}, lineAmounts(inv))
				assert.Equal(t, int64(1140), inv.Total)
				assert.Equal(t, billing.InvoicePaid, inv.Status)
				assert.Equal(t, inv.Total-int64(tc.applied), tc.charged, "the charge is the total less the balance applied")

				paid := e.period(t, first.SubscriptionID)
				assert.Equal(t, billing.StatusCompleted, paid.Status)
				assert.Equal(t, billing.Amount(190), paid.Tax.Amount)
				var next billing.Period
				for _, r := range e.records(t) {
					if r.SubscriptionID != first.SubscriptionID {
						next = r
					}
				}
				require.NotEmpty(t, next.SubscriptionID, "the next period is open")
				assert.Equal(t, tc.after, next.Balance, "the balance left goes on")
				assert.False(t, next.Tax.Fixed(), "the tax is not carried")
				assert.Empty(t, next.Adjustments)
			})
		}
	}
}

// TestTaxProviderError: a tax engine that fails (or answers a tax that
// cannot be charged) leaves the period as it was: no attempt, no charge,
// no invoice; the run reports it; the next run, with the engine back,
// charges the taxed amount.
func TestTaxProviderError(t *testing.T) {
	t.Parallel()
	down := errors.New("tax engine down")
	for _, tc := range []struct {
		name   string
		err    error
		answer *billing.Tax
		is     error
	}{
		{"error", down, nil, down},
		{"negative", nil, &billing.Tax{Amount: -1}, billing.ErrInvalidAmount},
		{"inclusive over the price", nil, &billing.Tax{Amount: 1001, Inclusive: true}, billing.ErrInvalidAmount},
		{"overflow", nil, &billing.Tax{Amount: billing.MaxAmount}, billing.ErrInvalidAmount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tax := &billingtest.TaxRate{Err: tc.err, Answer: tc.answer}
			e := newTaxEnv(t, memoryUserStores()[0], tax)
			first := e.subscribe(t, nil)
			rep := e.run(t, feb3.Add(time.Hour), billing.RunScheduled)
			require.Len(t, rep.Failed, 1)
			assert.Contains(t, rep.Failed[0].Reason, "tax of "+first.SubscriptionID)
			_, err := e.c.CollectUser(t.Context(), e.user, billing.ProcessWebhook)
			var te *billing.TaxError
			require.ErrorAs(t, err, &te)
			require.ErrorIs(t, err, tc.is)
			assert.Equal(t, first.SubscriptionID, te.SubscriptionID)

			assert.Zero(t, e.pay.CallCount(), "nothing presented to the processor")
			assert.Empty(t, e.invoices(t), "no invoice")
			got := e.period(t, first.SubscriptionID)
			assert.Equal(t, first.LastRunDate, got.LastRunDate, "the record is unchanged")
			assert.Equal(t, billing.Attempt{}, got.LastAttempt)
			assert.False(t, got.Tax.Fixed())
			assert.Equal(t, billing.StatusScheduled, got.Status)

			tax.Err, tax.Answer, tax.BasisPoints = nil, nil, 2000
			e.runAt(t, feb3.Add(2*time.Hour), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 1)
			assert.Equal(t, billing.Amount(1200), calls[0].Request.Amount)
			assert.Equal(t, billing.StatusCompleted, e.period(t, first.SubscriptionID).Status)
		})
	}
}

// TestTaxReplayKeepsAmount: an attempt whose outcome is unknown is
// replayed with the amount it presented, tax included, whatever the tax
// engine would answer now: the engine is not asked again.
func TestTaxReplayKeepsAmount(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			tax := &billingtest.TaxRate{BasisPoints: 2000}
			e := newTaxEnv(t, st, tax)
			first := e.subscribe(t, nil)
			e.pay.SetAttempt(first.SubscriptionID, 1, billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil))
			rep := e.run(t, feb3.Add(time.Hour), billing.RunScheduled)
			assert.Equal(t, 1, rep.Unknown)
			inFlight := e.period(t, first.SubscriptionID)
			require.True(t, inFlight.InFlight())
			assert.Equal(t, billing.Amount(1200), inFlight.LastAttempt.Amount)
			assert.Equal(t, billing.Amount(200), inFlight.Tax.Amount, "the tax is stored with the attempt")

			tax.BasisPoints = 1000 // the engine now answers another tax
			e.runAt(t, feb3.Add(2*time.Hour), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 2)
			for _, c := range calls {
				assert.Equal(t, billing.Amount(1200), c.Request.Amount, "the same amount presented")
				assert.Equal(t, calls[0].Request.IdempotencyKey, c.Request.IdempotencyKey)
			}
			assert.Len(t, tax.Calls(), 1, "a replay does not ask for the tax")
			assert.Len(t, e.pay.ChargesFor(first.SubscriptionID), 1)
			assert.Equal(t, billing.StatusCompleted, e.period(t, first.SubscriptionID).Status)
		})
	}
}

// TestTaxRetryKeepsTax: a declined attempt's retry charges the tax the
// period has (its invoice is numbered with it): the engine is asked once
// for the period.
func TestTaxRetryKeepsTax(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			tax := &billingtest.TaxRate{BasisPoints: 2000}
			e := newTaxEnv(t, st, tax)
			first := e.subscribe(t, nil)
			e.pay.SetUser(e.user, billingtest.Declined("insufficient funds", true), billingtest.Succeeded())
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
			declined := e.period(t, first.SubscriptionID)
			require.Equal(t, billing.StatusError, declined.Status)
			assert.Equal(t, billing.Amount(200), declined.Tax.Amount)

			tax.BasisPoints = 1000
			e.runAt(t, feb3.AddDate(0, 0, 1).Add(2*time.Hour), billing.RunRetry)
			calls := e.pay.Calls()
			require.Len(t, calls, 2)
			assert.Equal(t, billing.Amount(1200), calls[0].Request.Amount)
			assert.Equal(t, billing.Amount(1200), calls[1].Request.Amount, "the retry keeps the tax")
			assert.Len(t, tax.Calls(), 1, "the engine is asked once for the period")
			invs := e.invoices(t)
			require.Len(t, invs, 1, "one invoice for the period")
			assert.Equal(t, billing.InvoicePaid, invs[0].Status)
			assert.Equal(t, int64(1200), invs[0].Total)
		})
	}
}

// TestTaxWithdrawnAttempt: an attempt the processor refuses before acting
// on it (rate limited) is withdrawn with the tax fixed for it: the record
// is as it was, and the next run asks again.
func TestTaxWithdrawnAttempt(t *testing.T) {
	t.Parallel()
	tax := &billingtest.TaxRate{BasisPoints: 2000}
	e := newTaxEnv(t, memoryUserStores()[0], tax, func(c *billing.Config) {
		c.ProcessorBudget = billing.ProcessorBudget{RateLimitRetries: -1, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}
	})
	first := e.subscribe(t, nil)
	e.pay.SetAttempt(first.SubscriptionID, 1, billingtest.RateLimited(0), billingtest.Succeeded())
	e.run(t, feb3.Add(time.Hour), billing.RunScheduled)
	got := e.period(t, first.SubscriptionID)
	require.False(t, got.InFlight())
	assert.Equal(t, billing.StatusScheduled, got.Status)
	assert.False(t, got.Tax.Fixed(), "withdrawn with its attempt")
	assert.Equal(t, first.LastRunDate, got.LastRunDate)

	e.runAt(t, feb3.Add(2*time.Hour), billing.RunScheduled)
	assert.Equal(t, billing.StatusCompleted, e.period(t, first.SubscriptionID).Status)
	assert.Len(t, tax.Calls(), 2)
	calls := e.pay.Calls()
	assert.Equal(t, billing.Amount(1200), calls[len(calls)-1].Request.Amount)
}

// TestTaxInvoiceProperty: over seeded random plans, discounts, proration
// lines, balances and taxes (exclusive and inclusive), the invoice of the
// charge adds up (its lines, signed by kind, sum to its Total, and
// Validate accepts it), what the processor is asked for is the Total less
// the balance applied (nothing when that is zero), and the tax engine is
// asked about the total before tax, once, only when it is above zero.
func TestTaxInvoiceProperty(t *testing.T) {
	t.Parallel()
	kinds := map[string]int{}
	defer func() { t.Logf("cases: %v", kinds) }()
	for seed := uint64(1); seed <= 120; seed++ {
		rng := rand.New(rand.NewPCG(seed, 43))
		st := memoryUserStores()[int(seed)%2]
		tax := &billingtest.TaxRate{BasisPoints: rng.Int64N(3001), Inclusive: rng.IntN(2) == 0}
		e := newTaxEnv(t, st, tax)
		plan := billing.Amount(100 + rng.Int64N(50000))
		first := e.subscribe(t, func(p *billing.Period) {
			p.Amount = plan
			for i := range rng.IntN(3) {
				d := billing.Discount{CouponID: fmt.Sprintf("c%d", i), Request: fmt.Sprintf("r%d", i), ChargesLeft: 1}
				if rng.IntN(2) == 0 {
					d.PercentOff = 1 + rng.IntN(10000)
				} else {
					d.AmountOff = billing.Amount(1 + rng.Int64N(int64(plan)))
				}
				p.Discounts = append(p.Discounts, d)
			}
			for i := range rng.IntN(4) {
				p.Adjustments = append(p.Adjustments, billing.Adjustment{Request: fmt.Sprintf("chg%d", i), Description: "line",
					PeriodID: "before", Start: feb3.AddDate(0, 0, -10), End: feb3, Length: 28 * 86400,
					Price: plan, Amount: billing.Amount(1 + rng.Int64N(int64(plan))), Credit: rng.IntN(2) == 0, Fraction: "x"})
			}
			if rng.IntN(3) > 0 {
				p.Balance = billing.Amount(rng.Int64N(2 * int64(plan)))
			}
		})
		e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)

		what := fmt.Sprintf("seed %d (%s)", seed, st.name)
		invs := e.invoices(t)
		require.Len(t, invs, 1, what)
		inv := invs[0]
		require.NoError(t, inv.Validate(), what)
		sum := int64(0)
		var applied int64
		for _, l := range inv.Lines {
			switch l.Kind {
			case billing.LinePlan, billing.LineProration:
				sum += l.Amount
			case billing.LineTax:
				if !inv.TaxInclusive {
					sum += l.Amount
				}
			case billing.LineDiscount, billing.LineUnusedTime:
				sum -= l.Amount
			case billing.LineCredit:
				applied += l.Amount
			}
		}
		assert.Equal(t, inv.Total, sum, "%s: the lines sum to the total", what)
		calls := e.pay.Calls()
		kinds[fmt.Sprintf("inclusive=%v charged=%v balance=%v taxed=%v", inv.TaxInclusive, inv.Total > applied, applied > 0, inv.Tax > 0)]++
		if charge := inv.Total - applied; charge > 0 {
			require.Len(t, calls, 1, what)
			assert.Equal(t, billing.Amount(charge), calls[0].Request.Amount, "%s: charged the total less the balance applied", what)
		} else {
			assert.Empty(t, calls, "%s: nothing to charge", what)
		}
		assert.Equal(t, billing.InvoicePaid, inv.Status, what)
		taxCalls := tax.Calls()
		if taxable := inv.Subtotal - inv.Discounts; taxable > 0 {
			require.Len(t, taxCalls, 1, what)
			assert.Equal(t, billing.Amount(taxable), taxCalls[0].Amount, "%s: the total before tax is taxed", what)
			assert.Equal(t, int64(e.period(t, first.SubscriptionID).Tax.Amount), inv.Tax, what)
		} else {
			assert.Empty(t, taxCalls, "%s: a charge of zero is not taxed", what)
			assert.Zero(t, inv.Tax, what)
		}
	}
}
