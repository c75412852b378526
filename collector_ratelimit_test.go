package billing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fastBudget backs off for a millisecond, so rate-limit tests do not wait.
func fastBudget(retries int) func(*billing.Config) {
	return func(c *billing.Config) {
		c.ProcessorBudget = billing.ProcessorBudget{RateLimitRetries: retries, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	}
}

func (e *collectorEnv) runOnce(kind billing.RunKind) *billing.Report {
	e.t.Helper()
	rep, err := e.c.Run(context.Background(), billing.RunRequest{Kind: kind})
	require.NoError(e.t, err)
	require.Empty(e.t, rep.Next, "one page expected")
	return rep
}

// TestCollectorRateLimitedRetriedInRun: refused calls are not attempts;
// the run tries again after backing off and every record is charged once.
func TestCollectorRateLimitedRetriedInRun(t *testing.T) {
	e := newCollectorEnv(t, fastBudget(3))
	for _, u := range []string{"u1", "u2", "u3"} {
		e.add(u, jan31, billing.StatusScheduled)
	}
	e.pay.SetUser("u2", billingtest.RateLimited(0), billingtest.RateLimited(time.Millisecond), billingtest.Succeeded())

	rep := e.runOnce(billing.RunScheduled)
	assert.Equal(t, 3, rep.Collected)
	assert.Equal(t, 2, rep.RateLimited)
	assert.Zero(t, rep.Unknown)
	assert.Zero(t, rep.Declined)
	assert.Empty(t, rep.Failed)
	billingtest.RequireNoDoubleCharge(t, e.pay)
	require.Len(t, e.pay.Charges(), 3)

	got := e.records("u2")[0]
	assert.Equal(t, billing.StatusCompleted, got.Status)
	assert.Equal(t, 1, got.Attempt, "refused calls are not counted as attempts")
	assert.Equal(t, billing.IdempotencyKey(got.SubscriptionID, 1), got.LastAttempt.Key)
	assert.Len(t, e.records("u2"), 2, "the next period opened once")
	assert.Equal(t, []string{billing.IdempotencyKey(got.SubscriptionID, 1)}, e.pay.KeysFor(got.SubscriptionID))
}

// TestCollectorRateLimitedLeftForNextRun: past the retries a record is
// left exactly as it was (not in flight, attempt not consumed, no history
// row), an operator may act on it at once, and the next run collects it.
func TestCollectorRateLimitedLeftForNextRun(t *testing.T) {
	e := newCollectorEnv(t, fastBudget(1))
	s := e.add("u1", jan31, billing.StatusScheduled)
	w := e.add("u2", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.RateLimited(0), billingtest.RateLimited(0), billingtest.Succeeded())
	e.pay.SetUser("u2", billingtest.RateLimited(0), billingtest.RateLimited(0))
	ctx := context.Background()
	histBefore, err := e.hist.ListBySubscription(ctx, s.SubscriptionID)
	require.NoError(t, err)

	rep := e.runOnce(billing.RunScheduled)
	assert.Equal(t, 4, rep.RateLimited)
	assert.Zero(t, rep.Collected+rep.Unknown+rep.Declined)
	assert.Empty(t, rep.Failed)
	assert.Empty(t, e.pay.Charges())
	for _, r := range []billing.Period{s, w} {
		got := e.records(r.UserID)
		require.Len(t, got, 1)
		assert.Equal(t, billing.StatusScheduled, got[0].Status)
		assert.False(t, got[0].InFlight())
		assert.Zero(t, got[0].Attempt)
		assert.Equal(t, billing.Attempt{}, got[0].LastAttempt)
		assert.Equal(t, r.LastRunDate, got[0].LastRunDate)
	}
	histAfter, err := e.hist.ListBySubscription(ctx, s.SubscriptionID)
	require.NoError(t, err)
	assert.Len(t, histAfter, len(histBefore), "a refused call writes no history")

	// Not in flight: waiving needs no replay and charges nothing.
	_, err = e.c.Periods().WaiveByID(ctx, w.SubscriptionID)
	require.NoError(t, err)
	assert.Empty(t, e.pay.Charges())

	rep = e.runOnce(billing.RunScheduled)
	assert.Equal(t, 1, rep.Collected)
	billingtest.RequireNoDoubleCharge(t, e.pay)
	require.Len(t, e.pay.Charges(), 1)
	got := e.records("u1")[0]
	assert.Equal(t, billing.StatusCompleted, got.Status)
	assert.Equal(t, 1, got.Attempt)
}

// TestCollectorRateLimitedReplayStaysInFlight: an attempt whose outcome is
// unknown stays in flight when its replay is refused, and that refusal is
// not counted as another unknown outcome; the replay later charges once.
func TestCollectorRateLimitedReplayStaysInFlight(t *testing.T) {
	e := newCollectorEnv(t, fastBudget(-1))
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.UnknownBeforeCharge(nil), billingtest.RateLimited(0), billingtest.Succeeded())

	rep := e.runOnce(billing.RunScheduled)
	assert.Equal(t, 1, rep.Unknown)
	rec := e.records("u1")[0]
	require.True(t, rec.InFlight())
	key := rec.LastAttempt.Key

	rep = e.runOnce(billing.RunScheduled)
	assert.Equal(t, 1, rep.RateLimited)
	assert.Zero(t, rep.Unknown, "a refused replay is not a new unknown outcome")
	rec = e.records("u1")[0]
	require.True(t, rec.InFlight(), "the first call's fate is still open")
	assert.Equal(t, key, rec.LastAttempt.Key)

	rep = e.runOnce(billing.RunScheduled)
	assert.Equal(t, 1, rep.Collected)
	billingtest.RequireNoDoubleCharge(t, e.pay)
	require.Len(t, e.pay.ChargesFor(s.SubscriptionID), 1)
	assert.Equal(t, key, e.pay.ChargesFor(s.SubscriptionID)[0].Key)
}

// TestCollectorRateLimitedStormChargesOnce: a processor that rate-limits
// each user a different number of times, over several runs, charges every
// record once and loses none.
func TestCollectorRateLimitedStormChargesOnce(t *testing.T) {
	e := newCollectorEnv(t, fastBudget(2))
	var subs []billing.Period
	for i := range 6 {
		u := string(rune('a'+i)) + "-user"
		subs = append(subs, e.add(u, jan31, billing.StatusScheduled))
		var steps []billingtest.Step
		for range i {
			steps = append(steps, billingtest.RateLimited(0))
		}
		e.pay.SetUser(u, append(steps, billingtest.Succeeded())...)
	}
	limited := 0
	for range 4 {
		rep := e.runOnce(billing.RunScheduled)
		limited += rep.RateLimited
		assert.Zero(t, rep.Unknown)
		assert.Zero(t, rep.Declined)
	}
	assert.Equal(t, 0+1+2+3+4+5, limited)
	billingtest.RequireNoDoubleCharge(t, e.pay)
	for _, s := range subs {
		recs := e.records(s.UserID)
		require.Len(t, recs, 2, "%s: collected once, next period opened once", s.UserID)
		assert.Equal(t, billing.StatusCompleted, recs[0].Status, s.UserID)
		assert.Equal(t, 1, recs[0].Attempt, s.UserID)
		assert.Len(t, e.pay.ChargesFor(s.SubscriptionID), 1, s.UserID)
	}
}

func TestCollectorProcessorBudgetValidated(t *testing.T) {
	e := newCollectorEnv(t)
	for _, b := range []billing.ProcessorBudget{{RequestsPerSecond: -1}, {Concurrency: -1}, {Backoff: -time.Second}} {
		_, err := billing.NewCollector(billing.Config{Repository: e.repo, Locker: e.locker, Provider: e.pay, ProcessorBudget: b})
		assert.ErrorContains(t, err, "ProcessorBudget", "%+v", b)
	}
}

// throttled is a provider's rate-limited answer that proves nothing about
// the outcome: not ErrRateLimited, but ProcessorThrottled asks the
// collector to slow down.
type throttled struct{ wait time.Duration }

func (e throttled) Error() string                     { return "429, and an earlier try may have charged" }
func (e throttled) ProcessorThrottled() time.Duration { return e.wait }

// TestCollectorThrottledUnknownStaysInFlight: an error with a
// ProcessorThrottled method is counted as rate limited (the collector
// backs off for it) but is no refusal: the attempt is not withdrawn and
// stays in flight, and the next run an hour later settles it once.
func TestCollectorThrottledUnknownStaysInFlight(t *testing.T) {
	e := newCollectorEnv(t, fastBudget(3))
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.UnknownBeforeCharge(fmt.Errorf("stripe: %w", throttled{wait: time.Millisecond})), billingtest.Succeeded())

	rep := e.runOnce(billing.RunScheduled)
	assert.Equal(t, 1, rep.Attempted, "not retried within the run, as a refusal would be")
	assert.Equal(t, 1, rep.Unknown)
	assert.Equal(t, 1, rep.RateLimited)
	assert.Empty(t, e.pay.Charges())
	got := e.records("u1")
	require.Len(t, got, 1)
	require.True(t, got[0].InFlight(), "the attempt was withdrawn")
	assert.Equal(t, billing.IdempotencyKey(s.SubscriptionID, 1), got[0].LastAttempt.Key)

	e.clock.Advance(time.Hour)
	e.runOnce(billing.RunScheduled)
	require.Len(t, e.pay.Charges(), 1)
	billingtest.RequireNoDoubleCharge(t, e.pay)
	assert.Equal(t, billing.StatusCompleted, e.records("u1")[0].Status)
	assert.Equal(t, []string{billing.IdempotencyKey(s.SubscriptionID, 1)}, e.pay.KeysFor(s.SubscriptionID))
}
