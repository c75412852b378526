package dynamostore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// afterReadClient runs hook once, just before the first write call
// (BatchWriteItem or TransactWriteItems) that follows a BatchGetItem: the
// moment between AddAll's read of the stored records and its writes.
type afterReadClient struct {
	API
	mu   sync.Mutex
	read bool
	hook func()
}

func (c *afterReadClient) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := c.API.BatchGetItem(ctx, in, optFns...)
	c.mu.Lock()
	c.read = true
	c.mu.Unlock()
	return out, err
}

func (c *afterReadClient) fire() {
	c.mu.Lock()
	hook := c.hook
	if !c.read {
		hook = nil
	} else {
		c.hook = nil
	}
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
}

func (c *afterReadClient) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	c.fire()
	return c.API.BatchWriteItem(ctx, in, optFns...)
}

func (c *afterReadClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.fire()
	return c.API.TransactWriteItems(ctx, in, optFns...)
}

// TestDynamoAddAllAttemptMarkedAfterRead: a collector marks its attempt
// on a record (SetAttempt) after AddAll read the batch's stored records
// and before it writes. AddAll must not overwrite that record (its charge
// would never be recorded and the upgrade would be charged again): the
// stored item keeps its attempt and amount, the error names it, and the
// other records of the batch are written with their history rows.
func TestDynamoAddAllAttemptMarkedAfterRead(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, StatusIndexLegacy, 0)
	ctx := t.Context()
	target := testRecord("u-race", 0, billing.StatusScheduled)
	require.NoError(t, f.repo.Add(ctx, &target))
	completed := testRecord("u-race-done", 0, billing.StatusCompleted)
	require.NoError(t, f.repo.Add(ctx, &completed))

	upgrade := target.Clone()
	upgrade.Amount, upgrade.ReceiptTierName = billing.Cents(999), "Premium:v1"
	upgrade.LastRunDate = target.LastRunDate.Add(time.Hour)
	rewrite := completed.Clone()
	rewrite.Amount, rewrite.LastRunDate = billing.Cents(1299), completed.LastRunDate.Add(time.Hour)
	fresh := testRecord("u-race-new", 2, billing.StatusScheduled)

	marked := target.Clone()
	marked.LastAttempt = billing.Attempt{Number: 1, Key: billing.IdempotencyKey(target.SubscriptionID, 1), Amount: target.Amount,
		Tier: target.ReceiptTierName, Process: billing.ProcessInitial, Started: target.LastRunDate.Add(time.Minute)}
	hooked := &afterReadClient{API: f.w, hook: func() {
		require.NoError(t, f.repo.SetAttempt(ctx, &target, &marked), "the collector's SetAttempt")
	}}
	batcher, err := NewRepository(Config{Client: hooked, Tables: f.cfg.Tables, BatchBackoff: time.Millisecond, BatchMaxBackoff: 20 * time.Millisecond})
	require.NoError(t, err)

	_, err = batcher.AddAll(ctx, []billing.Period{upgrade, rewrite, fresh})
	require.Nil(t, hooked.hook, "the hook ran")
	var be *billing.BatchError
	require.ErrorAs(t, err, &be, "AddAll over a record marked in flight after its read")
	assert.Equal(t, []string{target.Key()}, be.Unwritten)
	assert.ErrorIs(t, err, billing.ErrConflict, "changed since it was read")

	got, err := f.repo.Get(ctx, target.UserID, target.BillingDate)
	require.NoError(t, err)
	assert.True(t, got.InFlight(), "the stored record keeps its attempt: %+v", got.LastAttempt)
	assert.Equal(t, marked.LastAttempt.Key, got.LastAttempt.Key)
	assert.Equal(t, target.Amount, got.Amount, "the stored record keeps its amount")
	assert.Equal(t, target.ReceiptTierName, got.ReceiptTierName)
	rows, err := f.hist.ListByUser(ctx, target.UserID)
	require.NoError(t, err)
	assert.Len(t, rows, 1, "no history row of the upgrade not written")

	for _, want := range []billing.Period{rewrite, fresh} {
		got, err := f.repo.Get(ctx, want.UserID, want.BillingDate)
		require.NoError(t, err)
		assert.Equal(t, want.Amount, got.Amount, "%s written", want.Key())
		assert.True(t, got.LastRunDate.Equal(want.LastRunDate), "%s written", want.Key())
		requireConsistent(t, f, want.UserID)
	}
}

// TestDynamoAddAllRecordChangedAfterRead: an attempt made and settled on a
// record between AddAll's read and its write fails the record's
// condition: it is not overwritten (its charge would be lost, found by the
// fault simulation) but named in the BatchError; the rest of the batch is
// written.
func TestDynamoAddAllRecordChangedAfterRead(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, StatusIndexLegacy, 0)
	ctx := t.Context()
	target := testRecord("u-settled", 0, billing.StatusScheduled)
	require.NoError(t, f.repo.Add(ctx, &target))
	upgrade := target.Clone()
	upgrade.Amount, upgrade.LastRunDate = billing.Cents(999), target.LastRunDate.Add(time.Hour)
	other := testRecord("u-settled-other", 1, billing.StatusScheduled)

	marked := target.Clone()
	marked.LastAttempt = billing.Attempt{Number: 1, Key: billing.IdempotencyKey(target.SubscriptionID, 1), Amount: target.Amount,
		Process: billing.ProcessInitial, Started: target.LastRunDate.Add(time.Minute)}
	settled := marked.Clone()
	settled.Attempt = 1
	hooked := &afterReadClient{API: f.w, hook: func() {
		require.NoError(t, f.repo.SetAttempt(ctx, &target, &marked))
		require.NoError(t, f.repo.SetAttempt(ctx, &marked, &settled))
	}}
	batcher, err := NewRepository(Config{Client: hooked, Tables: f.cfg.Tables})
	require.NoError(t, err)
	calls := f.w.Calls("TransactWriteItems")
	_, err = batcher.AddAll(ctx, []billing.Period{upgrade, other})
	require.Nil(t, hooked.hook, "the hook ran")
	// The record changed since AddAll read it (an attempt was made and
	// settled): it is not overwritten, the other record is written. Two
	// transactions: the one cancelled by the changed record, and the rest.
	var be *billing.BatchError
	require.ErrorAs(t, err, &be)
	require.ErrorIs(t, err, billing.ErrConflict)
	assert.Equal(t, []string{target.Key()}, be.Unwritten)
	assert.Equal(t, 2, f.w.Calls("TransactWriteItems")-calls, "TransactWriteItems calls of AddAll")
	got, err := f.repo.Get(ctx, target.UserID, target.BillingDate)
	require.NoError(t, err)
	assert.Equal(t, target.Amount, got.Amount, "the stored record is not replaced")
	assert.Equal(t, 1, got.Attempt)
	prim, hist := requireConsistent(t, f, target.UserID)
	assert.Equal(t, 1, prim)
	assert.Equal(t, 1, hist)
	requireConsistent(t, f, other.UserID)
}
