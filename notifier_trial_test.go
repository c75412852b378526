package billing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/notice"
)

// TestTrialEndingReminderOnce: the pre-billing notifier sends the trial's
// first paid period a trial-ending notice of its own type, once however
// often the window is scheduled and its messages handled, in memory and on
// the local DynamoDB server; a free tier's period is not announced.
func TestTrialEndingReminderOnce(t *testing.T) {
	t.Parallel()
	for _, st := range []userStore{userStores()[0], userStores()[2]} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newTrialEnv(t, st)
			e.c = trialCollector(t, e, func(c *billing.Config) {
				c.AllowFreeTiers = true
				c.Prices = billing.PriceListMap{"Plus:v2": plusPrice, "Free:v1": 0}
			})
			_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
			require.NoError(t, err)
			// A free tier billed on the trial's end too.
			freeUser := e.user + "-free"
			end := feb3.AddDate(0, 0, 14)
			_, err = e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "f1", UserID: freeUser, Tier: "Free:v1", FirstBillingDate: end})
			require.NoError(t, err)
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)

			q := &billingtest.RecordingEnqueuer{}
			sched, err := notice.NewScheduler(notice.SchedulerConfig{Repository: e.repo, Enqueuer: q, Clock: e.clock})
			require.NoError(t, err)
			notifier := &billingtest.RecordingNotifier{}
			users := billingtest.NewUserDirectory(billing.User{ID: e.user, Email: "ann@example.com", Status: billing.UserStatusActive},
				billing.User{ID: freeUser, Email: "bob@example.com", Status: billing.UserStatusActive})
			w, err := notice.NewWorker(notice.WorkerConfig{Users: users, Notifier: notifier,
				Reminders: e.repo.(notice.ReminderClaimer), Clock: e.clock})
			require.NoError(t, err)

			e.clock.Set(end.AddDate(0, 0, -billing.NoticeLeadDays).Add(-6 * time.Hour))
			var outcomes []notice.Outcome
			for range 2 { // a rerun of the window, every message handled again
				_, err := sched.Run(t.Context(), notice.Event{})
				require.NoError(t, err)
			}
			for _, m := range q.Messages(t) {
				out, err := w.Handle(t.Context(), m)
				require.NoError(t, err)
				outcomes = append(outcomes, out)
			}
			sent := notifier.Sent()
			require.Len(t, sent, 1, "outcomes %v", outcomes)
			n := sent[0].Notification
			assert.Equal(t, billing.TrialEndingNoticeEvent, n.EventType)
			assert.Equal(t, plusPrice, n.Amount)
			assert.Equal(t, end.Format(notice.DateLayout), n.BillingDate)
			assert.Contains(t, outcomes, notice.SkippedFree)
		})
	}
}

func trialCollector(t *testing.T, e *freeEnv, mut func(*billing.Config)) *billing.Collector {
	t.Helper()
	cfg := billing.Config{Repository: e.repo, History: e.hist, Locker: billingtest.NewLocker(e.clock, time.Minute),
		Provider: e.pay, Clock: e.clock}
	mut(&cfg)
	c, err := billing.NewCollector(cfg)
	require.NoError(t, err)
	return c
}

// TestNoticeAfterTrialMatchesCollector: package notice marks a message
// AfterTrial (the trial-ending notice) for exactly the periods the
// collector itself treats as the first paid period of a running trial,
// over every combination of the fields that decide it.
func TestNoticeAfterTrialMatchesCollector(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, trialEnd := range []time.Time{{}, feb3} {
		for _, marker := range []bool{false, true} {
			for _, ev := range []billing.UpdatedEvent{"", billing.UpdatedTrialConverted, billing.UpdatedPauseResume} {
				for _, st := range []billing.Status{billing.StatusScheduled, billing.StatusError, billing.StatusPaused, billing.StatusCompleted} {
					for _, run := range []time.Time{{}, feb3} {
						for _, n := range []int{0, 1} {
							p := billing.Period{UserID: "u1", SubscriptionID: "s1", BillingDate: feb3, Amount: plusPrice,
								Status: st, TrialEnd: trialEnd, AfterTrial: marker, UpdatedEvent: ev, InitialRunDate: run}
							p.LastAttempt.Number = n
							m, err := notice.NewMessage(&p)
							require.NoError(t, err)
							assert.Equal(t, billing.FirstAfterTrial(&p), m.AfterTrial, "%+v", p)
							checked++
						}
					}
				}
			}
		}
	}
	require.Equal(t, 2*2*3*4*2*2, checked)
}
