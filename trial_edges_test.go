package billing_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// subscribeWithin runs Subscribe and fails the test when it does not answer
// within a few seconds (a schedule walk that never ends holds the user's
// lock for good).
func subscribeWithin(t *testing.T, c *billing.Collector, req billing.SubscribeRequest) (billing.Subscribed, error) {
	t.Helper()
	type answer struct {
		s   billing.Subscribed
		err error
	}
	done := make(chan answer, 1)
	go func() {
		s, err := c.Subscribe(t.Context(), req)
		done <- answer{s, err}
	}()
	select {
	case a := <-done:
		return a.s, a.err
	case <-time.After(5 * time.Second):
		t.Fatalf("Subscribe %s did not answer in 5 s", req.RequestKey)
	}
	return billing.Subscribed{}, nil
}

// TestTrialSubscribeBeforeALaterRecord (both layouts, in memory and on
// the local DynamoDB server): a user whose earlier subscription
// was cancelled before its first date (a month on) subscribes now with a
// 14-day trial. The check that the new schedule meets no record of the
// earlier life walked from the trial's end to the trial's end again, for
// ever; it answers, and the trial converts and is charged on its end.
func TestTrialSubscribeBeforeALaterRecord(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newTrialEnv(t, st)
			_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", FirstBillingDate: feb3.AddDate(0, 1, 0)})
			require.NoError(t, err)
			_, err = e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "c1")})
			require.NoError(t, err)

			_, err = subscribeWithin(t, e.c, billing.SubscribeRequest{RequestKey: "o2", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
			require.NoError(t, err)
			end := feb3.AddDate(0, 0, 14)
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
			e.runAt(t, end.Add(-time.Hour), billing.RunScheduled)
			assert.Zero(t, e.pay.CallCount(), "nothing charged in the trial")
			e.runAt(t, end.Add(time.Hour), billing.RunScheduled)
			calls := e.pay.Calls()
			require.Len(t, calls, 1)
			assert.Equal(t, plusPrice, calls[0].Request.Amount)
			assert.Equal(t, end, e.latestPaid(t).BillingDate)
		})
	}
}

// TestTrialSubscribeMeetingALaterRecordRefused: the same check refuses a
// trial whose end is the date of a record of the earlier life (that paid
// period could not be opened), naming the date.
func TestTrialSubscribeMeetingALaterRecordRefused(t *testing.T) {
	t.Parallel()
	e := newTrialEnv(t, memoryUserStores()[0])
	taken := feb3.AddDate(0, 0, 14)
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", FirstBillingDate: taken})
	require.NoError(t, err)
	_, err = e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "c1")})
	require.NoError(t, err)
	_, err = subscribeWithin(t, e.c, billing.SubscribeRequest{RequestKey: "o2", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
	require.ErrorIs(t, err, billing.ErrInvalidDate)
	assert.Len(t, e.records(t), 1, "nothing written")
}

// TestExtendTrialOntoATakenDateRefused (both layouts, in memory and on
// the local DynamoDB server): a trial not begun yet extended to
// the date of the user's cancelled record of an earlier life was accepted;
// the trial then completed, its paid period could not be opened on that
// date, and the user was never charged again. The extension is refused
// (nothing written) and the trial converts on its own end; an extension to
// a free date is accepted.
func TestExtendTrialOntoATakenDateRefused(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newTrialEnv(t, st)
			taken := feb3.AddDate(0, 0, 40)
			_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", FirstBillingDate: taken})
			require.NoError(t, err)
			_, err = e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "c1")})
			require.NoError(t, err)
			start := feb3.AddDate(0, 0, 5)
			_, err = subscribeWithin(t, e.c, billing.SubscribeRequest{RequestKey: "o2", UserID: e.user, Tier: "Plus:v2", TrialDays: 14, FirstBillingDate: start})
			require.NoError(t, err)
			before := e.records(t)

			_, err = e.c.ExtendTrial(t.Context(), billing.TrialRequest{UserRequest: ur(e.user, "x1"), End: taken})
			require.ErrorIs(t, err, billing.ErrInvalidDate)
			assert.Equal(t, before, e.records(t), "nothing written")

			for d := 0; d <= 20; d++ {
				e.runAt(t, feb3.AddDate(0, 0, d).Add(time.Hour), billing.RunScheduled)
			}
			calls := e.pay.Calls()
			require.Len(t, calls, 1, "charged on the trial's own end")
			assert.Equal(t, plusPrice, calls[0].Request.Amount)
			assert.Equal(t, start.AddDate(0, 0, 14), e.latestPaid(t).BillingDate)
		})
	}
}

// TestExtendTrialToAFreeDate: the refusal above is about the taken date
// only: a trial not begun yet is extended past the earlier life's record
// (its schedule clear of it) and converts on the new end.
func TestExtendTrialToAFreeDate(t *testing.T) {
	t.Parallel()
	e := newTrialEnv(t, memoryUserStores()[0])
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", FirstBillingDate: feb3.AddDate(0, 0, 40)})
	require.NoError(t, err)
	_, err = e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "c1")})
	require.NoError(t, err)
	start := feb3.AddDate(0, 0, 5)
	_, err = subscribeWithin(t, e.c, billing.SubscribeRequest{RequestKey: "o2", UserID: e.user, Tier: "Plus:v2", TrialDays: 14, FirstBillingDate: start})
	require.NoError(t, err)
	end := feb3.AddDate(0, 0, 41)
	_, err = e.c.ExtendTrial(t.Context(), billing.TrialRequest{UserRequest: ur(e.user, "x1"), End: end})
	require.NoError(t, err)
	for d := 0; d <= 42; d++ {
		e.runAt(t, feb3.AddDate(0, 0, d).Add(time.Hour), billing.RunScheduled)
	}
	calls := e.pay.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, end, e.latestPaid(t).BillingDate)
}

// TestTrialDowngradeSetsFirstCharge: a downgrade at the next period asked
// for while the trial runs sets the first charge, before the trial period
// is completed and after (the first paid period open, not charged): it was
// marked pending on that period, and the trial's end charged the old,
// higher plan.
func TestTrialDowngradeSetsFirstCharge(t *testing.T) {
	t.Parallel()
	for _, afterRun := range []bool{false, true} {
		e := newTrialEnv(t, memoryUserStores()[0])
		_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Pro:v1", TrialDays: 14})
		require.NoError(t, err)
		if afterRun {
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
		}
		_, err = e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "p1"), Tier: "Plus:v2", When: billing.ChangeAtNextPeriod})
		require.NoError(t, err)
		end := feb3.AddDate(0, 0, 14)
		e.runAt(t, feb3.Add(2*time.Hour), billing.RunScheduled)
		e.runAt(t, end.Add(time.Hour), billing.RunScheduled)
		e.runAt(t, end.AddDate(0, 1, 0).Add(time.Hour), billing.RunScheduled)
		calls := e.pay.Calls()
		if assert.Len(t, calls, 2, "after run %v", afterRun) {
			for i, call := range calls {
				assert.Equal(t, plusPrice, call.Request.Amount, "after run %v, charge %d", afterRun, i)
				assert.Equal(t, "Plus:v2", call.Request.Tier, "after run %v, charge %d", afterRun, i)
			}
		}
	}
}

// TestDowngradeOfAPaidPeriodStaysPending: outside a trial a downgrade at
// the next period still leaves the period's charge as it is.
func TestDowngradeOfAPaidPeriodStaysPending(t *testing.T) {
	t.Parallel()
	e := newTrialEnv(t, memoryUserStores()[0])
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Pro:v1", FirstBillingDate: feb3.AddDate(0, 0, 2)})
	require.NoError(t, err)
	_, err = e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "p1"), Tier: "Plus:v2", When: billing.ChangeAtNextPeriod})
	require.NoError(t, err)
	e.runAt(t, feb3.AddDate(0, 0, 2).Add(time.Hour), billing.RunScheduled)
	e.runAt(t, feb3.AddDate(0, 1, 2).Add(time.Hour), billing.RunScheduled)
	calls := e.pay.Calls()
	require.Len(t, calls, 2)
	assert.Equal(t, proPrice, calls[0].Request.Amount)
	assert.Equal(t, plusPrice, calls[1].Request.Amount)
}

// latestPaid returns the user's latest COMPLETED record with an amount.
func (e *freeEnv) latestPaid(t *testing.T) billing.Period {
	t.Helper()
	var l billing.Period
	for _, r := range e.records(t) {
		if r.Status == billing.StatusCompleted && r.Amount > 0 && r.BillingDate.After(l.BillingDate) {
			l = r
		}
	}
	require.NotEmpty(t, l.SubscriptionID, "no paid period")
	return l
}
