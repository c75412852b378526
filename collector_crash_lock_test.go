package billing_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crashLease is the lease of the lock crash sweep: short, so that waiting
// two of them stays cheap, and without heartbeats, so that the k-th call
// of a collection is always the same call.
const crashLease = 2 * time.Second

// lockCrashEnv is one user's collection on the legacy tables with the
// locks table behind the same fault-injecting wrapper: the sweep fails
// lock calls too.
type lockCrashEnv struct {
	w      *dynamotest.Wrapper
	repo   billing.Repository
	hist   billing.History
	pay    *billingtest.Provider
	clock  *billingtest.Clock
	locks  string
	user   string
	sub    billing.Period
	lockNo int
}

func newLockCrashEnv(t *testing.T) *lockCrashEnv {
	t.Helper()
	repo, hist := storetest.DynamoStores(t, memory.Options{})
	e := &lockCrashEnv{w: wrapperOf(t, repo), repo: repo, hist: hist, clock: billingtest.NewClock(jan31.Add(time.Hour)),
		locks: dynamotest.TableName(t, "locks"), user: "lock-crash-user"}
	dynamotest.CreateTable(t, dynamotest.Client(t), dynamostore.LockTableDefinition(e.locks))
	e.pay = billingtest.NewProvider(billingtest.ProviderOptions{Clock: e.clock})
	e.sub = billing.Period{UserID: e.user, SubscriptionID: "lock-crash-jan", BillingDate: jan31, Amount: billing.MustParseAmount("9.99"),
		Status: billing.StatusScheduled, BillingPeriod: "01/2024", Term: billing.TermMonthly, AnchorDay: 31,
		CreatedDate: jan31.AddDate(0, -1, 0), LastRunDate: jan31.AddDate(0, -1, 0)}
	require.NoError(t, repo.Add(context.Background(), &e.sub))
	e.w.Reset()
	return e
}

// locker returns a new locker instance, as a new Lambda invocation or a
// restarted server has.
func (e *lockCrashEnv) locker(t *testing.T) *dynamostore.Locker {
	t.Helper()
	e.lockNo++
	l, err := dynamostore.NewLocker(e.w, dynamostore.WithLockTable(e.locks), dynamostore.WithLeaseDuration(crashLease),
		dynamostore.WithHeartbeatPeriod(0), dynamostore.WithLockOwner(fmt.Sprintf("instance-%d", e.lockNo)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

// collector returns a collector on a new locker instance.
func (e *lockCrashEnv) collector(t *testing.T) *billing.Collector {
	t.Helper()
	c, err := billing.NewCollector(billing.Config{Repository: e.repo, History: e.hist, Locker: e.locker(t), Provider: e.pay,
		Clock: e.clock, Concurrency: 1, NewID: func() string { return "lock-crash-feb" }})
	require.NoError(t, err)
	return c
}

// run makes one scheduled run and returns its report (or the error).
func (e *lockCrashEnv) run(c *billing.Collector) (*billing.Report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
}

// check asserts the outcome after the rerun: one charge, recorded with its
// amount in the record and its history, one next period, and the user's
// lock free for anyone.
func (e *lockCrashEnv) check(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	recs, err := e.repo.ListByUser(ctx, e.user)
	require.NoError(t, err)
	require.Len(t, recs, 2, "the period and one next period")
	assert.Equal(t, billing.StatusCompleted, recs[0].Status)
	assert.Equal(t, billing.MustParseAmount("9.99"), recs[0].Amount)
	assert.False(t, recs[0].InFlight())
	assert.Equal(t, billing.StatusScheduled, recs[1].Status)
	assert.Equal(t, "02/2024", recs[1].BillingPeriod)
	charges := e.pay.ChargesFor(e.sub.SubscriptionID)
	require.Len(t, charges, 1, "exactly one charge")
	assert.Equal(t, charges[0].TransactionID, recs[0].TransactionID)
	rows, err := e.hist.ListBySubscription(ctx, e.sub.SubscriptionID)
	require.NoError(t, err)
	last := rows[len(rows)-1]
	assert.Equal(t, billing.StatusCompleted, last.Status)
	assert.Equal(t, billing.MustParseAmount("9.99"), last.Amount)
	assert.Equal(t, charges[0].Key, last.LastAttempt.Key)
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, e.user)
	billingtest.RequireNoDoubleCharge(t, e.pay)
	// No user left locked: a fresh instance takes the lock at once.
	lease, err := e.locker(t).Lock(ctx, e.user)
	require.NoError(t, err, "the user is still locked two leases after the crash")
	require.NoError(t, lease.Release(ctx))
}

// TestCollectorCrashAtEveryCallWithLocks fails the k-th DynamoDB call of
// one user's scheduled collection, lock calls and the in-flight write
// included, before it reaches the server and after it was applied. Then,
// two lease durations later, a new locker instance (a new invocation)
// reruns the collection: exactly one charge, recorded in the record and
// its history, one next period, and nobody left locked.
func TestCollectorCrashAtEveryCallWithLocks(t *testing.T) {
	t.Parallel()
	probe := newLockCrashEnv(t)
	rep, err := probe.run(probe.collector(t))
	require.NoError(t, err)
	require.Equal(t, 1, rep.Collected)
	ops := probe.w.Log()
	probe.check(t)
	require.Contains(t, ops, "UpdateItem", "the in-flight write is one of the calls")
	t.Logf("one collection: %d calls: %s", len(ops), strings.Join(ops, " "))

	var mu sync.Mutex
	table := map[string]string{}
	t.Cleanup(func() {
		var lines []string
		for k, v := range table {
			lines = append(lines, k+" | "+v)
		}
		slices.Sort(lines)
		t.Logf("crash sweep (call | operation | mode | first run | outcome after the rerun):\n%s", strings.Join(lines, "\n"))
	})
	for _, after := range []bool{false, true} {
		for k := 1; k <= len(ops); k++ {
			mode := "before"
			if after {
				mode = "after"
			}
			t.Run(fmt.Sprintf("%s-%d", mode, k), func(t *testing.T) {
				t.Parallel()
				e := newLockCrashEnv(t)
				if after {
					e.w.FailAfterInner(dynamotest.AnyOp, k, nil)
				} else {
					e.w.FailNth(dynamotest.AnyOp, k, nil)
				}
				first := "ok"
				if rep, err := e.run(e.collector(t)); err != nil {
					first = "error: " + err.Error()
				} else if len(rep.Failed) > 0 {
					first = "failed: " + rep.Failed[0].Reason
				} else if rep.Collected == 0 {
					first = fmt.Sprintf("not collected (locked %d)", rep.SkippedLocked)
				}
				calls := e.pay.CallCount()
				time.Sleep(2 * crashLease) // the crashed holder's lease runs out
				rep, err := e.run(e.collector(t))
				require.NoError(t, err)
				require.Zero(t, rep.SkippedLocked, "the new instance found the user locked")
				e.check(t)
				mu.Lock()
				table[fmt.Sprintf("%02d | %s | %s", k, ops[k-1], mode)] = fmt.Sprintf("%.60s | provider calls %d, then %d; 1 charge recorded",
					first, calls, e.pay.CallCount()-calls)
				mu.Unlock()
			})
		}
	}
}
