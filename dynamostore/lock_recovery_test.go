package dynamostore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The recovery tests use short leases: each runs a handful of leases on
// their own, and measures takeovers in lease durations.
const (
	recoveryLease     = time.Second
	recoveryHeartbeat = 100 * time.Millisecond
	recoveryPoll      = recoveryLease / 20
)

func recoveryOpts(table string) []dynamostore.LockerOption {
	return []dynamostore.LockerOption{dynamostore.WithLockTable(table),
		dynamostore.WithLeaseDuration(recoveryLease), dynamostore.WithHeartbeatPeriod(recoveryHeartbeat)}
}

// lockFresh tries to lock u with a new Locker, the way a new Lambda
// invocation or a restarted server would: it has never seen the lock
// before. A locker that got the lease is closed when the test ends.
func lockFresh(t *testing.T, client dynamostore.API, table, u string) (billing.Lease, error) {
	t.Helper()
	l, err := dynamostore.NewLocker(client, recoveryOpts(table)...)
	require.NoError(t, err)
	lease, err := l.Lock(t.Context(), u)
	if err != nil {
		require.NoError(t, l.Close(t.Context()))
		return nil, err
	}
	t.Cleanup(func() { assert.NoError(t, l.Close(context.Background())) })
	return lease, nil
}

// pollFresh calls lockFresh every recoveryPoll until it gets u's lock or
// until within has passed since from. Every failure must be
// ErrAlreadyLocked. It returns the lease (nil if none) and when it was
// taken, counted from from.
func pollFresh(t *testing.T, client dynamostore.API, table, u string, from time.Time, within time.Duration) (billing.Lease, time.Duration) {
	t.Helper()
	for {
		lease, err := lockFresh(t, client, table, u)
		took := time.Since(from)
		if err == nil {
			return lease, took
		}
		require.ErrorIs(t, err, billing.ErrAlreadyLocked)
		if took > within {
			return nil, took
		}
		time.Sleep(recoveryPoll)
	}
}

func inLeases(d time.Duration) string {
	return fmt.Sprintf("%.2f lease durations", float64(d)/float64(recoveryLease))
}

// TestDynamoLockerFreshInstanceTakesOverCrashedHolder: a holder crashes
// (from one instant on none of its calls reach DynamoDB, so it neither
// heartbeats nor releases); fresh lockers, one per attempt as Lambda
// invocations would be, get the lock within two lease durations. Before
// the heartbeat time was read, only a locker that had watched the lock for
// a whole lease could take it, and fresh ones got ErrAlreadyLocked for ever.
func TestDynamoLockerFreshInstanceTakesOverCrashedHolder(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	w := dynamotest.Wrap(client)
	holder := newDynamoLocker(t, w, recoveryOpts(table)...)
	t.Cleanup(w.ClearFaults) // before the holder's Close

	old, err := holder.Lock(t.Context(), "u1")
	require.NoError(t, err)
	time.Sleep(3 * recoveryHeartbeat)
	crash := time.Now()
	w.Throttle(dynamotest.AnyOp, 1<<30)

	lease, took := pollFresh(t, client, table, "u1", crash, 2*recoveryLease)
	require.NotNil(t, lease, "no fresh locker took the crashed holder's lock within two lease durations (%v)", took)
	t.Logf("a fresh locker took over the lock %s after its holder crashed", inLeases(took))
	select {
	case <-old.Lost():
	default:
		assert.Fail(t, "the lock was taken over before its old holder's Lost was closed")
	}
	assert.False(t, time.Now().Before(old.Deadline()), "the lock was taken over before the old holder's Deadline %v", old.Deadline())
	assert.True(t, old.Deadline().Before(crash.Add(recoveryLease)), "the old holder's Deadline is a lease or more after its last heartbeat")

	w.ClearFaults()
	require.ErrorIs(t, old.Release(t.Context()), billing.ErrLeaseLost)
	require.NoError(t, lease.Release(t.Context()))
}

// TestDynamoLockerFreshInstanceLeavesLiveHolder: while a holder heartbeats,
// neither fresh lockers nor one that keeps watching take its lock, for
// three lease durations. The holder's data is from long ago (its clock is
// a fake one), as the legacy service's data is after the first minute:
// the locker must not judge a lock by its data.
func TestDynamoLockerFreshInstanceLeavesLiveHolder(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	holder := newDynamoLocker(t, client, append(recoveryOpts(table),
		dynamostore.WithLockClock(billingtest.NewClock(time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC))))...)
	watcher := newDynamoLocker(t, client, recoveryOpts(table)...)

	lease, err := holder.Lock(t.Context(), "u1")
	require.NoError(t, err)
	start := time.Now()
	deadline := lease.Deadline()
	for attempts := 1; time.Since(start) < 3*recoveryLease; attempts++ {
		var l billing.Locker = watcher
		what := "the watching locker"
		if attempts%2 == 0 {
			fresh, err := dynamostore.NewLocker(client, recoveryOpts(table)...)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, fresh.Close(context.Background())) })
			l, what = fresh, "a fresh locker"
		}
		taken, err := l.Lock(t.Context(), "u1")
		if err == nil {
			_ = taken.Release(t.Context())
			t.Fatalf("%s took a live holder's lock %s after it was taken (attempt %d)", what, inLeases(time.Since(start)), attempts)
		}
		require.ErrorIs(t, err, billing.ErrAlreadyLocked)
		time.Sleep(recoveryPoll)
	}
	select {
	case <-lease.Lost():
		require.FailNow(t, "the live holder's lease was lost")
	default:
	}
	assert.True(t, lease.Deadline().After(deadline.Add(2*recoveryLease)), "Deadline %v did not move forward with heartbeats (first %v)", lease.Deadline(), deadline)
	assert.True(t, lease.Deadline().After(time.Now()), "a renewed lease's Deadline has passed")
	require.NoError(t, lease.Release(t.Context()))
}

// TestDynamoLockerAcquireAppliedThenFailed: the write that takes the lock is
// applied but its caller gets an error (a timeout after DynamoDB committed
// it). Lock fails, and the user must not stay locked.
func TestDynamoLockerAcquireAppliedThenFailed(t *testing.T) {
	t.Run("Undone", func(t *testing.T) {
		client := dynamotest.Client(t)
		table := newLockTable(t, client)
		w := dynamotest.Wrap(client)
		l := newDynamoLocker(t, w, recoveryOpts(table)...)
		w.FailAfterInner("PutItem", 1, context.DeadlineExceeded)
		_, err := l.Lock(t.Context(), "u1")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, billing.ErrAlreadyLocked)

		lease, err := lockFresh(t, client, table, "u1")
		require.NoError(t, err, "another locker cannot lock the user right after a failed acquisition")
		require.NoError(t, lease.Release(t.Context()))
		lease, err = l.Lock(t.Context(), "u1")
		require.NoError(t, err, "the same locker cannot lock the user again")
		require.NoError(t, lease.Release(t.Context()))
	})

	t.Run("UndoFails", func(t *testing.T) {
		client := dynamotest.Client(t)
		table := newLockTable(t, client)
		w := dynamotest.Wrap(client)
		l := newDynamoLocker(t, w, recoveryOpts(table)...)
		w.FailAfterInner("PutItem", 1, context.DeadlineExceeded)
		w.FailNth("DeleteItem", 1, nil)
		start := time.Now()
		_, err := l.Lock(t.Context(), "u1")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 1, w.Calls("DeleteItem"), "Lock did not try to undo its failed acquisition")

		_, err = lockFresh(t, client, table, "u1")
		require.ErrorIs(t, err, billing.ErrAlreadyLocked, "the applied acquisition does not hold the lock (the test does not test anything)")
		lease, took := pollFresh(t, client, table, "u1", start, 2*recoveryLease)
		require.NotNil(t, lease, "no fresh locker took the lock of a failed acquisition within two lease durations (%v)", took)
		t.Logf("a fresh locker took the lock %s after the failed acquisition", inLeases(took))
		require.NoError(t, lease.Release(t.Context()))
	})
}

// TestDynamoLockerReleaseFails: Release fails (none of the holder's calls
// reach DynamoDB any more). It returns the error, the lease heartbeats no
// more, its Lost is closed at its Deadline, and another locker takes the
// lock within two lease durations although the holder never retries.
func TestDynamoLockerReleaseFails(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	w := dynamotest.Wrap(client)
	holder := newDynamoLocker(t, w, recoveryOpts(table)...)
	t.Cleanup(w.ClearFaults) // before the holder's Close

	lease, err := holder.Lock(t.Context(), "u1")
	require.NoError(t, err)
	time.Sleep(3 * recoveryHeartbeat)
	w.Throttle(dynamotest.AnyOp, 1<<30)
	failed := time.Now()
	err = lease.Release(t.Context())
	require.Error(t, err)
	require.NotErrorIs(t, err, billing.ErrLeaseLost)
	updates := w.Calls("UpdateItem")

	taken, took := pollFresh(t, client, table, "u1", failed, 2*recoveryLease)
	require.NotNil(t, taken, "no fresh locker took the lock within two lease durations of a failed Release (%v)", took)
	t.Logf("a fresh locker took the lock %s after its Release failed", inLeases(took))
	select {
	case <-lease.Lost():
	default:
		assert.Fail(t, "Lost not closed after the Deadline of a lease whose Release failed")
	}
	assert.False(t, time.Now().Before(lease.Deadline()))
	assert.Equal(t, updates, w.Calls("UpdateItem"), "heartbeats after a failed Release")

	w.ClearFaults()
	require.ErrorIs(t, lease.Release(t.Context()), billing.ErrLeaseLost, "a retried Release after the takeover")
	require.NoError(t, taken.Release(t.Context()))
}

// TestDynamoLockerDeadline: a lease's Deadline is within a lease duration of
// its acquisition, moves forward with heartbeats, stops when they fail, and
// Lost is closed once it has passed.
func TestDynamoLockerDeadline(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	w := dynamotest.Wrap(client)
	l := newDynamoLocker(t, w, recoveryOpts(table)...)
	t.Cleanup(w.ClearFaults)

	before := time.Now()
	lease, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	first := lease.Deadline()
	require.True(t, first.After(time.Now()), "Deadline %v of a new lease has passed", first)
	require.False(t, first.After(before.Add(recoveryLease)), "Deadline %v more than a lease after the Lock call", first)

	time.Sleep(5 * recoveryHeartbeat)
	renewed := lease.Deadline()
	require.True(t, renewed.After(first), "Deadline did not move with heartbeats")

	w.Throttle("UpdateItem", 1<<30)
	failing := time.Now()
	select {
	case <-lease.Lost():
	case <-time.After(2 * recoveryLease):
		require.FailNow(t, "Lost not closed while every heartbeat fails")
	}
	lostAt := time.Now()
	deadline := lease.Deadline()
	assert.False(t, lostAt.Before(deadline), "Lost closed before Deadline %v", deadline)
	assert.False(t, deadline.After(failing.Add(recoveryLease)), "Deadline %v more than a lease after the last heartbeat could succeed", deadline)
	w.ClearFaults()
	require.ErrorIs(t, lease.Release(t.Context()), billing.ErrLeaseLost)
}

// TestDynamoLockerAbandonedItems: lock items written by other clients that
// stopped. One whose record version carries a time (dynamolock v2.1.0 and
// later) an hour old is taken over at once by a fresh locker; one with a
// recent time is not. One without a time (earlier dynamolock versions)
// cannot be judged by a fresh locker, and is taken over by a locker that
// has seen it unchanged for a lease.
func TestDynamoLockerAbandonedItems(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	put := func(u, rvn string) {
		t.Helper()
		_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"PartitionKey":        &types.AttributeValueMemberS{Value: dynamostore.LockKey(u)},
				"ownerName":           &types.AttributeValueMemberS{Value: "legacy-worker"},
				"leaseDuration":       &types.AttributeValueMemberS{Value: recoveryLease.String()},
				"recordVersionNumber": &types.AttributeValueMemberS{Value: rvn},
				"data":                &types.AttributeValueMemberB{Value: []byte("1706659200000000000")},
			},
		})
		require.NoError(t, err)
	}
	stamped := func(at time.Time) string {
		return strconv.FormatInt(at.UnixNano(), 10) + ":LZ2DBSLTQXHM2UCGYA3BSAZK7X5B3NGF5JRYOEEZ4FBGDRVBKSWA"
	}

	put("old", stamped(time.Now().Add(-time.Hour)))
	lease, err := lockFresh(t, client, table, "old")
	require.NoError(t, err, "a fresh locker cannot take a lock whose last heartbeat is an hour old")
	require.NoError(t, lease.Release(t.Context()))

	put("recent", stamped(time.Now()))
	_, err = lockFresh(t, client, table, "recent")
	require.ErrorIs(t, err, billing.ErrAlreadyLocked)

	put("unstamped", "bbq0n5ubzt3cxoqbpfirgxpkdrbhy1rq")
	watcher := newDynamoLocker(t, client, recoveryOpts(table)...)
	_, err = watcher.Lock(t.Context(), "unstamped")
	require.ErrorIs(t, err, billing.ErrAlreadyLocked)
	time.Sleep(recoveryLease + recoveryLease/4)
	_, err = lockFresh(t, client, table, "unstamped")
	require.ErrorIs(t, err, billing.ErrAlreadyLocked, "a fresh locker took over a lock it cannot date")
	lease, err = watcher.Lock(t.Context(), "unstamped")
	require.NoError(t, err, "a locker that saw the lock unchanged for a lease did not take it over")
	require.NoError(t, lease.Release(t.Context()))
}

// TestDynamoLockerRecordVersionTime guards the dependency the takeover
// relies on: dynamolock makes each record version of its writer's time.
func TestDynamoLockerRecordVersionTime(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	l := newDynamoLocker(t, client, recoveryOpts(table)...)
	before := time.Now()
	lease, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	for _, when := range []string{"acquired", "after heartbeats"} {
		item := getLockItem(t, client, table, dynamostore.LockKey("u1"))
		rvn := item["recordVersionNumber"].(*types.AttributeValueMemberS).Value
		digits, _, ok := strings.Cut(rvn, ":")
		require.True(t, ok, "%s: record version %q has no time before a colon", when, rvn)
		ns, err := strconv.ParseInt(digits, 10, 64)
		require.NoError(t, err, "%s: record version %q", when, rvn)
		at := time.Unix(0, ns)
		assert.WithinRange(t, at, before.Add(-time.Second), time.Now().Add(time.Second), "%s: record version time", when)
		before = time.Now()
		time.Sleep(3 * recoveryHeartbeat)
	}
	require.NoError(t, lease.Release(t.Context()))
}
