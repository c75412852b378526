package billing_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// paidMonth subscribes the user to Plus:v2 on feb3 and charges the first
// period (3 February to 3 March).
func paidMonth(t *testing.T, e *freeEnv) {
	t.Helper()
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	require.Equal(t, 1, e.pay.CallCount())
}

// TestCancelNowWithRefundEndsAccess (every layout, in memory and on the
// local DynamoDB server): after Cancel now, whose answer
// tells the host to refund the unused share of the paid period, the view
// still said paid through the old period's end (a host gating access on
// it kept granting it) and a come-back that day was refused "inside the
// user's paid period". The refunded time is no longer paid: the view's
// PaidThrough is the cancel's instant, and a come-back the same day is
// accepted and charged in full from that day, its schedule anchored on
// it. A come-back on the cancelled renewal's date keeps the refunded
// time unpaid: a second cancellation now refunds nothing again. Without
// a refund (at period end) the paid period runs to its end as before.
func TestCancelNowWithRefundEndsAccess(t *testing.T) {
	t.Parallel()
	mar3 := feb3.AddDate(0, 1, 0)
	cancelAt := feb3.AddDate(0, 0, 10) // 13 February, 09:00
	for _, st := range userStores() {
		t.Run("come back today/"+st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newTrialEnv(t, st)
			paidMonth(t, e)
			e.clock.Set(cancelAt)
			left, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "c1"), When: billing.CancelNow})
			require.NoError(t, err)
			assert.Equal(t, cancelAt, left.AccessUntil)
			// 18 of the period's 28 days, rounded down: 9.99 × 18 / 28.
			assert.Equal(t, billing.MustParseAmount("6.42"), left.Refund)

			v := mustView(t, e)
			assert.Equal(t, billing.SubscriptionEnded, v.Status)
			assert.Equal(t, cancelAt, v.PaidThrough, "access ends at the cancel")
			for _, r := range e.records(t) {
				if r.Status == billing.StatusCancelled {
					assert.Equal(t, cancelAt, r.AccessEnd.UTC(), "billing_access_end on %s", r.SubscriptionID)
				}
			}

			back := cancelAt.Add(3 * time.Hour) // the same day
			e.clock.Set(back)
			got, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-2", UserID: e.user, Tier: "Plus:v2"})
			require.NoError(t, err, "coming back today")
			assert.Equal(t, back, got.Subscription.BillingDate, "charged from today")
			assert.Equal(t, back.Day(), got.Subscription.AnchorDay)

			e.runAt(t, back.Add(time.Hour), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 2)
			assert.Equal(t, plusPrice, calls[1].Request.Amount, "a full period from today")
			assert.Equal(t, billing.FirstPeriodID(e.user, "order-2"), calls[1].Request.SubscriptionID)
			assert.Equal(t, back, calls[1].Request.BillingDate.UTC())

			v = mustView(t, e)
			assert.Equal(t, billing.SubscriptionActive, v.Status)
			assert.Equal(t, back.AddDate(0, 1, 0), v.PaidThrough, "the come-back's period, not cut")
			assert.Equal(t, back.AddDate(0, 1, 0), v.NextBillingDate)
			require.Len(t, v.Open, 1, "one open period")

			// Its own cancellation now refunds its own unused share.
			e.clock.Set(back.AddDate(0, 0, 7))
			again, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "c2"), When: billing.CancelNow})
			require.NoError(t, err)
			assert.Equal(t, got.Subscription.SubscriptionID, again.RefundPeriodID)
			assert.Equal(t, billing.MustParseAmount("7.49"), again.Refund, "9.99 × 21 / 28")
		})
		t.Run("come back on the renewal/"+st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newTrialEnv(t, st)
			paidMonth(t, e)
			e.clock.Set(cancelAt)
			_, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "c1"), When: billing.CancelNow})
			require.NoError(t, err)
			e.clock.Advance(time.Hour)
			_, err = e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-2", UserID: e.user, Tier: "Plus:v2", FirstBillingDate: mar3})
			require.NoError(t, err)
			reopened := e.latest(t)
			require.Equal(t, mar3, reopened.BillingDate)
			assert.Equal(t, billing.StatusScheduled, reopened.Status)
			assert.Equal(t, cancelAt, reopened.AccessEnd.UTC(), "the refunded time stays unpaid")
			assert.Equal(t, cancelAt, mustView(t, e).PaidThrough)

			e.clock.Advance(time.Hour)
			again, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "c2"), When: billing.CancelNow})
			require.NoError(t, err)
			assert.Zero(t, again.Refund, "refunded once")
			assert.Equal(t, cancelAt, mustView(t, e).PaidThrough)
			assert.Equal(t, 1, e.pay.CallCount())
		})
		t.Run("at period end/"+st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newTrialEnv(t, st)
			paidMonth(t, e)
			e.clock.Set(cancelAt)
			left, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "c1")})
			require.NoError(t, err)
			assert.Equal(t, mar3, left.AccessUntil)
			assert.Zero(t, left.Refund)
			assert.Equal(t, mar3, mustView(t, e).PaidThrough)
			for _, r := range e.records(t) {
				assert.Zero(t, r.AccessEnd, "no end of access at period end")
			}
			e.clock.Advance(time.Hour)
			_, err = e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-2", UserID: e.user, Tier: "Plus:v2"})
			require.ErrorIs(t, err, billing.ErrInvalidDate, "inside the paid period")
			assert.Contains(t, err.Error(), "inside the user's paid period")
		})
	}
}
