package billing_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	itel "github.com/dynabill/billing/internal/telemetry"
)

// countingLocker counts the Lock calls of each user.
type countingLocker struct {
	billing.Locker
	mu    sync.Mutex
	locks map[string]int
}

func (l *countingLocker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	l.mu.Lock()
	l.locks[userID]++
	l.mu.Unlock()
	return l.Locker.Lock(ctx, userID)
}

// TestRunGroupsAPagesRecordsByUser checks how a run hands a page's
// records to its users: a user with several records due is locked once
// per page and its records handled in index order, each record once (its older period
// first), every other user once with its record, nothing charged twice.
func TestRunGroupsAPagesRecordsByUser(t *testing.T) {
	var lk *countingLocker
	o := newOtelEnv(t)
	e := newCollectorEnv(t, func(c *billing.Config) {
		lk = &countingLocker{Locker: c.Locker, locks: map[string]int{}}
		c.Locker, c.MeterProvider = lk, o.mp
	})
	var singles []billing.Period
	for i := range 5 {
		singles = append(singles, e.add(fmt.Sprintf("u%d", i), jan31, billing.StatusScheduled))
	}
	e.addBatch("u-two", jan31.AddDate(0, 0, -2), jan31)

	rep, err := e.c.Run(context.Background(), billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err, "report = %+v", rep)

	for _, s := range singles {
		assert.Len(t, e.pay.ChargesFor(s.SubscriptionID), 1, s.SubscriptionID)
	}
	first := envRecord("u-two", jan31.AddDate(0, 0, -2), billing.StatusScheduled)
	require.Len(t, e.pay.ChargesFor(first.SubscriptionID), 1, "the user's older record")
	var two []string
	for _, c := range e.pay.Charges() {
		if c.UserID == "u-two" {
			two = append(two, c.SubscriptionID)
		}
	}
	require.NotEmpty(t, two)
	assert.Equal(t, first.SubscriptionID, two[0], "the user's older record is handled first: charges %v", two)
	seen := map[string]int{}
	for _, c := range e.pay.Charges() {
		seen[c.Key]++
	}
	for key, n := range seen {
		assert.Equal(t, 1, n, "key %s charged %d times", key, n)
	}
	handled := int64(0) // one outcome per record: each handled once
	for _, n := range o.counts(t, itel.MetricCollectionAttempts) {
		handled += n
	}
	assert.Equal(t, int64(7), handled, "records handled")
	want := map[string]int{"u-two": 1}
	for _, s := range singles {
		want[s.UserID] = 1
	}
	lk.mu.Lock()
	defer lk.mu.Unlock()
	assert.Equal(t, want, lk.locks, "Lock calls by user")
}
