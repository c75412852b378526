package billing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChargeGuardRefusesAmountsOutsideTheLimits: a record written past
// the price checks (here by AddAll, as another program's batch would) is
// checked against Config.MaxCharge and AllowFreeTiers before its charge.
// One outside them is never presented to the processor, nothing is
// written to it, and every run reports it as failed with the reason; one
// inside them is charged once, for its amount.
func TestChargeGuardRefusesAmountsOutsideTheLimits(t *testing.T) {
	t.Parallel()
	setMax := billing.MustParseAmount("100.00")
	withMax := func(c *billing.Config) { c.MaxCharge = setMax }
	freeTiers := func(c *billing.Config) { c.AllowFreeTiers = true }
	tests := []struct {
		name    string
		cfg     []func(*billing.Config)
		amount  billing.Amount
		charged bool
	}{
		{name: "over the default limit", amount: billing.DefaultMaxCharge + 1},
		{name: "at the default limit", amount: billing.DefaultMaxCharge, charged: true},
		{name: "over a set limit", cfg: []func(*billing.Config){withMax}, amount: billing.MustParseAmount("100.01")},
		{name: "at a set limit", cfg: []func(*billing.Config){withMax}, amount: setMax, charged: true},
		{name: "zero", amount: 0},
		{name: "zero with a set limit", cfg: []func(*billing.Config){withMax}, amount: 0},
		{name: "over a set limit with free tiers", cfg: []func(*billing.Config){withMax, freeTiers}, amount: billing.MustParseAmount("100.01")},
		// A zero with free tiers is completed without the processor: see
		// TestFreeTierCompletesWithoutProcessor.
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newCollectorEnv(t, tt.cfg...)
			ctx := context.Background()
			s := envRecord("u1", jan31, billing.StatusScheduled)
			s.Amount = tt.amount
			_, err := e.repo.AddAll(ctx, []billing.Period{s})
			require.NoError(t, err)
			before := e.records("u1")
			require.Len(t, before, 1)
			histBefore, err := e.hist.ListByUser(ctx, "u1")
			require.NoError(t, err)

			if tt.charged {
				rep := e.run(billing.RunScheduled)
				assert.Empty(t, rep.Failed, "report = %+v", rep)
				assert.Equal(t, 1, rep.Attempted, "report = %+v", rep)
				assert.Equal(t, 1, rep.Collected, "report = %+v", rep)
				calls := e.pay.Calls()
				if assert.Len(t, calls, 1, "provider calls = %+v", calls) {
					assert.Equal(t, tt.amount, calls[0].Request.Amount)
					assert.Equal(t, s.SubscriptionID, calls[0].Request.SubscriptionID)
					assert.Equal(t, billing.IdempotencyKey(s.SubscriptionID, 1), calls[0].Request.IdempotencyKey)
				}
				got := findRecord(t, e.records("u1"), s.SubscriptionID)
				assert.Equal(t, billing.StatusCompleted, got.Status, "record = %+v", got)
				assert.Equal(t, tt.amount, got.Amount, "record = %+v", got)
				e.clock.Advance(time.Hour)
				rep = e.run(billing.RunScheduled)
				assert.Empty(t, rep.Failed, "report = %+v", rep)
				assert.Zero(t, rep.Attempted, "report = %+v", rep)
				assert.Len(t, e.pay.Calls(), 1, "charged once in all")
				return
			}

			for run := range 2 { // the second an hour later
				if run > 0 {
					e.clock.Advance(time.Hour)
				}
				rep := e.run(billing.RunScheduled)
				assert.Zero(t, rep.Attempted, "run %d: report = %+v", run, rep)
				assert.Zero(t, rep.Collected+rep.Declined+rep.Pending+rep.Unknown, "run %d: report = %+v", run, rep)
				if assert.Len(t, rep.Failed, 1, "run %d: report = %+v", run, rep) {
					f := rep.Failed[0]
					assert.Equal(t, "u1", f.UserID)
					assert.Equal(t, s.SubscriptionID, f.SubscriptionID)
					assert.Contains(t, f.Reason, billing.ErrInvalidAmount.Error())
					assert.Contains(t, f.Reason, "billing_amount")
					assert.Contains(t, f.Reason, s.Key())
				}
				assert.Empty(t, e.pay.Calls(), "run %d: nothing presented to the processor", run)
				assert.Equal(t, before, e.records("u1"), "run %d: the record is as it was written", run)
			}

			// A collection of the record alone is refused the same way, with
			// the typed error.
			_, err = e.c.Periods().Collect(ctx, s.SubscriptionID)
			require.ErrorIs(t, err, billing.ErrInvalidAmount)
			var fe *billing.FieldError
			if assert.True(t, errors.As(err, &fe), "error %v is no *FieldError", err) {
				assert.Equal(t, "billing_amount", fe.Field)
				assert.Equal(t, tt.amount.String(), fe.Value)
				assert.Equal(t, s.Key(), fe.Key)
			}
			assert.Empty(t, e.pay.Calls(), "nothing presented to the processor")
			after := e.records("u1")
			assert.Equal(t, before, after, "the record is as it was written")
			if assert.Len(t, after, 1) {
				assert.Equal(t, billing.StatusScheduled, after[0].Status)
				assert.Zero(t, after[0].Attempt)
				assert.Zero(t, after[0].LastAttempt, "no attempt recorded")
			}
			histAfter, err := e.hist.ListByUser(ctx, "u1")
			require.NoError(t, err)
			assert.Len(t, histAfter, len(histBefore), "no history row written")
			assert.Zero(t, e.events.Count(billing.EventPaymentSucceeded)+e.events.Count(billing.EventPaymentDeclined)+
				e.events.Count(billing.EventPaymentPending), "events = %+v", e.events.Events())
		})
	}
}

// TestChargeGuardOneRunOfMixedAmounts: in one run, the records outside
// the limits are reported and left alone while the one at MaxCharge is
// charged; an hour later they are reported again and still not charged.
func TestChargeGuardOneRunOfMixedAmounts(t *testing.T) {
	t.Parallel()
	maxCharge := billing.MustParseAmount("100.00")
	e := newCollectorEnv(t, func(c *billing.Config) { c.MaxCharge = maxCharge })
	ctx := context.Background()
	amounts := map[string]billing.Amount{"over": maxCharge + 1, "zero": 0, "max": maxCharge}
	recs := map[string]billing.Period{}
	for user, amount := range amounts {
		s := envRecord(user, jan31, billing.StatusScheduled)
		s.Amount = amount
		_, err := e.repo.AddAll(ctx, []billing.Period{s})
		require.NoError(t, err)
		recs[user] = s
	}
	before := map[string][]billing.Period{"over": e.records("over"), "zero": e.records("zero")}
	for run := range 2 {
		if run > 0 {
			e.clock.Advance(time.Hour)
		}
		rep := e.run(billing.RunScheduled)
		failed := map[string]string{}
		for _, f := range rep.Failed {
			failed[f.SubscriptionID] = f.Reason
		}
		assert.Len(t, failed, 2, "run %d: report = %+v", run, rep)
		for _, user := range []string{"over", "zero"} {
			s := recs[user]
			if assert.Contains(t, failed, s.SubscriptionID, "run %d", run) {
				assert.Contains(t, failed[s.SubscriptionID], billing.ErrInvalidAmount.Error())
				assert.Contains(t, failed[s.SubscriptionID], s.Key())
			}
			assert.Equal(t, before[user], e.records(user), "run %d: %s is as it was written", run, user)
		}
		calls := e.pay.Calls()
		if assert.Len(t, calls, 1, "run %d: charged once in all: %+v", run, calls) {
			assert.Equal(t, recs["max"].SubscriptionID, calls[0].Request.SubscriptionID)
			assert.Equal(t, maxCharge, calls[0].Request.Amount)
		}
		assert.Equal(t, billing.StatusCompleted, findRecord(t, e.records("max"), recs["max"].SubscriptionID).Status)
	}
}

// findRecord returns the record of recs with subscriptionID.
func findRecord(t *testing.T, recs []billing.Period, subscriptionID string) billing.Period {
	t.Helper()
	for _, r := range recs {
		if r.SubscriptionID == subscriptionID {
			return r
		}
	}
	require.Failf(t, "record not found", "%s not among %+v", subscriptionID, recs)
	return billing.Period{}
}
