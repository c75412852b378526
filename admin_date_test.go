package billing_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forEachCollectorStore runs f on a collector over the in-memory store and
// over the legacy DynamoDB tables on the local server.
func forEachCollectorStore(t *testing.T, f func(t *testing.T, e *collectorEnv)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		f(t, newCollectorEnv(t))
	})
	t.Run("dynamo", func(t *testing.T) {
		t.Parallel()
		repo, hist := storetest.DynamoStores(t, memory.Options{PageSize: 7})
		e := newCollectorEnv(t, func(c *billing.Config) { c.Repository, c.History = repo, hist })
		e.repo, e.hist = repo, hist
		f(t, e)
	})
}

// requireDateMoveError checks that err refuses a move of sub to date
// because of the record other, and is a validation error, not a conflict.
func requireDateMoveError(t *testing.T, err error, sub string, date time.Time, other billing.Period, later bool) {
	t.Helper()
	var de *billing.DateMoveError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, sub, de.SubscriptionID)
	assert.True(t, de.Date.Equal(date), "requested date %v", de.Date)
	assert.Equal(t, other.SubscriptionID, de.PeriodID)
	assert.True(t, de.PeriodDate.Equal(other.BillingDate), "period date %v", de.PeriodDate)
	assert.Equal(t, other.Status, de.PeriodStatus)
	assert.Equal(t, later, de.Later)
	assert.ErrorIs(t, err, billing.ErrDateMove)
	assert.ErrorIs(t, err, billing.ErrInvalidDate)
	assert.False(t, billing.IsConflict(err), "a refused move is not a conflict to retry: %v", err)
	assert.NotErrorIs(t, err, billing.ErrConflict)
	assert.NotErrorIs(t, err, billing.ErrAlreadyExists)
	assert.Contains(t, err.Error(), date.UTC().Format(time.RFC3339))
	assert.Contains(t, err.Error(), other.BillingDate.UTC().Format(time.RFC3339))
}

// TestChangeBillingDateKeepsPeriodOrder: a record cannot be moved onto or
// past the user's next open period, nor onto or before its previous
// period; a move inside the gap works and the refused ones change nothing.
func TestChangeBillingDateKeepsPeriodOrder(t *testing.T) {
	forEachCollectorStore(t, func(t *testing.T, e *collectorEnv) {
		ctx := t.Context()
		feb29 := time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC)
		// Within the stale threshold: an older date is refused before the
		// periods are compared (TestDatesAreValidatedWhereTheyEnter).
		old := e.add("u1", jan31.AddDate(0, 0, -10), billing.StatusCompleted, func(s *billing.Period) {
			s.InitialRunDate, s.CompletionDate, s.Attempt = s.LastRunDate, s.LastRunDate, 1
		})
		retrying := e.add("u1", jan31, billing.StatusError, func(s *billing.Period) {
			s.InitialRunDate, s.Attempt, s.PaymentError = s.LastRunDate, 1, "insufficient funds"
		})
		nextPeriod := e.add("u1", feb29, billing.StatusScheduled)
		before := e.records("u1")

		// Past the next open period: the bug left two open periods out of
		// order and no period after them.
		past := time.Date(2024, 3, 10, 15, 0, 0, 0, time.UTC)
		_, err := e.c.Periods().Move(ctx, retrying.SubscriptionID, past)
		requireDateMoveError(t, err, retrying.SubscriptionID, past, nextPeriod, true)
		// Exactly onto it: the same validation error, not a conflict.
		_, err = e.c.Periods().Move(ctx, retrying.SubscriptionID, feb29)
		requireDateMoveError(t, err, retrying.SubscriptionID, feb29, nextPeriod, true)
		// The next period onto or before the previous one.
		_, err = e.c.Periods().Move(ctx, nextPeriod.SubscriptionID, jan31)
		requireDateMoveError(t, err, nextPeriod.SubscriptionID, jan31, retrying, false)
		early := jan31.AddDate(0, 0, -3)
		_, err = e.c.Periods().Move(ctx, nextPeriod.SubscriptionID, early)
		requireDateMoveError(t, err, nextPeriod.SubscriptionID, early, retrying, false)
		// Before an earlier terminal period.
		_, err = e.c.Periods().Move(ctx, retrying.SubscriptionID, old.BillingDate.AddDate(0, 0, -1))
		requireDateMoveError(t, err, retrying.SubscriptionID, old.BillingDate.AddDate(0, 0, -1), old, false)
		require.Equal(t, before, e.records("u1"), "a refused move wrote")

		// Inside the gap, both ways, and past the end of the period old
		// paid (February 21st): a date inside it is refused
		// (TestDateMoveIntoPaidPeriodRefused).
		feb22 := time.Date(2024, 2, 22, 9, 0, 0, 0, time.UTC)
		ch, err := e.c.Periods().Move(ctx, retrying.SubscriptionID, feb22)
		require.NoError(t, err)
		assert.True(t, ch.After.BillingDate.Equal(feb22))
		feb23 := feb22.AddDate(0, 0, 1)
		ch, err = e.c.Periods().Move(ctx, nextPeriod.SubscriptionID, feb23)
		require.NoError(t, err)
		assert.Equal(t, 23, ch.After.AnchorDay)
		recs := e.records("u1")
		require.Len(t, recs, 3)
		assert.Equal(t, []string{old.SubscriptionID, retrying.SubscriptionID, nextPeriod.SubscriptionID},
			[]string{recs[0].SubscriptionID, recs[1].SubscriptionID, recs[2].SubscriptionID})
		assert.True(t, recs[1].BillingDate.Equal(feb22) && recs[1].Status == billing.StatusError)
		assert.True(t, recs[2].BillingDate.Equal(feb23) && recs[2].Status == billing.StatusScheduled)
		billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u1")
	})
}

// TestChangeBillingDatePastTerminalRecord: a later record that is closed
// does not hold a move back (the moved record stays the latest open one
// and the collector goes on from it); only its own date is refused.
func TestChangeBillingDatePastTerminalRecord(t *testing.T) {
	forEachCollectorStore(t, func(t *testing.T, e *collectorEnv) {
		ctx := t.Context()
		s := e.add("u2", jan31, billing.StatusScheduled)
		feb29 := time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC)
		cancelled := e.add("u2", feb29, billing.StatusCancelled, func(s *billing.Period) { s.CompletionDate = s.LastRunDate })

		_, err := e.c.Periods().Move(ctx, s.SubscriptionID, feb29)
		requireDateMoveError(t, err, s.SubscriptionID, feb29, cancelled, true)

		mar15 := time.Date(2024, 3, 15, 15, 0, 0, 0, time.UTC)
		_, err = e.c.Periods().Move(ctx, s.SubscriptionID, mar15)
		require.NoError(t, err)
		e.clock.Set(mar15.Add(time.Hour))
		rep := e.run(billing.RunScheduled)
		assert.Equal(t, 1, rep.Collected)
		recs := e.records("u2")
		require.Len(t, recs, 3)
		assert.Equal(t, billing.StatusCompleted, recs[1].Status)
		assert.True(t, recs[1].BillingDate.Equal(mar15))
		assert.Equal(t, billing.StatusScheduled, recs[2].Status)
		assert.True(t, recs[2].BillingDate.Equal(time.Date(2024, 4, 15, 15, 0, 0, 0, time.UTC)), "next period %v", recs[2].BillingDate)
	})
}
