package billing_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cancelledInTrial subscribes the user to Plus:v2 with a 14-day trial,
// completes the trial period (the first paid period opens on its end) and
// cancels at period end during the trial; it returns the trial's end.
func cancelledInTrial(t *testing.T, e *freeEnv) time.Time {
	t.Helper()
	end := feb3.AddDate(0, 0, 14)
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	e.clock.Set(feb3.Add(2 * time.Hour))
	left, err := e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "leave")})
	require.NoError(t, err)
	require.Equal(t, end, left.AccessUntil, "the trial is kept to its end")
	v := mustView(t, e)
	require.Equal(t, billing.SubscriptionTrialing, v.Status, "the trial is kept to its end")
	require.Equal(t, end, v.CancelAt)
	require.Zero(t, v.NextChargeAmount, "nothing is ever charged")
	e.clock.Advance(time.Hour)
	return end
}

// TestComeBackInTrialKeepsTrial (every layout, in memory and on the local
// DynamoDB server): a user who cancels at period end during a trial and
// comes back before its end, on the cancelled first paid period's date
// (a Subscribe or a Reactivate), reopens that period. The reopen used to
// drop its after-trial marker (billing_after_trial): the view said ACTIVE
// instead of TRIALING, EndTrial answered "no trial in progress", and the
// trial-ending notice was the pre-billing one. The trial goes on: the
// view is TRIALING to the trial's end, the notice is trial_will_end,
// EndTrial moves the first charge to now and it is charged once.
func TestComeBackInTrialKeepsTrial(t *testing.T) {
	t.Parallel()
	comeBacks := []struct {
		name string
		back func(t *testing.T, e *freeEnv, end time.Time)
	}{
		{"subscribe", func(t *testing.T, e *freeEnv, end time.Time) {
			got, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o2", UserID: e.user, Tier: "Plus:v2", FirstBillingDate: end})
			require.NoError(t, err)
			assert.Equal(t, billing.FirstPeriodID(e.user, "o2"), got.Subscription.SubscriptionID)
		}},
		{"reactivate", func(t *testing.T, e *freeEnv, end time.Time) {
			_, err := e.c.Reactivate(t.Context(), e.user, end)
			require.NoError(t, err)
		}},
	}
	for _, st := range userStores() {
		for _, cb := range comeBacks {
			t.Run("view+notice/"+st.name+"/"+cb.name, func(t *testing.T) {
				t.Parallel()
				e := newTrialEnv(t, st)
				end := cancelledInTrial(t, e)
				cb.back(t, e, end)
				paid := e.latest(t)
				require.Equal(t, billing.StatusScheduled, paid.Status)
				require.Equal(t, end, paid.BillingDate, "the cancelled first paid period reopened")
				assert.Len(t, e.records(t), 2, "reopened in place, not added")
				assert.True(t, paid.AfterTrial, "billing_after_trial carried by the reopen")
				v := mustView(t, e)
				assert.Equal(t, billing.SubscriptionTrialing, v.Status)
				assert.Equal(t, end, v.TrialEnd)
				assert.Equal(t, billing.TrialEndingNoticeEvent, trialNotice(t, e, end).EventType)
			})
			t.Run("end/"+st.name+"/"+cb.name, func(t *testing.T) {
				t.Parallel()
				e := newTrialEnv(t, st)
				end := cancelledInTrial(t, e)
				cb.back(t, e, end)
				now := feb3.AddDate(0, 0, 5)
				e.clock.Set(now)
				_, err := e.c.EndTrial(t.Context(), ur(e.user, "e1"))
				require.NoError(t, err, "the trial is in progress")
				assert.Equal(t, now, e.latest(t).BillingDate)
				e.runAt(t, now.Add(time.Minute), billing.RunScheduled)
				calls := e.pay.Calls()
				require.Len(t, calls, 1)
				assert.Equal(t, plusPrice, calls[0].Request.Amount)
				assert.Equal(t, billing.SubscriptionActive, mustView(t, e).Status)
			})
		}
	}
}
