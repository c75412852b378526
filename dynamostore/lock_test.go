package dynamostore_test

import (
	"context"
	"log/slog"
	"strconv"
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

// Leases are short to keep the suite at seconds, but moto serves about 200 calls a
// second on a small machine, so the heartbeats of the suite's 33 concurrent
// leases must stay well below that.
const (
	// testLease is long enough that a loaded machine (the whole test
	// suite hammering one single-threaded moto_server) cannot delay
	// heartbeats past it: a lease lost to load in the contention test would
	// look like a double holder.
	testLease     = 5 * time.Second
	testHeartbeat = 500 * time.Millisecond
)

// newLockTable creates a fresh lock table and returns its name.
func newLockTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	table := dynamotest.TableName(t, "locks")
	dynamotest.CreateTable(t, client, dynamostore.LockTableDefinition(table))
	return table
}

// newDynamoLocker returns a locker closed at the end of the test.
func newDynamoLocker(t *testing.T, client dynamostore.API, opts ...dynamostore.LockerOption) *dynamostore.Locker {
	t.Helper()
	l, err := dynamostore.NewLocker(client, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, l.Close(context.Background()), "Close")
	})
	return l
}

func TestDynamoLockerSuite(t *testing.T) {
	billingtest.TestLocker(t, func(t *testing.T) billingtest.LockerHarness {
		client := dynamotest.Client(t)
		table := newLockTable(t, client)
		opts := []dynamostore.LockerOption{dynamostore.WithLockTable(table), dynamostore.WithLeaseDuration(testLease)}
		return billingtest.LockerHarness{
			Locker:  newDynamoLocker(t, client, append(opts, dynamostore.WithHeartbeatPeriod(testHeartbeat))...),
			Stalled: newDynamoLocker(t, client, append(opts, dynamostore.WithHeartbeatPeriod(0))...),
			Fresh: func(t *testing.T) billing.Locker {
				return newDynamoLocker(t, client, append(opts, dynamostore.WithHeartbeatPeriod(testHeartbeat))...)
			},
			WaitLease: func() { time.Sleep(testLease + testLease/4) },
		}
	})
}

// TestDynamoLockerItem checks the lock item against the legacy wire format.
func TestDynamoLockerItem(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	acquired := time.Date(2024, 1, 31, 9, 30, 0, 123456789, time.UTC)
	l := newDynamoLocker(t, client, dynamostore.WithLockTable(table),
		dynamostore.WithLockOwner("collections-worker/req-1"),
		dynamostore.WithLockClock(billingtest.NewClock(acquired)))
	lease, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	item := getLockItem(t, client, table, "subscription-billing:user_id:u1")
	want := map[string]types.AttributeValue{
		"PartitionKey":  &types.AttributeValueMemberS{Value: "subscription-billing:user_id:u1"},
		"data":          &types.AttributeValueMemberB{Value: []byte("1706693400123456789")},
		"ownerName":     &types.AttributeValueMemberS{Value: "collections-worker/req-1"},
		"leaseDuration": &types.AttributeValueMemberS{Value: "1m0s"},
	}
	for name, w := range want {
		assert.True(t, attrEqual(item[name], w), "attribute %s = %#v, want %#v", name, item[name], w)
	}
	rvn, ok := item["recordVersionNumber"].(*types.AttributeValueMemberS)
	if assert.True(t, ok, "recordVersionNumber = %#v, want a string", item["recordVersionNumber"]) {
		assert.NotEmpty(t, rvn.Value, "recordVersionNumber = %#v, want a string", item["recordVersionNumber"])
	}
	assert.NotContains(t, item, "isReleased", "a held lock has isReleased")
	require.NoError(t, lease.Release(t.Context()))
	item = getLockItem(t, client, table, "subscription-billing:user_id:u1")
	assert.True(t, attrEqual(item["isReleased"], &types.AttributeValueMemberS{Value: "1"}),
		"after Release isReleased = %#v, want \"1\" (the item is kept, as the legacy service did)", item["isReleased"])
	ns, err := strconv.ParseInt(string(item["data"].(*types.AttributeValueMemberB).Value), 10, 64)
	if assert.NoError(t, err, "data") {
		assert.True(t, time.Unix(0, ns).Equal(acquired), "data = %d, want %v", ns, acquired)
	}
}

func getLockItem(t *testing.T, client *dynamodb.Client, table, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"PartitionKey": &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	require.NotNil(t, out.Item, "no lock item %q", key)
	return out.Item
}

func attrEqual(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && string(a.Value) == string(b.Value)
	}
	return false
}

// A single lease can heartbeat faster than the suite's many.
const (
	fastLease     = time.Second
	fastHeartbeat = 100 * time.Millisecond
)

// TestDynamoLockerHeartbeatFailure: a lease whose heartbeats fail is lost
// once no heartbeat has succeeded for the lease duration.
func TestDynamoLockerHeartbeatFailure(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	w := dynamotest.Wrap(client)
	l := newDynamoLocker(t, w, dynamostore.WithLockTable(table),
		dynamostore.WithLeaseDuration(fastLease), dynamostore.WithHeartbeatPeriod(fastHeartbeat))
	lease, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	start := time.Now()
	w.Throttle("UpdateItem", 1_000_000)
	select {
	case <-lease.Lost():
	case <-time.After(5 * fastLease):
		require.FailNow(t, "Lost not closed while every heartbeat fails")
	}
	d := time.Since(start)
	assert.GreaterOrEqual(t, d, fastLease-2*fastHeartbeat, "lost after %v, before the lease duration %v", d, fastLease)
	w.ClearFaults()
	assert.ErrorIs(t, lease.Release(t.Context()), billing.ErrLeaseLost, "Release")
}

// TestDynamoLockerTakeoverTiming: a stalled lease is not taken over before
// its lease duration has passed (here by the locker that watched it, a lease
// after it first saw it held), and its holder has been told by then.
func TestDynamoLockerTakeoverTiming(t *testing.T) {
	// A longer lease than fastLease: the probes before the lease duration
	// must not be pushed past it by a slow server on a loaded machine.
	const fastLease = 2 * time.Second
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	opts := []dynamostore.LockerOption{dynamostore.WithLockTable(table), dynamostore.WithLeaseDuration(fastLease)}
	stalled := newDynamoLocker(t, client, append(opts, dynamostore.WithHeartbeatPeriod(0))...)
	taker := newDynamoLocker(t, client, append(opts, dynamostore.WithHeartbeatPeriod(fastHeartbeat))...)
	old, err := stalled.Lock(t.Context(), "u1")
	require.NoError(t, err)
	firstSeen := time.Now()
	for _, wait := range []time.Duration{0, fastLease / 3, fastLease * 2 / 3} {
		time.Sleep(time.Until(firstSeen.Add(wait)))
		_, err := taker.Lock(t.Context(), "u1")
		require.ErrorIs(t, err, billing.ErrAlreadyLocked, "Lock %v after first seeing the lock", wait)
	}
	time.Sleep(time.Until(firstSeen.Add(fastLease + fastLease/5)))
	lease, err := taker.Lock(t.Context(), "u1")
	require.NoError(t, err, "Lock after the lease duration")
	select {
	case <-old.Lost():
	default:
		assert.Fail(t, "the lock was taken over before its old holder saw Lost")
	}
	assert.ErrorIs(t, old.Release(t.Context()), billing.ErrLeaseLost, "old Release")
	require.NoError(t, lease.Release(t.Context()))
}

func TestDynamoLockerClose(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	opts := []dynamostore.LockerOption{dynamostore.WithLockTable(table),
		dynamostore.WithLeaseDuration(testLease), dynamostore.WithHeartbeatPeriod(testHeartbeat)}
	l, err := dynamostore.NewLocker(client, opts...)
	require.NoError(t, err)
	held, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	released, err := l.Lock(t.Context(), "u2")
	require.NoError(t, err)
	require.NoError(t, released.Release(t.Context()))
	require.NoError(t, l.Close(t.Context()), "Close")
	assert.NoError(t, l.Close(t.Context()), "second Close")
	select {
	case <-held.Lost():
	default:
		assert.Fail(t, "Close did not close Lost of a held lease")
	}
	assert.ErrorIs(t, held.Release(t.Context()), billing.ErrLeaseLost, "Release after Close")
	assert.NoError(t, released.Release(t.Context()), "Release of a lease released before Close")
	_, err = l.Lock(t.Context(), "u3")
	if assert.Error(t, err, "Lock after Close, want a closed error") {
		assert.NotErrorIs(t, err, billing.ErrAlreadyLocked, "Lock after Close, want a closed error")
	}
	// Close gave the lock back: another locker takes it at once.
	other := newDynamoLocker(t, client, opts...)
	lease, err := other.Lock(t.Context(), "u1")
	require.NoError(t, err, "Lock of a user whose locker was closed")
	require.NoError(t, lease.Release(t.Context()))
}

// TestDynamoLockerHeartbeats checks that a lease heartbeats, and that
// heartbeats stop at Release.
func TestDynamoLockerHeartbeats(t *testing.T) {
	client := dynamotest.Client(t)
	table := newLockTable(t, client)
	w := dynamotest.Wrap(client)
	l := newDynamoLocker(t, w, dynamostore.WithLockTable(table),
		dynamostore.WithLeaseDuration(fastLease), dynamostore.WithHeartbeatPeriod(fastHeartbeat))
	lease, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	time.Sleep(5 * fastHeartbeat)
	assert.GreaterOrEqual(t, w.Calls("UpdateItem"), 2, "heartbeats (UpdateItem) in %v, want about 5", 5*fastHeartbeat)
	require.NoError(t, lease.Release(t.Context()))
	n := w.Calls("UpdateItem") // the release is one
	time.Sleep(3 * fastHeartbeat)
	assert.Equal(t, n, w.Calls("UpdateItem"), "heartbeats after Release, want none")
}

func TestNewDynamoLockerOptions(t *testing.T) {
	fake := &dynamodb.Client{} // never called
	for _, tc := range []struct {
		name string
		opts []dynamostore.LockerOption
		want string
	}{
		{"empty table", []dynamostore.LockerOption{dynamostore.WithLockTable("")}, "WithLockTable"},
		{"zero lease", []dynamostore.LockerOption{dynamostore.WithLeaseDuration(0)}, "WithLeaseDuration"},
		{"negative heartbeat", []dynamostore.LockerOption{dynamostore.WithHeartbeatPeriod(-time.Second)}, "WithHeartbeatPeriod"},
		{"heartbeat over half the lease", []dynamostore.LockerOption{dynamostore.WithLeaseDuration(time.Second), dynamostore.WithHeartbeatPeriod(600 * time.Millisecond)}, "WithHeartbeatPeriod"},
		{"nil clock", []dynamostore.LockerOption{dynamostore.WithLockClock(nil)}, "WithLockClock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := dynamostore.NewLocker(fake, tc.opts...)
			assert.ErrorContains(t, err, tc.want, "NewDynamoLocker = %v", l)
		})
	}
	_, err := dynamostore.NewLocker(nil)
	assert.Error(t, err, "NewDynamoLocker(nil) succeeded")
	l, err := dynamostore.NewLocker(fake, dynamostore.WithLockLogger(slog.New(slog.DiscardHandler)),
		dynamostore.WithLockOwner("me"), dynamostore.WithHeartbeatPeriod(0))
	require.NoError(t, err)
	require.NoError(t, l.Close(t.Context()))
}

func TestLockKey(t *testing.T) {
	assert.Equal(t, "subscription-billing:user_id:u-42", dynamostore.LockKey("u-42"), "LockKey")
}

func TestLockTableDefinition(t *testing.T) {
	in := dynamostore.LockTableDefinition("locks-x")
	assert.Equal(t, "locks-x", aws.ToString(in.TableName), "LockTableDefinition = %+v", in)
	assert.Equal(t, types.BillingModePayPerRequest, in.BillingMode, "LockTableDefinition = %+v", in)
	if assert.Len(t, in.KeySchema, 1, "LockTableDefinition = %+v", in) {
		assert.Equal(t, "PartitionKey", aws.ToString(in.KeySchema[0].AttributeName), "LockTableDefinition = %+v", in)
		assert.Equal(t, types.KeyTypeHash, in.KeySchema[0].KeyType, "LockTableDefinition = %+v", in)
	}
	if assert.Len(t, in.AttributeDefinitions, 1, "LockTableDefinition = %+v", in) {
		assert.Equal(t, types.ScalarAttributeTypeS, in.AttributeDefinitions[0].AttributeType, "LockTableDefinition = %+v", in)
	}
}
