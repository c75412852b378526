package billing_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oneOffs returns the user's one-off charges.
func (e *invoiceEnv) oneOffs(t *testing.T) []billing.Period {
	t.Helper()
	var out []billing.Period
	for _, r := range e.records(t) {
		if r.IsOneOff() {
			out = append(out, r)
		}
	}
	return out
}

// TestProrateNowChargesTheUpgradeAtOnce (every layout, in memory and on
// the local DynamoDB server): an upgrade from $10 to $20 on day 15 of 30
// with ProrateNow charges its $5.00 difference in the same call, once,
// under a key of its own, with an invoice of the two lines; the next
// period is the new plan alone; what the subscription shows (plan, next
// charge, paid time) is not moved by the one-off charge; a repeat
// charges nothing more; the next run charges the plan and opens one
// period after it, none after the one-off charge.
func TestProrateNowChargesTheUpgradeAtOnce(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newProrationEnv(t, st, nov1)
			e.paidPeriod(t, "A:v1", billing.TermMonthly)
			e.clock.Set(nov1.AddDate(0, 0, 15))
			req := billing.ChangePlanRequest{UserRequest: ur(e.user, "up-now"), Tier: "B:v1", Proration: billing.ProrateNow}

			preview, err := e.c.PreviewChangePlan(ctx, req, time.Time{})
			require.NoError(t, err)
			assert.Equal(t, billing.MustParseAmount("5.00"), preview.ChargeNow)
			assert.Equal(t, billing.MustParseAmount("20.00"), preview.NextChargeAmount, "the lines are not on the next charge")

			ch, err := e.c.ChangePlan(ctx, req)
			require.NoError(t, err)
			require.NotNil(t, ch.Charge)
			id := billing.OneOffChargeID(e.user, "up-now")
			assert.Equal(t, id, ch.Charge.SubscriptionID)
			assert.Equal(t, billing.StatusCompleted, ch.Charge.Status)
			assert.True(t, ch.Charge.IsOneOff())
			require.Len(t, ch.Adjustments, 2)
			assert.Equal(t, preview.Adjustments, ch.Adjustments, "the preview is what the change did")

			calls := e.pay.Calls()
			require.Len(t, calls, 2, "the first period, then the difference at once")
			assert.Equal(t, billing.MustParseAmount("5.00"), calls[1].Request.Amount)
			assert.Equal(t, billing.IdempotencyKey(id, 1), calls[1].Request.IdempotencyKey)

			next := e.next(t)
			assert.Equal(t, "B:v1", next.ReceiptTierName)
			assert.Equal(t, billing.MustParseAmount("20.00"), next.Amount)
			assert.Empty(t, next.Adjustments, "charged already: not on the next charge")

			v := mustView(t, e.freeEnv)
			assert.Equal(t, billing.SubscriptionActive, v.Status)
			assert.Equal(t, "B:v1", v.Tier)
			assert.Equal(t, billing.MustParseAmount("20.00"), v.NextChargeAmount)
			assert.Equal(t, nov1.AddDate(0, 1, 0), v.NextChargeDate)
			assert.Equal(t, nov1.AddDate(0, 1, 0), v.PaidThrough, "the one-off charge moves no paid time")
			assert.Equal(t, nov1, v.CurrentPeriodStart)

			invs := e.invoices(t)
			require.Len(t, invs, 2)
			type line struct {
				Kind   billing.LineKind
				Amount int64
			}
			var lines []line
			for _, l := range invs[1].Lines {
				lines = append(lines, line{l.Kind, l.Amount})
			}
			assert.Equal(t, []line{{billing.LineProration, 1000}, {billing.LineUnusedTime, 500}}, lines)
			assert.Equal(t, int64(500), invs[1].Total)
			assert.Equal(t, billing.InvoicePaid, invs[1].Status)
			assert.Equal(t, []string{id}, invs[1].PeriodIDs)

			again, err := e.c.ChangePlan(ctx, req)
			require.NoError(t, err)
			assert.True(t, again.Repeated)
			require.NotNil(t, again.Charge)
			assert.Equal(t, billing.StatusCompleted, again.Charge.Status)
			assert.Equal(t, 2, e.pay.CallCount(), "a repeat charges nothing")
			req.Proration = billing.ProrateNextCharge
			_, err = e.c.ChangePlan(ctx, req)
			var reused *billing.RequestKeyError
			require.ErrorAs(t, err, &reused)

			e.runAt(t, nov1.AddDate(0, 1, 0).Add(time.Minute), billing.RunScheduled)
			calls = e.pay.Calls()
			require.Len(t, calls, 3)
			assert.Equal(t, billing.MustParseAmount("20.00"), calls[2].Request.Amount)
			var scheduled []billing.Period
			for _, r := range e.records(t) {
				if r.Status == billing.StatusScheduled {
					scheduled = append(scheduled, r)
				}
			}
			require.Len(t, scheduled, 1, "one period after the charged one, none after the one-off charge")
			assert.Equal(t, nov1.AddDate(0, 2, 0), scheduled[0].BillingDate)
			require.Len(t, e.oneOffs(t), 1)
		})
	}
}

// TestProrateNowDowngradeRidesOnTheNextCharge: with ProrateNow a change
// that credits more than it charges charges nothing now: its lines ride
// on the next charge, as with ProrateNextCharge.
func TestProrateNowDowngradeRidesOnTheNextCharge(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	e := newProrationEnv(t, memoryUserStores()[0], nov1)
	e.paidPeriod(t, "B:v1", billing.TermMonthly)
	e.clock.Set(nov1.AddDate(0, 0, 15))
	ch, err := e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "down"), Tier: "A:v1", Proration: billing.ProrateNow})
	require.NoError(t, err)
	assert.Nil(t, ch.Charge)
	assert.Empty(t, e.oneOffs(t))
	assert.Equal(t, 1, e.pay.CallCount())
	require.Len(t, e.next(t).Adjustments, 2)
	next := e.next(t)
	due, _, _ := next.Due()
	assert.Equal(t, billing.MustParseAmount("5.00"), due, "10.00 less the 10.00 credit plus the 5.00 charge")

	_, err = e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "term"), Tier: "A:v1",
		Term: billing.TermYearly, Proration: billing.ProrateNow})
	var fe *billing.FieldError
	require.ErrorAs(t, err, &fe, "a term change starts a new period: not a one-off charge")
	assert.Equal(t, "Proration", fe.Field)
}

// TestProrateNowDeclinedIsOwed: a declined difference is owed as a
// declined period is: the subscription is past due, the change stands,
// the retry run charges the same one-off charge (naming the declined
// payment), and once paid the subscription is active again; nothing is
// charged twice and no period follows the one-off charge.
func TestProrateNowDeclinedIsOwed(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newProrationEnv(t, st, nov1)
			e.paidPeriod(t, "A:v1", billing.TermMonthly)
			id := billing.OneOffChargeID(e.user, "up")
			e.pay.SetAttempt(id, 1, billingtest.Declined("R01: insufficient funds", true))
			e.clock.Set(nov1.AddDate(0, 0, 15))
			ch, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "up"), Tier: "B:v1", Proration: billing.ProrateNow})
			require.NoError(t, err)
			require.NotNil(t, ch.Charge)
			assert.Equal(t, billing.StatusError, ch.Charge.Status)
			assert.Equal(t, billing.SubscriptionPastDue, ch.Subscription.Status)
			assert.Equal(t, "B:v1", e.next(t).ReceiptTierName, "the change stands")
			assert.Empty(t, e.next(t).Adjustments, "the difference is owed on its own record, not added to the next charge")

			// Owed: a cancellation refuses to forgive it, and another
			// prorated change in the period waits until it is paid (its
			// credit would give back what was not paid).
			_, err = e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "cancel")})
			require.ErrorIs(t, err, billing.ErrNotCollectible)
			_, err = e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "down"), Tier: "A:v1"})
			require.ErrorIs(t, err, billing.ErrNotCollectible)
			assert.Equal(t, "B:v1", e.next(t).ReceiptTierName)

			// The next period moves meanwhile: the one-off charge, once
			// paid, opens no period of its own.
			_, err = e.c.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: ur(e.user, "move"), Date: nov1.AddDate(0, 1, 9)})
			require.NoError(t, err)

			e.runAt(t, nov1.AddDate(0, 0, 17), billing.RunRetry)

			calls := e.pay.Calls()
			require.Len(t, calls, 3)
			assert.Equal(t, id, calls[2].Request.SubscriptionID)
			assert.Equal(t, billing.MustParseAmount("5.00"), calls[2].Request.Amount)
			assert.Equal(t, 2, calls[2].Request.Attempt)
			assert.NotEmpty(t, calls[2].Request.PriorPayment, "the retry names the declined payment")
			v := mustView(t, e.freeEnv)
			assert.Equal(t, billing.SubscriptionActive, v.Status)
			assert.Len(t, e.pay.ChargesFor(id), 1)
			require.Len(t, e.oneOffs(t), 1)
			assert.Equal(t, billing.StatusCompleted, e.oneOffs(t)[0].Status)
			assert.Len(t, e.records(t), 3, "the paid period, the one-off charge, the next period")
			assert.Equal(t, nov1.AddDate(0, 1, 9), e.next(t).BillingDate)
		})
	}
}

// TestProrateNowUnknownOutcomeResolvedByRepeat: when the processor's
// answer to the difference is lost, the change is made and the call
// fails with an *InFlightError; nothing touches the one-off charge until
// a repeat of the request replays the same key and amount, which finds
// it paid: one charge. Another change meanwhile goes on (the one-off
// charge is no period of the schedule).
func TestProrateNowUnknownOutcomeResolvedByRepeat(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newProrationEnv(t, st, nov1)
			e.paidPeriod(t, "A:v1", billing.TermMonthly)
			id := billing.OneOffChargeID(e.user, "up")
			e.pay.SetAttempt(id, 1, billingtest.UnknownAfterCharge(billingtest.Succeeded(), errors.New("connection reset")), billingtest.Succeeded())
			e.clock.Set(nov1.AddDate(0, 0, 15))
			req := billing.ChangePlanRequest{UserRequest: ur(e.user, "up"), Tier: "B:v1", Proration: billing.ProrateNow}
			_, err := e.c.ChangePlan(ctx, req)
			require.ErrorIs(t, err, billing.ErrAttemptInFlight)
			assert.Equal(t, "B:v1", e.next(t).ReceiptTierName, "the change is made")
			require.Len(t, e.oneOffs(t), 1)
			assert.True(t, e.oneOffs(t)[0].InFlight())
			v := mustView(t, e.freeEnv)
			require.Len(t, v.InFlight, 1)

			e.clock.Set(nov1.AddDate(0, 0, 15).Add(time.Hour))
			ch, err := e.c.ChangePlan(ctx, req)
			require.NoError(t, err)
			assert.True(t, ch.Repeated)
			require.NotNil(t, ch.Charge)
			assert.Equal(t, billing.StatusCompleted, ch.Charge.Status)
			assert.Len(t, e.pay.ChargesFor(id), 1, "the replay found the first charge")
			calls := e.pay.Calls()
			assert.Equal(t, calls[1].Request.IdempotencyKey, calls[2].Request.IdempotencyKey)
			assert.Equal(t, calls[1].Request.Amount, calls[2].Request.Amount)

			// A later change goes on beside it.
			_, err = e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "up2"), Tier: "C:v1", Proration: billing.ProrateNow})
			require.NoError(t, err)
			assert.Equal(t, "C:v1", e.next(t).ReceiptTierName)
			assert.Len(t, e.oneOffs(t), 2)
		})
	}
}

// TestProrateNowCancelNowRefundsTheDifference: a cancellation now after
// an upgrade charged at once refunds the unused share of the period and
// of the difference: what B costs for the days left, to the cent
// (rounded down).
func TestProrateNowCancelNowRefundsTheDifference(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	e := newProrationEnv(t, memoryUserStores()[0], nov1)
	e.paidPeriod(t, "A:v1", billing.TermMonthly)
	e.clock.Set(nov1.AddDate(0, 0, 15))
	_, err := e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "up"), Tier: "B:v1", Proration: billing.ProrateNow})
	require.NoError(t, err)
	e.clock.Set(nov1.AddDate(0, 0, 22)) // 8 of 30 days left
	out, err := e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "stop"), When: billing.CancelNow})
	require.NoError(t, err)
	// 10.00×8/30 = 2.666… and (10.00−5.00)×8/15 = 2.666…: 5.33 in all.
	assert.Equal(t, billing.MustParseAmount("5.33"), out.Refund)
}

// TestProrateNowLeftForARun: a difference the processor would not take
// at once (rate-limited: nothing charged) is left SCHEDULED for the next
// run, which charges it; the next period, moved meanwhile, stays the one
// period after the paid one: the one-off charge opens none.
func TestProrateNowLeftForARun(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newProrationEnv(t, st, nov1)
			e.paidPeriod(t, "A:v1", billing.TermMonthly)
			id := billing.OneOffChargeID(e.user, "up")
			e.pay.SetAttempt(id, 1, billingtest.RateLimited(time.Millisecond))
			e.clock.Set(nov1.AddDate(0, 0, 15))
			ch, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "up"), Tier: "B:v1", Proration: billing.ProrateNow})
			require.NoError(t, err)
			require.NotNil(t, ch.Charge)
			assert.Equal(t, billing.StatusScheduled, ch.Charge.Status)
			assert.False(t, ch.Charge.InFlight())
			assert.Empty(t, e.pay.ChargesFor(id))

			_, err = e.c.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: ur(e.user, "move"), Date: nov1.AddDate(0, 1, 9)})
			require.NoError(t, err)
			e.pay.SetAttempt(id, 1)
			e.runAt(t, nov1.AddDate(0, 0, 15).Add(time.Hour), billing.RunScheduled)
			assert.Len(t, e.pay.ChargesFor(id), 1)
			require.Len(t, e.oneOffs(t), 1)
			assert.Equal(t, billing.StatusCompleted, e.oneOffs(t)[0].Status)
			assert.Equal(t, nov1.AddDate(0, 1, 9), e.next(t).BillingDate, "one period after the paid one")
		})
	}
}

// TestProrateNowOneOffIsNeverChanged: the period calls that change a
// period (pause, plan, date) refuse a one-off charge, which charges a
// change made already; waiving it forgives the difference and opens no
// period after it.
func TestProrateNowOneOffIsNeverChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	e := newProrationEnv(t, memoryUserStores()[0], nov1)
	e.paidPeriod(t, "A:v1", billing.TermMonthly)
	id := billing.OneOffChargeID(e.user, "up")
	e.pay.SetAttempt(id, 1, billingtest.Declined("R01: insufficient funds", true))
	e.clock.Set(nov1.AddDate(0, 0, 15))
	_, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "up"), Tier: "B:v1", Proration: billing.ProrateNow})
	require.NoError(t, err)

	_, err = e.c.Periods().Pause(ctx, id, 1)
	require.ErrorIs(t, err, billing.ErrPauseRefused)
	_, err = e.c.Periods().ChangeTier(ctx, id, "C:v1", billing.ListPrice, false)
	require.ErrorIs(t, err, billing.ErrPlanChangeRefused)
	_, err = e.c.Periods().Move(ctx, id, nov1.AddDate(0, 0, 20))
	require.ErrorIs(t, err, billing.ErrNotCollectible)
	o := e.oneOffs(t)
	require.Len(t, o, 1)
	assert.Equal(t, billing.StatusError, o[0].Status)
	assert.Equal(t, billing.Amount(0), o[0].Amount, "unchanged")

	_, err = e.c.Periods().WaiveByID(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, billing.StatusWaived, e.oneOffs(t)[0].Status)
	assert.Len(t, e.records(t), 3, "no period opened after it")
	assert.Equal(t, billing.SubscriptionActive, mustView(t, e.freeEnv).Status)
}

// TestProrateNowTwiceInOnePeriod: a second change in the period credits
// the plan the first one moved to and charged at once, and a change that
// rides on the next charge after one charged at once does too: $10 for
// 15 days of A, then B for 5 days, then C for 10 costs 5.00 + 3.33 +
// 10.00 = 18.33 in all, whichever way each change is billed.
func TestProrateNowTwiceInOnePeriod(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, second := range []billing.Proration{billing.ProrateNow, billing.ProrateNextCharge} {
		t.Run(string(second), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newProrationEnv(t, memoryUserStores()[0], nov1)
			e.paidPeriod(t, "A:v1", billing.TermMonthly)
			e.clock.Set(nov1.AddDate(0, 0, 15))
			_, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "b"), Tier: "B:v1", Proration: billing.ProrateNow})
			require.NoError(t, err)
			e.clock.Set(nov1.AddDate(0, 0, 20))
			req := billing.ChangePlanRequest{UserRequest: ur(e.user, "c"), Tier: "C:v1", Proration: second}
			preview, err := e.c.PreviewChangePlan(ctx, req, time.Time{})
			require.NoError(t, err)
			ch, err := e.c.ChangePlan(ctx, req)
			require.NoError(t, err)
			require.Len(t, ch.Adjustments, 2)
			assert.Equal(t, preview.Adjustments, ch.Adjustments)
			assert.Equal(t, "B:v1", ch.Adjustments[0].Tier, "the plan in force is credited")
			assert.Equal(t, billing.MustParseAmount("6.67"), ch.Adjustments[0].Amount, "20.00 × 10/30")
			assert.Equal(t, billing.MustParseAmount("10.00"), ch.Adjustments[1].Amount, "30.00 × 10/30")

			var paid billing.Amount
			for _, c := range e.pay.Charges() {
				paid += c.Amount
			}
			if second == billing.ProrateNextCharge {
				next := e.next(t)
				due, _, _ := next.Due()
				paid += due - next.Amount // the lines riding on December's charge
			}
			assert.Equal(t, billing.MustParseAmount("18.33"), paid)
		})
	}
}

// TestComeBackKeepsTheCreditOfAChange: a downgrade during a paid month
// leaves its credit and charge on the next period; cancelled at the
// period's end and subscribed again from that date, the subscription goes
// on with them: the first charge of the come-back is what the cancelled
// one would have been, and the customer's balance is kept.
func TestComeBackKeepsTheCreditOfAChange(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	e := newProrationEnv(t, memoryUserStores()[0], nov1)
	e.paidPeriod(t, "B:v1", billing.TermMonthly)
	e.clock.Set(nov1.AddDate(0, 0, 15))
	_, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "down"), Tier: "A:v1"})
	require.NoError(t, err)
	before := e.next(t)
	due, _, _ := before.Due()
	require.Equal(t, billing.MustParseAmount("5.00"), due, "10.00 − 10.00 credit + 5.00")

	_, err = e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "stop")})
	require.NoError(t, err)
	e.clock.Set(nov1.AddDate(0, 0, 20))
	_, err = e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "again", UserID: e.user, Tier: "A:v1",
		FirstBillingDate: nov1.AddDate(0, 1, 0)})
	require.NoError(t, err)
	after := e.next(t)
	assert.Equal(t, before.Adjustments, after.Adjustments, "the change's lines go on")
	e.runAt(t, nov1.AddDate(0, 1, 0).Add(time.Minute), billing.RunScheduled)
	calls := e.pay.Calls()
	require.Len(t, calls, 2)
	assert.Equal(t, billing.MustParseAmount("5.00"), calls[1].Request.Amount)
}

// TestProrationNeverCreditsTimeTwice: a move into the paid period credits
// its rest on the moved charge; while that charge's bank debit is pending
// a plan change finds no paid time left to credit (it was credited
// already), and a move to an instant before a change already prorated
// is refused: that time is priced by the change's lines.
func TestProrationNeverCreditsTimeTwice(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

	e := newProrationEnv(t, memoryUserStores()[0], nov1)
	e.paidPeriod(t, "A:v1", billing.TermMonthly)
	e.clock.Set(nov1.AddDate(0, 0, 15))
	_, err := e.c.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: ur(e.user, "move"), Date: nov1.AddDate(0, 0, 20)})
	require.NoError(t, err)
	moved := e.next(t)
	require.Len(t, moved.Adjustments, 1)
	assert.True(t, moved.Adjustments[0].EndsPeriod)
	e.pay.SetAttempt(moved.SubscriptionID, 1, billingtest.Pending())
	e.runAt(t, nov1.AddDate(0, 0, 20).Add(time.Minute), billing.RunScheduled)
	e.clock.Set(nov1.AddDate(0, 0, 25))
	ch, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "up"), Tier: "B:v1"})
	require.NoError(t, err)
	assert.Empty(t, ch.Adjustments, "the paid period's rest was credited by the move")

	e = newProrationEnv(t, memoryUserStores()[0], nov1)
	e.paidPeriod(t, "A:v1", billing.TermMonthly)
	e.clock.Set(nov1.AddDate(0, 0, 15))
	_, err = e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "up"), Tier: "B:v1"})
	require.NoError(t, err)
	e.clock.Set(nov1.AddDate(0, 0, 20))
	_, err = e.c.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: ur(e.user, "early"), Date: nov1.AddDate(0, 0, 10)})
	var fe *billing.FieldError
	require.ErrorAs(t, err, &fe)
	require.ErrorIs(t, err, billing.ErrInvalidDate)
	_, err = e.c.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: ur(e.user, "later"), Date: nov1.AddDate(0, 0, 22)})
	require.NoError(t, err, "after the change's instant")
	require.Len(t, e.next(t).Adjustments, 3)
}
