package billing_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trialPausedAndResumed subscribes the user to tier with a 14-day trial,
// completes the trial period (the first paid period opens on its end) and
// pauses then resumes the subscription before that end: both writes set
// updated_event on the first paid period, which it returns, SCHEDULED
// again.
func trialPausedAndResumed(t *testing.T, e *freeEnv, tier string) billing.Period {
	t.Helper()
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: tier, TrialDays: 14})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	e.clock.Set(feb3.Add(2 * time.Hour))
	_, err = e.c.Pause(t.Context(), billing.PauseRequest{UserRequest: ur(e.user, "pause1"), Months: 1})
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	_, err = e.c.Resume(t.Context(), billing.ResumeRequest{UserRequest: ur(e.user, "resume1")})
	require.NoError(t, err)
	paid := e.latest(t)
	require.Equal(t, billing.StatusScheduled, paid.Status)
	require.Equal(t, feb3.AddDate(0, 0, 14), paid.BillingDate)
	require.Equal(t, billing.UpdatedPauseResume, paid.UpdatedEvent, "the resume replaced trial-converted")
	return paid
}

// TestTrialMarkerSurvivesPauseResume (every layout, in memory and on the
// local DynamoDB server): the first paid period after a trial was known
// only by updated_event trial-converted, which a pause and a resume
// during the trial overwrote. After them the trial was lost: the notice
// was the pre-billing one, EndTrial and ExtendTrial refused with
// ErrNotCollectible, a downgrade was left pending, so the trial's end
// charged the old, higher price, and the view no longer said TRIALING.
// The period keeps its marker
// (billing_after_trial) through both writes, and all four behave as
// before the pause.
func TestTrialMarkerSurvivesPauseResume(t *testing.T) {
	t.Parallel()
	end := feb3.AddDate(0, 0, 14)
	for _, st := range userStores() {
		t.Run("marker+notice/"+st.name, func(t *testing.T) {
			t.Parallel()
			e := newTrialEnv(t, st)
			paid := trialPausedAndResumed(t, e, "Plus:v2")
			assert.True(t, paid.AfterTrial, "billing_after_trial kept")
			assert.True(t, paid.IsAfterTrial())
			v, err := e.c.Subscription(t.Context(), e.user)
			require.NoError(t, err)
			assert.Equal(t, billing.SubscriptionTrialing, v.Status)
			assert.Equal(t, end, v.TrialEnd)
			assert.Equal(t, billing.TrialEndingNoticeEvent, trialNotice(t, e, end).EventType)
		})
		t.Run("extend/"+st.name, func(t *testing.T) {
			t.Parallel()
			e := newTrialEnv(t, st)
			trialPausedAndResumed(t, e, "Plus:v2")
			newEnd := feb3.AddDate(0, 0, 21)
			_, err := e.c.ExtendTrial(t.Context(), billing.TrialRequest{UserRequest: ur(e.user, "x1"), End: newEnd})
			require.NoError(t, err)
			paid := e.latest(t)
			assert.Equal(t, newEnd, paid.BillingDate)
			assert.True(t, paid.AfterTrial, "a date move keeps the marker")
			e.runAt(t, end.Add(time.Hour), billing.RunScheduled)
			assert.Zero(t, e.pay.CallCount(), "not charged on the old end")
			e.runAt(t, newEnd.Add(time.Hour), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 1)
			assert.Equal(t, plusPrice, calls[0].Request.Amount)
			assert.False(t, e.latest(t).AfterTrial, "the next period is no trial's")
		})
		t.Run("end/"+st.name, func(t *testing.T) {
			t.Parallel()
			e := newTrialEnv(t, st)
			trialPausedAndResumed(t, e, "Plus:v2")
			now := feb3.AddDate(0, 0, 5)
			e.clock.Set(now)
			_, err := e.c.EndTrial(t.Context(), ur(e.user, "e1"))
			require.NoError(t, err)
			assert.Equal(t, now, e.latest(t).BillingDate)
			e.runAt(t, now.Add(time.Minute), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 1)
			assert.Equal(t, plusPrice, calls[0].Request.Amount)
			_, err = e.c.EndTrial(t.Context(), ur(e.user, "e2"))
			require.ErrorIs(t, err, billing.ErrNotCollectible, "charged: the marker no longer means a trial")
		})
		t.Run("downgrade/"+st.name, func(t *testing.T) {
			t.Parallel()
			e := newTrialEnv(t, st)
			trialPausedAndResumed(t, e, "Pro:v1")
			_, err := e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "p1"), Tier: "Plus:v2", When: billing.ChangeAtNextPeriod})
			require.NoError(t, err)
			e.runAt(t, end.Add(time.Hour), billing.RunScheduled)
			e.runAt(t, end.AddDate(0, 1, 0).Add(time.Hour), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 2)
			for i, call := range calls {
				assert.Equal(t, plusPrice, call.Request.Amount, "charge %d", i)
				assert.Equal(t, "Plus:v2", call.Request.Tier, "charge %d", i)
			}
		})
	}
}

// trialNotice schedules the pre-billing window of the trial ending on end
// and handles its messages, each through its JSON body as a queue carries
// it; it returns the one notification sent.
func trialNotice(t *testing.T, e *freeEnv, end time.Time) billing.RenewalNotice {
	t.Helper()
	q := &billingtest.RecordingEnqueuer{}
	sched, err := notice.NewScheduler(notice.SchedulerConfig{Repository: e.repo, Enqueuer: q, Clock: e.clock})
	require.NoError(t, err)
	notifier := &billingtest.RecordingNotifier{}
	users := billingtest.NewUserDirectory(billing.User{ID: e.user, Email: "ann@example.com", Status: billing.UserStatusActive})
	w, err := notice.NewWorker(notice.WorkerConfig{Users: users, Notifier: notifier, Clock: e.clock})
	require.NoError(t, err)
	e.clock.Set(end.AddDate(0, 0, -billing.NoticeLeadDays).Add(-6 * time.Hour))
	_, err = sched.Run(t.Context(), notice.Event{})
	require.NoError(t, err)
	for _, m := range q.Messages(t) {
		body, err := json.Marshal(m)
		require.NoError(t, err)
		var got notice.Message
		require.NoError(t, json.Unmarshal(body, &got))
		_, err = w.Handle(t.Context(), got)
		require.NoError(t, err)
	}
	sent := notifier.Sent()
	require.Len(t, sent, 1)
	return sent[0].Notification
}

// TestTrialConvertedBeforeTheMarkerKeepsTrial (every layout): a first
// paid period opened before billing_after_trial existed is known by
// updated_event trial-converted only. A pause during the trial used to
// replace it and lose the trial; the pause's write adds the marker, so
// after a resume the notice is the trial-ending one and EndTrial acts.
func TestTrialConvertedBeforeTheMarkerKeepsTrial(t *testing.T) {
	t.Parallel()
	end := feb3.AddDate(0, 0, 14)
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newTrialEnv(t, st)
			_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
			require.NoError(t, err)
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
			// The period as an earlier version wrote it: no marker.
			old := e.latest(t)
			require.True(t, old.AfterTrial)
			old.AfterTrial = false
			_, err = e.repo.AddAll(t.Context(), []billing.Period{old})
			require.NoError(t, err)
			old = e.latest(t)
			require.False(t, old.AfterTrial)
			require.Equal(t, billing.UpdatedTrialConverted, old.UpdatedEvent)
			require.True(t, old.IsAfterTrial(), "read by its updated_event")

			e.clock.Set(feb3.Add(2 * time.Hour))
			_, err = e.c.Pause(t.Context(), billing.PauseRequest{UserRequest: ur(e.user, "pause1"), Months: 2})
			require.NoError(t, err)
			paused := e.latest(t)
			assert.Empty(t, paused.UpdatedEvent, "the pause replaced trial-converted")
			assert.True(t, paused.AfterTrial, "the pause wrote the marker")
			e.clock.Advance(time.Hour)
			_, err = e.c.Resume(t.Context(), billing.ResumeRequest{UserRequest: ur(e.user, "resume1")})
			require.NoError(t, err)
			assert.Equal(t, billing.TrialEndingNoticeEvent, trialNotice(t, e, end).EventType)

			now := feb3.AddDate(0, 0, 9)
			e.clock.Set(now)
			_, err = e.c.EndTrial(t.Context(), ur(e.user, "e1"))
			require.NoError(t, err)
			assert.Equal(t, now, e.latest(t).BillingDate)
		})
	}
}

// TestTrialBatchRepriceKeepsTrial (every layout): a host's batch that
// reprices every SCHEDULED record as read, noting its change in
// updated_event, used to turn the first paid period after a trial into a
// plain one (the trial-ending notice lost, EndTrial refused). It keeps
// its marker: the first charge is the new price on the trial's end, after
// the trial-ending notice. A trial period not completed yet is repriced
// by its TrialAmount (its Amount is the trial's zero, never charged): the
// first charge is then that price.
func TestTrialBatchRepriceKeepsTrial(t *testing.T) {
	t.Parallel()
	newPrice := billing.MustParseAmount("12.99")
	end := feb3.AddDate(0, 0, 14)
	reprice := func(t *testing.T, e *freeEnv) {
		t.Helper()
		var batch []billing.Period
		for _, r := range e.records(t) {
			if r.Status != billing.StatusScheduled {
				continue
			}
			if r.IsTrial() {
				r.TrialAmount = newPrice
			} else {
				r.Amount = newPrice
			}
			r.UpdatedEvent = "price-change"
			batch = append(batch, r)
		}
		require.Len(t, batch, 1)
		_, err := e.repo.AddAll(t.Context(), batch)
		require.NoError(t, err)
	}
	for _, st := range userStores() {
		for _, afterRun := range []bool{false, true} {
			name := "trial-period/" + st.name
			if afterRun {
				name = "first-paid-period/" + st.name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newTrialEnv(t, st)
				_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
				require.NoError(t, err)
				if afterRun {
					e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
					e.clock.Advance(time.Hour)
				}
				reprice(t, e)
				e.runAt(t, feb3.Add(3*time.Hour), billing.RunScheduled)
				paid := e.latest(t)
				assert.True(t, paid.AfterTrial, "after run %v", afterRun)
				assert.Equal(t, newPrice, paid.Amount, "after run %v", afterRun)
				n := trialNotice(t, e, end)
				assert.Equal(t, billing.TrialEndingNoticeEvent, n.EventType, "after run %v", afterRun)
				assert.Equal(t, newPrice, n.Amount, "after run %v", afterRun)
				e.runAt(t, end.Add(time.Hour), billing.RunScheduled)
				calls := e.pay.Calls()
				require.Len(t, calls, 1, "after run %v", afterRun)
				assert.Equal(t, newPrice, calls[0].Request.Amount, "after run %v", afterRun)
			})
		}
	}
}

// TestNotificationMessageAfterTrialBody: a queued message carries the
// marker of the first paid period after a trial (billing_after_trial),
// so a worker reading it after a pause and resume sends the trial-ending
// notice; the body of every other message is as before, without it. A
// record with the marker but attempted already is no trial any more.
func TestNotificationMessageAfterTrialBody(t *testing.T) {
	t.Parallel()
	rec := billing.Period{UserID: "u1", SubscriptionID: "s1", BillingDate: feb3, Amount: plusPrice,
		Status: billing.StatusScheduled, ReceiptTierName: "Plus:v2", UpdatedEvent: billing.UpdatedPauseResume, AfterTrial: true}
	m, err := notice.NewMessage(&rec)
	require.NoError(t, err)
	assert.True(t, m.AfterTrial)
	body, err := json.Marshal(m)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"billing_after_trial":true`)
	back, err := notice.ParseMessage(body)
	require.NoError(t, err)
	assert.Equal(t, m, back)

	rec.AfterTrial = false
	m, err = notice.NewMessage(&rec)
	require.NoError(t, err)
	body, err = json.Marshal(m)
	require.NoError(t, err)
	assert.NotContains(t, string(body), "billing_after_trial")

	rec.AfterTrial, rec.Attempt, rec.InitialRunDate = true, 1, feb3
	m, err = notice.NewMessage(&rec)
	require.NoError(t, err)
	assert.False(t, m.AfterTrial, "attempted: the trial is over")
}
