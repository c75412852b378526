package billing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/preview"
)

// TestSubscribeRefusesKeyOfAChange (every layout, in memory and on the
// local DynamoDB server): a request key the user gave a change by user —
// a cancel, pause, resume, plan change, date move, trial end or trial
// extension — and then gave Subscribe was applied as a new sign-up (a
// come-back on the cancelled renewal's date). A request key names one
// request across every call: Subscribe refuses it with a
// RequestKeyError naming the key and the call that used it, and writes
// nothing; the same come-back under a key of its own is accepted.
func TestSubscribeRefusesKeyOfAChange(t *testing.T) {
	t.Parallel()
	const key = "k-change"
	paid := func(t *testing.T, e *freeEnv) {
		t.Helper()
		_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2"})
		require.NoError(t, err)
		e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
		require.Equal(t, 1, e.pay.CallCount())
		e.clock.Set(feb3.Add(2 * time.Hour))
	}
	trial := func(t *testing.T, e *freeEnv) {
		t.Helper()
		_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
		require.NoError(t, err)
		e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
		e.clock.Set(feb3.Add(2 * time.Hour))
	}
	cases := []struct {
		name, op string
		setup    func(t *testing.T, e *freeEnv)
		change   func(t *testing.T, e *freeEnv) error
	}{
		{"cancel", "cancel", paid, func(t *testing.T, e *freeEnv) error {
			_, err := e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, key)})
			return err
		}},
		{"pause", "pause", paid, func(t *testing.T, e *freeEnv) error {
			_, err := e.c.Pause(t.Context(), billing.PauseRequest{UserRequest: ur(e.user, key), Months: 1})
			return err
		}},
		{"resume", "resume", paid, func(t *testing.T, e *freeEnv) error {
			_, err := e.c.Pause(t.Context(), billing.PauseRequest{UserRequest: ur(e.user, "k-pause"), Months: 2})
			require.NoError(t, err)
			_, err = e.c.Resume(t.Context(), billing.ResumeRequest{UserRequest: ur(e.user, key)})
			return err
		}},
		{"change plan", "change plan", paid, func(t *testing.T, e *freeEnv) error {
			_, err := e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, key), Tier: "Pro:v1"})
			return err
		}},
		{"move billing date", "move billing date", paid, func(t *testing.T, e *freeEnv) error {
			_, err := e.c.MoveBillingDate(t.Context(), billing.MoveBillingDateRequest{UserRequest: ur(e.user, key), Date: feb3.AddDate(0, 1, 2)})
			return err
		}},
		{"end trial", string(preview.EndTrial), trial, func(t *testing.T, e *freeEnv) error {
			_, err := e.c.EndTrial(t.Context(), ur(e.user, key))
			return err
		}},
		{"extend trial", string(preview.ExtendTrial), trial, func(t *testing.T, e *freeEnv) error {
			_, err := e.c.ExtendTrial(t.Context(), billing.TrialRequest{UserRequest: ur(e.user, key), End: feb3.AddDate(0, 0, 21)})
			return err
		}},
	}
	for _, st := range userStores() {
		for _, tc := range cases {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				e := newTrialEnv(t, st)
				tc.setup(t, e)
				require.NoError(t, tc.change(t, e))
				if tc.op != "cancel" {
					e.clock.Advance(time.Minute)
					_, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "k-leave")})
					require.NoError(t, err)
				}
				// The come-back date a new sign-up may take: the cancelled
				// renewal's, once the paid (or trial) time is over.
				v, err := e.c.Subscription(ctx, e.user)
				require.NoError(t, err)
				// Cancelled at period end: still ACTIVE (TRIALING in a
				// trial) until the paid (or trial) time ends.
				require.Contains(t, []billing.SubscriptionStatus{billing.SubscriptionActive, billing.SubscriptionTrialing}, v.Status)
				require.Equal(t, v.PaidThrough, v.CancelAt)
				date := v.PaidThrough
				for _, r := range e.records(t) {
					if r.Status == billing.StatusCancelled && r.BillingDate.After(date) {
						date = r.BillingDate
					}
				}
				recs, rows := e.records(t), e.changes(t)

				req := billing.SubscribeRequest{RequestKey: key, UserID: e.user, Tier: "Plus:v2", FirstBillingDate: date}
				_, err = e.c.Subscribe(ctx, req)
				require.ErrorIs(t, err, billing.ErrRequestKeyReused)
				var rk *billing.RequestKeyError
				require.ErrorAs(t, err, &rk)
				assert.Equal(t, key, rk.RequestKey)
				assert.Equal(t, e.user, rk.UserID)
				assert.Equal(t, tc.op, rk.Op)
				assert.Contains(t, rk.Fields, "Op")
				assert.Equal(t, recs, e.records(t), "no record written")
				assert.Equal(t, rows, e.changes(t), "no history row written")
				assert.Equal(t, v.Status, mustView(t, e).Status)

				// The same come-back under a key of its own is a sign-up.
				req.RequestKey = "order-2"
				got, err := e.c.Subscribe(ctx, req)
				require.NoError(t, err)
				assert.False(t, got.Repeated)
				// (TRIALING when it reopens the first paid period after a
				// trial, before the trial's end.)
				assert.Contains(t, []billing.SubscriptionStatus{billing.SubscriptionActive, billing.SubscriptionTrialing}, mustView(t, e).Status)
			})
		}
	}
}

func mustView(t *testing.T, e *freeEnv) billing.Subscription {
	t.Helper()
	v, err := e.c.Subscription(t.Context(), e.user)
	require.NoError(t, err)
	return v
}
