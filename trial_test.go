package billing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/preview"
)

var (
	plusPrice = billing.MustParseAmount("9.99")
	proPrice  = billing.MustParseAmount("19.99")
	yearPrice = billing.MustParseAmount("99.99")
)

// newTrialEnv is a collector for trials: a price list, no free tiers (a
// trial needs none).
func newTrialEnv(t *testing.T, st userStore) *freeEnv {
	t.Helper()
	return newFreeEnv(t, st, billingtest.ProviderOptions{}, func(c *billing.Config) {
		c.AllowFreeTiers = false
		c.Prices = billing.PriceListMap{"Plus:v2": plusPrice, "Pro:v1": proPrice, "Plus:v2/YEARLY": yearPrice}
	})
}

func (e *freeEnv) runAt(t *testing.T, at time.Time, kind billing.RunKind) *billing.Report {
	t.Helper()
	e.clock.Set(at)
	rep, err := e.c.Run(t.Context(), billing.RunRequest{Kind: kind})
	require.NoError(t, err)
	assert.Empty(t, rep.Failed, "%+v", rep)
	return rep
}

// latest returns the user's record with the latest billing date.
func (e *freeEnv) latest(t *testing.T) billing.Period {
	t.Helper()
	recs := e.records(t)
	require.NotEmpty(t, recs)
	l := recs[0]
	for _, r := range recs {
		if r.BillingDate.After(l.BillingDate) {
			l = r
		}
	}
	return l
}

// TestTrialConvertsToPaidMonthly: a 14-day trial on a paid monthly plan,
// on every layout in memory and on the local DynamoDB server: the trial
// period is completed without a charge, the first paid period opens on
// the trial's end at the plan's price with the anchor on that day, is
// charged once on it, and the schedule goes on from that day. The view
// shows the trial; history names its start, end and conversion.
func TestTrialConvertsToPaidMonthly(t *testing.T) {
	t.Parallel()
	for _, st := range freeStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newTrialEnv(t, st)
			out, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
			require.NoError(t, err)
			trial := out.Subscription
			end := feb3.AddDate(0, 0, 14)
			assert.True(t, trial.IsTrial())
			assert.Zero(t, trial.Amount)
			assert.Equal(t, plusPrice, trial.TrialAmount)
			assert.Equal(t, end, trial.TrialEnd)
			assert.Equal(t, end.Day(), trial.AnchorDay)

			v, err := e.c.Subscription(t.Context(), e.user)
			require.NoError(t, err)
			assert.Equal(t, billing.SubscriptionTrialing, v.Status)
			assert.Equal(t, end, v.TrialEnd)
			assert.Equal(t, plusPrice, v.Amount)

			rep := e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
			assert.Equal(t, 1, rep.Free, "%+v", rep)
			paid := e.latest(t)
			assert.Equal(t, billing.StatusScheduled, paid.Status)
			assert.Equal(t, end, paid.BillingDate)
			assert.Equal(t, plusPrice, paid.Amount)
			assert.Equal(t, end.Day(), paid.AnchorDay)
			assert.False(t, paid.IsTrial())
			v, err = e.c.Subscription(t.Context(), e.user)
			require.NoError(t, err)
			assert.Equal(t, billing.SubscriptionTrialing, v.Status)
			assert.Equal(t, end, v.TrialEnd)
			assert.Equal(t, end, v.PaidThrough)

			e.runAt(t, end.Add(-time.Hour), billing.RunScheduled)
			assert.Zero(t, e.pay.CallCount(), "nothing charged before the trial's end")
			e.runAt(t, end.Add(time.Hour), billing.RunScheduled)
			calls := e.pay.Calls()
			if assert.Len(t, calls, 1) {
				assert.Equal(t, plusPrice, calls[0].Request.Amount)
				assert.Equal(t, paid.SubscriptionID, calls[0].Request.SubscriptionID)
			}
			next := e.latest(t)
			assert.Equal(t, end.AddDate(0, 1, 0), next.BillingDate, "the anchor follows the trial's end")
			assert.Equal(t, plusPrice, next.Amount)
			v, err = e.c.Subscription(t.Context(), e.user)
			require.NoError(t, err)
			assert.Equal(t, billing.SubscriptionActive, v.Status)

			ch := e.changes(t)
			assert.Equal(t, 1, ch[billing.EventTrialStarted], "%v", ch)
			assert.Equal(t, 1, ch[billing.EventTrialEnded], "%v", ch)
			assert.Equal(t, 1, ch[billing.EventTrialConverted], "%v", ch)
		})
	}
}

// TestTrialCancelNeverCharges: a trial cancelled before its period is
// completed, and one cancelled after (its first paid period waiting), are
// never charged, whatever runs come after the trial's end.
func TestTrialCancelNeverCharges(t *testing.T) {
	t.Parallel()
	for _, st := range []userStore{userStores()[0], userStores()[2]} {
		for _, afterRun := range []bool{false, true} {
			t.Run(st.name, func(t *testing.T) {
				t.Parallel()
				e := newTrialEnv(t, st)
				_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
				require.NoError(t, err)
				if afterRun {
					e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
				}
				_, err = e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "c1")})
				require.NoError(t, err)
				for d := 1; d <= 60; d += 7 {
					e.runAt(t, feb3.AddDate(0, 0, d), billing.RunScheduled)
					e.runAt(t, feb3.AddDate(0, 0, d).Add(time.Hour), billing.RunRetry)
				}
				assert.Zero(t, e.pay.CallCount(), "no charge ever")
				for _, r := range e.records(t) {
					assert.True(t, r.Status.IsTerminal(), "%+v", r)
				}
			})
		}
	}
}

// TestTrialPlanChangeSetsFirstCharge: a plan change during the trial,
// before and after the trial period is completed, makes the first charge
// the new plan's price.
func TestTrialPlanChangeSetsFirstCharge(t *testing.T) {
	t.Parallel()
	for _, afterRun := range []bool{false, true} {
		e := newTrialEnv(t, memoryUserStores()[0])
		_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
		require.NoError(t, err)
		if afterRun {
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
		}
		_, err = e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "p1"), Tier: "Pro:v1"})
		require.NoError(t, err)
		e.runAt(t, feb3.Add(2*time.Hour), billing.RunScheduled)
		assert.Zero(t, e.pay.CallCount())
		e.runAt(t, feb3.AddDate(0, 0, 14).Add(time.Hour), billing.RunScheduled)
		calls := e.pay.Calls()
		if assert.Len(t, calls, 1, "after run %v", afterRun) {
			assert.Equal(t, proPrice, calls[0].Request.Amount, "after run %v", afterRun)
			assert.Equal(t, "Pro:v1", calls[0].Request.Tier)
		}
	}
}

// TestTrialOncePerUser: a second trial for a user who had one is refused
// (nothing written) unless the host allows it.
func TestTrialOncePerUser(t *testing.T) {
	t.Parallel()
	e := newTrialEnv(t, memoryUserStores()[0])
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	_, err = e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "c1")})
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	before := e.records(t)
	// On the cancelled renewal's date: the trial's days are not given again.
	again := feb3.AddDate(0, 0, 14)
	_, err = e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o2", UserID: e.user, Tier: "Plus:v2", TrialDays: 7, FirstBillingDate: again})
	require.ErrorIs(t, err, billing.ErrTrialUsed)
	_, cerr := preview.CheckSubscribe(t.Context(), e.c, billing.SubscribeRequest{RequestKey: "o2", UserID: e.user, Tier: "Plus:v2", TrialDays: 7, FirstBillingDate: again}, before)
	require.ErrorIs(t, cerr, billing.ErrTrialUsed, "the preview refuses it too")
	var fe *billing.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "TrialDays", fe.Field)
	assert.Equal(t, before, e.records(t), "nothing written")
	_, err = e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o2", UserID: e.user, Tier: "Plus:v2", TrialDays: 7, FirstBillingDate: again, AllowRepeatTrial: true})
	require.NoError(t, err)
}

// TestTrialFridayAndYearly: a trial ending on a Friday for Friday billing
// bills on that Friday of the month after; a yearly plan's first charge is
// on the trial's end and the next a year later.
func TestTrialFridayAndYearly(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run("friday/"+st.name, func(t *testing.T) { trialFriday(t, st) })
		t.Run("yearly/"+st.name, func(t *testing.T) { trialYearly(t, st) })
	}
}

// trialFriday: see TestTrialFridayAndYearly.
func trialFriday(t *testing.T, st userStore) {
	{
		e := newTrialEnv(t, st)
		// 3 February 2025 is a Monday; 18 days on is Friday 21, the third.
		out, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 18, FridayBilling: true})
		require.NoError(t, err)
		end := time.Date(2025, 2, 21, 9, 0, 0, 0, time.UTC)
		assert.Equal(t, end, out.Subscription.TrialEnd)
		assert.Equal(t, 3, out.Subscription.BillingWeek)
		e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
		e.runAt(t, end.Add(time.Hour), billing.RunScheduled)
		require.Equal(t, 1, e.pay.CallCount())
		assert.Equal(t, time.Date(2025, 3, 21, 9, 0, 0, 0, time.UTC), e.latest(t).BillingDate, "third Friday of March")

		if st.name == "memory-legacy" {
			// Friday 21 February + 15 days is a Saturday.
			_, err = e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: "u2", Tier: "Plus:v2", TrialDays: 15, FridayBilling: true})
			require.ErrorContains(t, err, "Friday billing starts on a Friday")
		}
	}
}

// trialYearly: see TestTrialFridayAndYearly.
func trialYearly(t *testing.T, st userStore) {
	{
		e := newTrialEnv(t, st)
		out, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", Term: billing.TermYearly, TrialDays: 14})
		require.NoError(t, err)
		end := feb3.AddDate(0, 0, 14)
		assert.Equal(t, end, out.Subscription.TrialEnd)
		e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
		assert.Equal(t, end, e.latest(t).BillingDate)
		e.runAt(t, end.Add(time.Hour), billing.RunScheduled)
		calls := e.pay.Calls()
		require.Len(t, calls, 1)
		assert.Equal(t, yearPrice, calls[0].Request.Amount)
		assert.Equal(t, end.AddDate(1, 0, 0), e.latest(t).BillingDate)
	}
}

// TestTrialEndEarlyAndExtend: an operator extends a trial (the first
// charge and the anchor move to the new end) and ends one now (charged by
// the next run).
func TestTrialEndEarlyAndExtend(t *testing.T) {
	t.Parallel()
	e := newTrialEnv(t, memoryUserStores()[0])
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	newEnd := feb3.AddDate(0, 0, 21)
	_, err = e.c.ExtendTrial(t.Context(), billing.TrialRequest{UserRequest: ur(e.user, "x1"), End: newEnd})
	require.NoError(t, err)
	paid := e.latest(t)
	assert.Equal(t, newEnd, paid.BillingDate)
	assert.Equal(t, newEnd.Day(), paid.AnchorDay)
	e.runAt(t, feb3.AddDate(0, 0, 14).Add(time.Hour), billing.RunScheduled)
	assert.Zero(t, e.pay.CallCount(), "not charged on the old end")

	e.clock.Set(feb3.AddDate(0, 0, 16))
	_, err = e.c.EndTrial(t.Context(), ur(e.user, "e1"))
	require.NoError(t, err)
	paid = e.latest(t)
	assert.Equal(t, feb3.AddDate(0, 0, 16), paid.BillingDate)
	e.runAt(t, feb3.AddDate(0, 0, 16).Add(time.Minute), billing.RunScheduled)
	calls := e.pay.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, plusPrice, calls[0].Request.Amount)
	assert.Equal(t, feb3.AddDate(0, 1, 16), e.latest(t).BillingDate, "the anchor follows the early end")

	_, err = e.c.EndTrial(t.Context(), ur(e.user, "e2"))
	require.ErrorIs(t, err, billing.ErrNotCollectible, "no trial in progress")
	assert.Equal(t, 2, e.changes(t)[billing.EventTrialChanged])
}

// TestTrialReactivationIsPaid: a user whose trial was cancelled before
// it began is reactivated at the plan's price, not at the trial's zero
// (which free tiers would complete for ever without a charge).
func TestTrialReactivationIsPaid(t *testing.T) {
	t.Parallel()
	e := newTrialEnv(t, memoryUserStores()[0])
	e.c = trialCollector(t, e, func(c *billing.Config) {
		c.AllowFreeTiers = true
		c.Prices = billing.PriceListMap{"Plus:v2": plusPrice}
	})
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
	require.NoError(t, err)
	_, err = e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "c1"), When: billing.CancelNow})
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	re, err := e.c.Reactivate(t.Context(), e.user, feb3.AddDate(0, 0, 1))
	require.NoError(t, err)
	assert.Equal(t, plusPrice, re.Amount)
	assert.False(t, re.IsTrial())
	e.runAt(t, feb3.AddDate(0, 0, 1).Add(time.Hour), billing.RunScheduled)
	calls := e.pay.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, plusPrice, calls[0].Request.Amount)
}

// TestTrialRewrittenByBatchNotCharged: a host's batch that rewrites a
// trial period with an amount (a reprice of every SCHEDULED record, as
// read) does not get the trial charged: the period is completed without
// the processor and the first charge is on the trial's end.
func TestTrialRewrittenByBatchNotCharged(t *testing.T) {
	t.Parallel()
	e := newTrialEnv(t, memoryUserStores()[0])
	out, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
	require.NoError(t, err)
	r := findRecord(t, e.records(t), out.Subscription.SubscriptionID)
	r.Amount = billing.MustParseAmount("0.50")
	_, err = e.repo.AddAll(t.Context(), []billing.Period{r})
	require.NoError(t, err)
	require.Equal(t, billing.MustParseAmount("0.50"), findRecord(t, e.records(t), r.SubscriptionID).Amount)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	assert.Zero(t, e.pay.CallCount(), "the trial is not charged")
	e.runAt(t, feb3.AddDate(0, 0, 14).Add(time.Hour), billing.RunScheduled)
	calls := e.pay.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, plusPrice, calls[0].Request.Amount)
}
