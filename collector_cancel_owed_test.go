package billing_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCancelUnowedRefusesOwedPeriods: CancelUnowed cancels a SCHEDULED or
// PAUSED record as Cancel does, and refuses, with an *OwedError and
// without a write or a processor call, an ERROR or ACHSENT record and one
// whose attempt is in flight; Cancel itself still forgives an ERROR one.
func TestCancelUnowedRefusesOwedPeriods(t *testing.T) {
	due := jan31.AddDate(0, 0, -1)
	for _, tc := range []struct {
		name     string
		status   billing.Status
		inFlight bool
		operator bool // Cancel instead of CancelUnowed
		want     billing.Status
	}{
		{name: "SCHEDULED", status: billing.StatusScheduled, want: billing.StatusCancelled},
		{name: "PAUSED", status: billing.StatusPaused, want: billing.StatusCancelled},
		{name: "ERROR", status: billing.StatusError, want: billing.StatusError},
		{name: "ACHSENT", status: billing.StatusACHSent, want: billing.StatusACHSent},
		{name: "SCHEDULED with an attempt in flight", status: billing.StatusScheduled, inFlight: true, want: billing.StatusScheduled},
		{name: "ERROR with Cancel", status: billing.StatusError, operator: true, want: billing.StatusCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCollectorEnv(t)
			s := e.add("u1", due, tc.status, func(s *billing.Period) {
				switch s.Status {
				case billing.StatusError, billing.StatusACHSent:
					s.Attempt, s.InitialRunDate, s.LastRunDate, s.TransactionID = 1, due.Add(time.Hour), due.Add(time.Hour), "txn-1"
				case billing.StatusPaused:
					s.PauseDurationMonths = 2
				}
			})
			if tc.inFlight {
				marked := s.Clone()
				marked.LastAttempt = billing.Attempt{Number: s.Attempt + 1, Key: s.SubscriptionID + "#1", Amount: s.Amount,
					Tier: s.ReceiptTierName, Process: billing.ProcessInitial, Started: e.clock.Now().Add(-time.Minute)}
				require.NoError(t, e.repo.SetAttempt(t.Context(), &s, &marked))
			}
			before, err := e.repo.GetByID(t.Context(), s.SubscriptionID)
			require.NoError(t, err)
			require.Equal(t, tc.inFlight, before.InFlight(), "in flight before")
			histBefore, err := e.hist.ListBySubscription(t.Context(), s.SubscriptionID)
			require.NoError(t, err)

			cancel := e.c.Periods().CancelUnowed
			if tc.operator {
				cancel = e.c.Periods().Cancel
			}
			ch, err := cancel(t.Context(), s.SubscriptionID)

			after, gerr := e.repo.GetByID(t.Context(), s.SubscriptionID)
			require.NoError(t, gerr)
			histAfter, herr := e.hist.ListBySubscription(t.Context(), s.SubscriptionID)
			require.NoError(t, herr)
			assert.Equal(t, tc.want, after.Status, "stored status")
			assert.Equal(t, 0, e.pay.CallCount(), "processor calls")
			assert.False(t, e.locker.Locked("u1"), "the user's lock is held")
			if tc.want == billing.StatusCancelled {
				require.NoError(t, err)
				assert.Equal(t, billing.StatusCancelled, ch.After.Status, "change after")
				assert.Equal(t, tc.status, ch.Before.Status, "change before")
				require.Len(t, histAfter, len(histBefore)+1, "history rows")
				assert.Equal(t, billing.StatusCancelled, histAfter[len(histAfter)-1].Status, "the new history row")
				return
			}
			require.ErrorIs(t, err, billing.ErrOwed)
			var oe *billing.OwedError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, billing.OwedError{SubscriptionID: s.SubscriptionID, Status: tc.status, InFlight: tc.inFlight}, *oe)
			assert.NotErrorIs(t, err, billing.ErrNotCollectible)
			assert.Equal(t, before, after, "the refused record changed")
			assert.Equal(t, histBefore, histAfter, "the refused record's history changed")
			assert.Equal(t, billing.Change{}, ch, "change of a refused cancel")
		})
	}
}
