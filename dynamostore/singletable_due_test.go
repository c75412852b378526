package dynamostore

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stDueFixture is a single table with the due index of testShards shards
// and a repository on it writing with shards shards.
type stDueFixture struct {
	repo *SingleTableRepository
	w    *dynamotest.Wrapper
	cfg  SingleTableStoreConfig
}

func newSTDueFixture(t *testing.T, shards int) *stDueFixture {
	t.Helper()
	client := dynamotest.Client(t)
	table := SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL", DueShards: testShards}
	dynamotest.CreateTable(t, client, SingleTableDefinition(table))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	table.DueShards = shards
	cfg := SingleTableStoreConfig{Client: w, Table: table, PageSize: 5,
		Clock: billing.ClockFunc(func() time.Time { return time.Date(2024, 4, 15, 0, 0, 0, 0, time.UTC) })}
	repo, err := NewSingleTableRepository(cfg)
	require.NoError(t, err)
	return &stDueFixture{repo: repo, w: w, cfg: cfg}
}

// stDueUser is the engine user of the fixture's subscription u.
func stDueUser(u int) string {
	return layout.SubscriptionRef{AccountID: fmt.Sprintf("due-acct-%02d", u), SubscriptionID: "S1", SKU: "SKU9"}.UserID()
}

// stDueRecord is testRecord for subscription u, with an ID free of '#'.
func stDueRecord(u, i int, st billing.Status) billing.Period {
	r := testRecord(stDueUser(u), i, st)
	r.SubscriptionID = fmt.Sprintf("due-%02d-sub-%03d", u, i)
	return r
}

// seed adds, for 12 subscriptions, a COMPLETED period, a SCHEDULED one
// due, a SCHEDULED one not due, and for every third an ERROR and a
// PAUSED one, and returns the keys a query of each status before
// dueBefore returns.
func (f *stDueFixture) seed(t *testing.T) map[billing.Status][]string {
	t.Helper()
	want := map[billing.Status][]string{}
	for u := range 12 {
		recs := []billing.Period{stDueRecord(u, 0, billing.StatusCompleted), stDueRecord(u, 1, billing.StatusScheduled), stDueRecord(u, 5, billing.StatusScheduled)}
		if u%3 == 0 {
			recs = append(recs, stDueRecord(u, 2, billing.StatusError), stDueRecord(u, 3, billing.StatusPaused))
		}
		for i := range recs {
			require.NoError(t, f.repo.Add(t.Context(), &recs[i]))
			if recs[i].BillingDate.Before(dueBefore) {
				want[recs[i].Status] = append(want[recs[i].Status], recs[i].Key())
			}
		}
	}
	return want
}

// scanAll returns every item of the table by PK and SK.
func (f *stDueFixture) scanAll(t *testing.T) map[string]map[string]types.AttributeValue {
	t.Helper()
	out := map[string]map[string]types.AttributeValue{}
	in := &dynamodb.ScanInput{TableName: &f.cfg.Table.Table, ConsistentRead: new(true)}
	for {
		page, err := f.w.Scan(t.Context(), in)
		require.NoError(t, err)
		for _, it := range page.Items {
			out[stringOf(it[layout.AttrPK])+"|"+stringOf(it[layout.AttrSK])] = it
		}
		if in.ExclusiveStartKey = page.LastEvaluatedKey; in.ExclusiveStartKey == nil {
			return out
		}
	}
}

// setRaw writes attribute name of sub's period item directly.
func (f *stDueFixture) setRaw(t *testing.T, sub *billing.Period, name string, v types.AttributeValue) {
	t.Helper()
	ref, err := layout.EngineRef(sub)
	require.NoError(t, err)
	expr, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name(name), expression.Value(v))).Build()
	require.NoError(t, err)
	_, err = f.w.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName: &f.cfg.Table.Table, Key: f.repo.periodKey(ref, layout.BillingDateKey(sub)),
		UpdateExpression: expr.Update(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	require.NoError(t, err)
}

// requireDueKeys checks that every period item carries the due key its
// status and subscription call for (none outside the due statuses) and
// that no other item carries one.
func requireDueKeys(t *testing.T, items map[string]map[string]types.AttributeValue, shards int) {
	t.Helper()
	requireDueKeysOf(t, items, shards, func(it map[string]types.AttributeValue) bool {
		return stringOf(it[layout.PayEntity]) == layout.EntityPeriod
	})
}

// requireDueKeysOf checks that exactly the records among items (record
// tells them from other entities) in a status runs read carry the due key
// of their user's shard.
func requireDueKeysOf(t *testing.T, items map[string]map[string]types.AttributeValue, shards int, record func(map[string]types.AttributeValue) bool) {
	t.Helper()
	for k, it := range items {
		st := billing.Status(stringOf(it[layout.AttrBillingStatus]))
		if !record(it) || !layout.DueStatus(st) {
			assert.NotContains(t, it, layout.AttrDue, "%s (%s %s) carries a due key", k, stringOf(it[layout.PayEntity]), st)
			continue
		}
		want := layout.DueKey(st, layout.DueShard(stringOf(it[layout.AttrUserID]), shards))
		assert.Equal(t, stringAV(want), it[layout.AttrDue], k)
	}
}

// withoutDue is items with billing_due removed from each.
func withoutDue(items map[string]map[string]types.AttributeValue) map[string]map[string]types.AttributeValue {
	out := map[string]map[string]types.AttributeValue{}
	for k, it := range items {
		it = maps.Clone(it)
		delete(it, layout.AttrDue)
		out[k] = it
	}
	return out
}

// TestSingleTableDueKeyFollowsStatus runs every write path of a period
// (Add, Update with creates, SetAttempt, AdminUpdate in place and as a
// move, AddAll) on a table written without due shards and on one written
// with them: afterwards the two tables hold the same bytes except
// billing_due, which only the period items in a due status carry, with
// the key of their status and shard. A stale key (another shard, or a
// status the period left) is rewritten by the next update, and an
// attribute the library does not know keeps its bytes.
func TestSingleTableDueKeyFollowsStatus(t *testing.T) {
	plain, sharded := newSTDueFixture(t, 0), newSTDueFixture(t, testShards)
	ctx := t.Context()
	for _, f := range []*stDueFixture{plain, sharded} {
		r := stDueRecord(0, 1, billing.StatusScheduled)
		require.NoError(t, f.repo.Add(ctx, &r))
		f.setRaw(t, &r, "x_custom", &types.AttributeValueMemberN{Value: "007"})
		if f == sharded {
			requireDueKeys(t, f.scanAll(t), testShards)
		}
		// Declined, with the next period created.
		declined := r.Clone()
		declined.Status, declined.LastRunDate, declined.Attempt = billing.StatusError, r.LastRunDate.Add(time.Hour), 1
		next := stDueRecord(0, 2, billing.StatusScheduled)
		require.NoError(t, f.repo.Update(ctx, &r, &declined, &next))
		// An attempt in flight, then its outcome.
		got, err := f.repo.Get(ctx, declined.UserID, declined.BillingDate)
		require.NoError(t, err)
		trying := got.Clone()
		trying.LastAttempt = billing.Attempt{Number: got.Attempt + 1, Key: billing.IdempotencyKey(got.SubscriptionID, got.Attempt+1), Amount: got.Amount,
			Process: billing.ProcessInitial, Started: got.LastRunDate.Add(time.Minute)}
		require.NoError(t, f.repo.SetAttempt(ctx, &got, &trying))
		got, err = f.repo.Get(ctx, declined.UserID, declined.BillingDate)
		require.NoError(t, err)
		done := got.Clone()
		done.Status, done.LastRunDate, done.CompletionDate, done.TransactionID = billing.StatusCompleted, got.LastRunDate.Add(time.Hour), got.LastRunDate.Add(time.Hour), "tx-1"
		done.Attempt = got.LastAttempt.Number
		require.NoError(t, f.repo.Update(ctx, &got, &done))
		// A stale key on the next period: another shard's, then a pause
		// in place rewrites it; a move keeps the status and its key.
		f.setRaw(t, &next, layout.AttrDue, stringAV("SCHEDULED#99"))
		got, err = f.repo.Get(ctx, next.UserID, next.BillingDate)
		require.NoError(t, err)
		paused := got.Clone()
		paused.Status, paused.LastRunDate = billing.StatusPaused, got.LastRunDate.Add(time.Hour)
		require.NoError(t, f.repo.AdminUpdate(ctx, &got, &paused))
		moved := paused.Clone()
		moved.BillingDate, moved.LastRunDate = paused.BillingDate.AddDate(0, 0, 3), paused.LastRunDate.Add(time.Hour)
		require.NoError(t, f.repo.AdminUpdate(ctx, &paused, &moved))
		// A cancelled period with a stale key loses it.
		c := stDueRecord(1, 1, billing.StatusScheduled)
		require.NoError(t, f.repo.Add(ctx, &c))
		f.setRaw(t, &c, layout.AttrDue, stringAV("SCHEDULED#1"))
		cancelled := c.Clone()
		cancelled.Status, cancelled.LastRunDate = billing.StatusCancelled, c.LastRunDate.Add(time.Hour)
		require.NoError(t, f.repo.Update(ctx, &c, &cancelled))
		// An import.
		_, err = f.repo.AddAll(ctx, []billing.Period{stDueRecord(2, 1, billing.StatusScheduled), stDueRecord(2, 2, billing.StatusCompleted), stDueRecord(3, 1, billing.StatusError)})
		require.NoError(t, err)
	}
	a, b := plain.scanAll(t), sharded.scanAll(t)
	require.Equal(t, withoutDue(a), withoutDue(b), "the same writes with and without due shards differ in more than billing_due")
	for k, it := range a {
		assert.NotContains(t, it, layout.AttrDue, "%s: written without due shards, the stale keys removed or moved away from", k)
	}
	requireDueKeys(t, b, testShards)
	var custom int
	for _, it := range b {
		if v, ok := it["x_custom"]; ok && stringOf(it[layout.PayEntity]) == layout.EntityPeriod {
			custom++
			assert.Equal(t, &types.AttributeValueMemberN{Value: "007"}, v)
		}
	}
	assert.Equal(t, 1, custom, "the unknown attribute stays on its period")
}

// TestSingleTableDueIndexShards: with due shards the due index reads as
// dueIndexShards says; DueIndexPending keeps the walk.
func TestSingleTableDueIndexShards(t *testing.T) {
	f := newSTDueFixture(t, testShards)
	want := f.seed(t)
	dueIndexShards(t, f.w, f.repo, want)

	// Pending: the keys are written, the walk is read.
	cfg := f.cfg
	cfg.DueIndexPending = true
	walk, err := NewSingleTableRepository(cfg)
	require.NoError(t, err)
	assert.Equal(t, 1, walk.DueShards())
	f.w.Reset()
	keys, _, _ := readAll(t, walk, billing.StatusQuery{Status: billing.StatusScheduled, Before: dueBefore, Since: dueBefore.AddDate(0, -4, 0)})
	assert.ElementsMatch(t, want[billing.StatusScheduled], keys, "the walk finds the same periods")
	assert.Greater(t, f.w.Calls("Query"), testShards, "the walk reads the payment index")
}

// TestSingleTableBackfillDue: periods written before the table had due
// keys (and two with stale keys) are indexed by the backfill; a backfill
// killed midway (a failed write, then the process gone) and resumed from
// its last cursor by another instance finishes the job; a second pass
// writes nothing; afterwards the due index returns every collectable
// period exactly once, and no attribute but billing_due changed on any
// item, of any entity.
func TestSingleTableBackfillDue(t *testing.T) {
	f := newSTDueFixture(t, 0) // written without due keys
	want := f.seed(t)
	ctx := t.Context()
	stale := stDueRecord(1, 0, billing.StatusCompleted)
	f.setRaw(t, &stale, layout.AttrDue, stringAV("SCHEDULED#3"))
	moved := stDueRecord(2, 1, billing.StatusScheduled)
	f.setRaw(t, &moved, layout.AttrDue, stringAV(layout.DueKey(billing.StatusScheduled, (layout.DueShard(moved.UserID, testShards)+1)%testShards)))
	before := f.scanAll(t)

	cfg := f.cfg
	cfg.Table.DueShards = testShards
	first, err := NewSingleTableRepository(cfg)
	require.NoError(t, err)
	second, err := NewSingleTableRepository(cfg) // another process resumes
	require.NoError(t, err)
	// Two SCHEDULED periods a subscription (one of them in the wrong
	// shard), an ERROR and a PAUSED one for 4, and the stale key removed.
	backfillKilledAndResumed(t, f.w, first, second, 12*2+4*2+1)

	after := f.scanAll(t)
	require.Equal(t, withoutDue(before), withoutDue(after), "only billing_due changed")
	requireDueKeys(t, after, testShards)

	requireDueReads(t, second, want)
	_, err = f.repo.BackfillDue(ctx, "", 10)
	require.Error(t, err, "no shards, nothing to fill")
	_, err = second.BackfillDue(ctx, "not a cursor", 10)
	require.ErrorIs(t, err, billing.ErrInvalidCursor)
}
