package billing_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runDay runs the day's scheduled and pause runs at at, as a host's
// schedule does.
func (e *freeEnv) runDay(t *testing.T, at time.Time) {
	t.Helper()
	e.runAt(t, at, billing.RunScheduled)
	e.runAt(t, at.Add(10*time.Minute), billing.RunPause)
}

// TestPauseDuringTrialPushesFirstCharge (every layout, in memory and on
// the local DynamoDB server): a pause of N months asked during a trial,
// before its period was completed, used to be lost at the trial's end:
// the pause run skipped the trial period as the pause's first month and
// opened the first paid period on the trial's end, so with one month it
// was charged on the trial's end, inside the pause, and with N months one
// month early. The pause pushes the first charge by N months from the
// trial's end: nothing is charged before, the charge comes on that date,
// and the view says PAUSED meanwhile.
func TestPauseDuringTrialPushesFirstCharge(t *testing.T) {
	t.Parallel()
	end := feb3.AddDate(0, 0, 14)
	for _, st := range userStores() {
		for _, months := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d", st.name, months), func(t *testing.T) {
				t.Parallel()
				e := newTrialEnv(t, st)
				_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
				require.NoError(t, err)
				e.clock.Advance(time.Minute)
				_, err = e.c.PauseSubscription(t.Context(), billing.PauseSubscriptionRequest{UserRequest: ur(e.user, "p1"), Months: months})
				require.NoError(t, err)
				v, err := e.c.Subscription(t.Context(), e.user)
				require.NoError(t, err)
				assert.Equal(t, billing.SubscriptionPaused, v.State)

				pushed := end.AddDate(0, months, 0)
				days := []time.Time{feb3.Add(time.Hour), end.Add(-time.Hour), end.Add(time.Hour)}
				for k := 1; k <= months; k++ {
					days = append(days, end.AddDate(0, k, 0).Add(-24*time.Hour))
				}
				for _, d := range days {
					e.runDay(t, d)
					require.Zero(t, e.pay.CallCount(), "charged on %s, before the pause ends on %s", d, pushed)
					v, err := e.c.Subscription(t.Context(), e.user)
					require.NoError(t, err)
					// PAUSED while a month of the pause is to be skipped;
					// once its last month is, the period it resumes on is
					// open (as after any pause): billed on the pushed date.
					if d.Before(end) {
						assert.Equal(t, billing.SubscriptionPaused, v.State, "on %s", d)
					}
					if v.State != billing.SubscriptionPaused {
						assert.Equal(t, billing.SubscriptionActive, v.State, "on %s", d)
						assert.Equal(t, pushed, v.NextBillingDate, "on %s", d)
					}
				}
				open := e.latest(t)
				assert.Equal(t, billing.StatusScheduled, open.Status)
				assert.Equal(t, pushed, open.BillingDate, "the first charge is pushed by the pause")
				e.runDay(t, pushed.Add(time.Hour))
				calls := e.pay.Calls()
				require.Len(t, calls, 1)
				assert.Equal(t, plusPrice, calls[0].Request.Amount)
				paid := e.latestPaid(t)
				assert.Equal(t, pushed, paid.BillingDate)
				v, err = e.c.Subscription(t.Context(), e.user)
				require.NoError(t, err)
				assert.Equal(t, billing.SubscriptionActive, v.State)
				assert.Equal(t, pushed.AddDate(0, 1, 0), v.PaidThrough)
			})
		}
	}
}
