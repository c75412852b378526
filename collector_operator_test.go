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

// declinedPeriod subscribes the user and has the first charge declined:
// the period ERROR, one processor attempt made.
func (e *userEnv) declinedPeriod(t *testing.T) string {
	t.Helper()
	sub, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	id := sub.Subscription.SubscriptionID
	e.pay.SetAttempt(id, 1, billingtest.Declined("insufficient funds", true))
	e.clock.Advance(time.Hour)
	_, err = e.c.CollectUser(t.Context(), e.user, billing.ProcessWebhook)
	require.NoError(t, err)
	require.Len(t, e.pay.KeysFor(id), 1)
	return id
}

func periodReq(user, key, period string) billing.PeriodRequest {
	return billing.PeriodRequest{UserRequest: billing.UserRequest{UserID: user, RequestKey: key,
		Operator: "ops@example.com", Reason: "customer called: card topped up"}, PeriodID: period}
}

// TestRetryPeriodRepeatMakesNoSecondAttempt: a retry sent twice with its
// key presents one attempt to the processor, whatever the first came to
// (collected, declined, or in flight and resolved by the repeat); the
// repeat answers the first's outcome, and the outcome's history row
// records the request, the operator and the reason.
func TestRetryPeriodRepeatMakesNoSecondAttempt(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name  string
				steps []billingtest.Step
				want  billing.RetryOutcome
			}{
				{"collected", []billingtest.Step{billingtest.Succeeded()}, billing.RetryCollected},
				{"declined", []billingtest.Step{billingtest.Declined("card expired", false)}, billing.RetryDeclined},
				{"in flight", []billingtest.Step{billingtest.UnknownAfterCharge(billingtest.Declined("do not honor", true), nil)}, billing.RetryDeclined},
			} {
				t.Run(tc.name, func(t *testing.T) {
					ctx := t.Context()
					e := newUserEnv(t, st)
					id := e.declinedPeriod(t)
					e.pay.SetAttempt(id, 2, tc.steps...)
					req := periodReq(e.user, "console-retry-1", id)

					first, err := e.c.Periods().Retry(ctx, req)
					if tc.name == "in flight" {
						require.ErrorIs(t, err, billing.ErrAttemptInFlight)
						// The form sent again: the same attempt resolved, no other.
						first, err = e.c.Periods().Retry(ctx, req)
					}
					require.NoError(t, err)
					assert.False(t, first.Repeated)
					assert.Equal(t, tc.want, first.Outcome)
					calls := e.pay.CallCount()
					require.Len(t, e.pay.KeysFor(id), 2, "the first charge and the retry")

					again, err := e.c.Periods().Retry(ctx, req)
					require.NoError(t, err)
					assert.True(t, again.Repeated)
					assert.Equal(t, tc.want, again.Outcome)
					assert.Equal(t, first.Period.Status, again.Period.Status)
					assert.Equal(t, calls, e.pay.CallCount(), "nothing presented to the processor")
					assert.Len(t, e.pay.KeysFor(id), 2, "no second processor attempt")

					var recorded []billing.Period
					for _, r := range e.rows(t) {
						if r.Operator != "" {
							recorded = append(recorded, r)
						}
					}
					require.Len(t, recorded, 1, "one row of the retry")
					assert.Equal(t, id, recorded[0].SubscriptionID)
					assert.Equal(t, billing.ProcessManualRepayment, recorded[0].Process)
					assert.Equal(t, "ops@example.com", recorded[0].Operator)
					assert.Equal(t, "customer called: card topped up", recorded[0].Reason)
				})
			}
		})
	}
}

// TestRetryPeriodKeyReused: the retry's key with another period, or a key
// first used for a cancel, is a RequestKeyError and charges
// nothing; the key of a retry given to a cancel is refused too.
func TestRetryPeriodKeyReused(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newUserEnv(t, st)
			id := e.declinedPeriod(t)
			e.pay.SetAttempt(id, 2, billingtest.Declined("card expired", false))
			req := periodReq(e.user, "k1", id)
			_, err := e.c.Periods().Retry(ctx, req)
			require.NoError(t, err)
			calls := e.pay.CallCount()

			// A reason typed anew is the same request: answered, not charged.
			again := req
			again.Reason = "typed again"
			res, err := e.c.Periods().Retry(ctx, again)
			require.NoError(t, err)
			assert.True(t, res.Repeated)
			other := req
			other.PeriodID = "another-period"
			_, err = e.c.Periods().Retry(ctx, other)
			var rk *billing.RequestKeyError
			require.ErrorAs(t, err, &rk)
			assert.Equal(t, []string{"Period"}, rk.Fields)

			_, err = e.c.Cancel(ctx, billing.CancelRequest{UserRequest: req.UserRequest, ForgiveOwed: true})
			require.ErrorIs(t, err, billing.ErrRequestKeyReused)

			_, err = e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "k2"), ForgiveOwed: true})
			require.NoError(t, err)
			_, err = e.c.Periods().Retry(ctx, periodReq(e.user, "k2", id))
			require.ErrorAs(t, err, &rk)
			assert.Equal(t, "cancel", rk.Op)
			assert.Equal(t, calls, e.pay.CallCount(), "nothing charged")
		})
	}
}

// TestWaivePeriodRepeatAnswersDone: a waive sent twice waives once; the
// repeat answers the first change, and the row records who and why.
func TestWaivePeriodRepeatAnswersDone(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newUserEnv(t, st)
			id := e.declinedPeriod(t)
			req := periodReq(e.user, "console-waive-1", id)
			first, err := e.c.Periods().Waive(ctx, req)
			require.NoError(t, err)
			require.Len(t, first.Changes, 1)
			assert.Equal(t, billing.StatusWaived, first.Changes[0].After.Status)
			assert.False(t, first.Repeated)
			n := len(e.rows(t))

			again, err := e.c.Periods().Waive(ctx, req)
			require.NoError(t, err)
			assert.True(t, again.Repeated)
			require.Len(t, again.Changes, 1)
			assert.Equal(t, billing.StatusWaived, again.Changes[0].After.Status)
			rows := e.rows(t)
			require.Len(t, rows, n, "nothing written")
			last := rows[len(rows)-1]
			assert.Equal(t, billing.StatusWaived, last.Status)
			assert.Equal(t, "ops@example.com", last.Operator)
			assert.Equal(t, "customer called: card topped up", last.Reason)

			// A new request on the waived period is the engine's refusal.
			_, err = e.c.Periods().Waive(ctx, periodReq(e.user, "console-waive-2", id))
			require.ErrorIs(t, err, billing.ErrNotCollectible)
			// Another user's period is not found.
			_, err = e.c.Periods().Waive(ctx, periodReq("someone-else", "w3", id))
			require.ErrorIs(t, err, billing.ErrNotFound)
		})
	}
}

// TestOperatorOnByUserChange: a cancel by user with an operator and a
// reason records them on its rows; an Operator with a control character
// is refused before anything is read.
func TestOperatorOnByUserChange(t *testing.T) {
	t.Parallel()
	e := newUserEnv(t, memoryUserStores()[0])
	e.subscribeAndPay(t)
	u := billing.UserRequest{UserID: e.user, RequestKey: "c1", Operator: "ann", Reason: "asked by phone\nticket 42"}
	_, err := e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: u})
	require.NoError(t, err)
	rows := e.rows(t)
	last := rows[len(rows)-1]
	assert.Equal(t, billing.StatusCancelled, last.Status)
	assert.Equal(t, "ann", last.Operator)
	assert.Equal(t, "asked by phone\nticket 42", last.Reason)

	u.RequestKey, u.Operator = "c2", "ann\x00"
	_, err = e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: u})
	var fe *billing.FieldError
	require.True(t, errors.As(err, &fe), "%v", err)
	assert.Equal(t, "Operator", fe.Field)
}
