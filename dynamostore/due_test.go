package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testShards = 4

// dueFixture is a table with the due index, in mode, and records of 12
// users written (with AddAll) by a repository with shards shards: per
// user a COMPLETED period, a SCHEDULED one due, a SCHEDULED one not due,
// and for every third user an ERROR and a PAUSED one. want lists the keys a query of
// each status before dueBefore returns.
func dueFixture(t *testing.T, mode StatusIndexMode, shards int) (f *dynamoFixture, want map[billing.Status][]string) {
	t.Helper()
	client := dynamotest.Client(t)
	tables := TableConfig{
		Subscriptions:   dynamotest.TableName(t, "billing-activity"),
		History:         dynamotest.TableName(t, "billing-activity-history"),
		StatusIndexMode: mode,
		DueShards:       testShards,
	}
	dynamotest.CreateTable(t, client, SubscriptionsTableDefinition(tables))
	dynamotest.CreateTable(t, client, HistoryTableDefinition(tables))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	tables.DueShards = shards
	cfg := Config{Client: w, Tables: tables, PageSize: 5}
	repo, err := NewRepository(cfg)
	require.NoError(t, err)
	hist, err := NewHistory(cfg)
	require.NoError(t, err)
	f = &dynamoFixture{repo: repo, hist: hist, w: w, cfg: cfg}
	want = map[billing.Status][]string{}
	for u := range 12 {
		user := fmt.Sprintf("due-user-%02d", u)
		recs := []billing.Period{testRecord(user, 0, billing.StatusCompleted), testRecord(user, 1, billing.StatusScheduled), testRecord(user, 5, billing.StatusScheduled)}
		if u%3 == 0 {
			recs = append(recs, testRecord(user, 2, billing.StatusError), testRecord(user, 3, billing.StatusPaused))
		}
		// Several open records a user, as an import writes them (Add
		// refuses a second one on the legacy tables).
		_, err := repo.AddAll(t.Context(), recs)
		require.NoError(t, err)
		for i := range recs {
			if recs[i].BillingDate.Before(dueBefore) {
				want[recs[i].Status] = append(want[recs[i].Status], recs[i].Key())
			}
		}
	}
	return f, want
}

// dueBefore bounds the test queries: the periods of index 0 to 3 of
// testRecord (January to April 2024) are before it, the one of index 5
// (June) is not.
var dueBefore = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// readAll pages q to its end and returns the keys it returned, the items it
// read and the pages. Every record returned is in q's status and shards.
func readAll(t *testing.T, repo billing.Repository, q billing.StatusQuery) (keys []string, scanned, pages int) {
	t.Helper()
	for {
		p, err := repo.QueryStatus(t.Context(), q)
		require.NoError(t, err)
		require.Empty(t, p.Invalid)
		pages++
		scanned += p.Scanned
		for _, s := range p.Items {
			require.Equal(t, q.Status, s.Status)
			if len(q.Shards) > 0 {
				require.Contains(t, q.Shards, layout.DueShard(s.UserID, repo.(billing.ShardedRepository).DueShards()), s.Key())
			}
			keys = append(keys, s.Key())
		}
		if q.Cursor = p.Next; q.Cursor == "" {
			return keys, scanned, pages
		}
	}
}

// TestDynamoDueIndexShards: in due mode the due index reads as
// dueIndexShards says.
func TestDynamoDueIndexShards(t *testing.T) {
	f, want := dueFixture(t, StatusIndexDue, testShards)
	dueIndexShards(t, f.w, f.repo, want)
}

// dueIndexShards checks a layout's repo reading the due index of
// testShards shards through w, with the due records of want (dueFixture
// or stDueFixture.seed): every shard's pages return exactly the due
// records of its users, reading nothing else (one item read per due
// item); the shards together return each due record once, as does a
// query of all shards; a run that finds nothing due costs one query per
// shard; statuses runs do not read are refused; a cursor continues only
// the shards and the range it was made for.
func dueIndexShards(t *testing.T, w *dynamotest.Wrapper, repo billing.ShardedRepository, want map[billing.Status][]string) {
	t.Helper()
	assert.Equal(t, testShards, repo.DueShards())
	for _, st := range []billing.Status{billing.StatusScheduled, billing.StatusError, billing.StatusPaused} {
		q := billing.StatusQuery{Status: st, Before: dueBefore}
		var union []string
		for s := range testShards {
			q.Shards = []int{s}
			keys, scanned, _ := readAll(t, repo, q)
			assert.Equal(t, len(keys), scanned, "%s shard %d reads only what it returns", st, s)
			union = append(union, keys...)
		}
		assert.ElementsMatch(t, want[st], union, "%s: the shards together return every due record once", st)
		q.Shards = nil
		w.Reset()
		all, scanned, _ := readAll(t, repo, q)
		assert.ElementsMatch(t, want[st], all, "%s: all shards", st)
		assert.Equal(t, len(all), scanned)
		assert.Equal(t, len(all), w.ItemsRead(), "%s: items read per due item is 1", st)
	}

	// Nothing due: one query per shard.
	w.Reset()
	keys, _, pages := readAll(t, repo, billing.StatusQuery{Status: billing.StatusScheduled, Before: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)})
	assert.Empty(t, keys)
	assert.Equal(t, testShards, pages)
	assert.Equal(t, testShards, w.TotalCalls())
	assert.Equal(t, testShards, w.Calls("Query"))

	ctx := t.Context()
	_, err := repo.QueryStatus(ctx, billing.StatusQuery{Status: billing.StatusCompleted, Before: dueBefore})
	require.ErrorIs(t, err, billing.ErrInvalidQuery, "a status runs do not read")
	_, err = repo.QueryStatus(ctx, billing.StatusQuery{Status: billing.StatusScheduled, Shards: []int{testShards}})
	require.ErrorIs(t, err, billing.ErrInvalidQuery)
	p, err := repo.QueryStatus(ctx, billing.StatusQuery{Status: billing.StatusScheduled, Before: dueBefore, Shards: []int{0, 1}, Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, p.Next)
	_, err = repo.QueryStatus(ctx, billing.StatusQuery{Status: billing.StatusScheduled, Before: dueBefore, Shards: []int{2, 3}, Cursor: p.Next})
	require.ErrorIs(t, err, billing.ErrInvalidCursor, "a cursor continues only the shards it was made for")
	_, err = repo.QueryStatus(ctx, billing.StatusQuery{Status: billing.StatusScheduled, Before: dueBefore.Add(time.Hour), Shards: []int{0, 1}, Cursor: p.Next})
	require.ErrorIs(t, err, billing.ErrInvalidCursor, "a cursor continues only the range it was made for")
}

// requireDueReads checks that reader, on the due index, returns every due
// record of want exactly once, reading nothing else.
func requireDueReads(t *testing.T, reader billing.Repository, want map[billing.Status][]string) {
	t.Helper()
	for _, st := range []billing.Status{billing.StatusScheduled, billing.StatusError, billing.StatusPaused} {
		keys, scanned, _ := readAll(t, reader, billing.StatusQuery{Status: st, Before: dueBefore})
		assert.ElementsMatch(t, want[st], keys, "%s: every collectable record exactly once", st)
		assert.Equal(t, len(keys), scanned)
	}
}

// TestDynamoDueKeyFollowsStatus: the due key is written with a due status,
// rewritten with a new one and removed when the record leaves them; a
// legacy-mode repository with one shard filters on nothing and returns
// the same records.
func TestDynamoDueKeyFollowsStatus(t *testing.T) {
	f, want := dueFixture(t, StatusIndexLegacy, testShards)
	ctx := t.Context()
	rec, err := f.repo.Get(ctx, "due-user-00", testRecord("due-user-00", 1, billing.StatusScheduled).BillingDate)
	require.NoError(t, err)
	item := f.rawItem(t, &rec)
	shard := layout.DueShard("due-user-00", testShards)
	assert.Equal(t, stringAV(layout.DueKey(billing.StatusScheduled, shard)), item[layout.AttrDue])

	declined := rec.Clone()
	declined.Status, declined.LastRunDate, declined.Attempt = billing.StatusError, rec.LastRunDate.Add(time.Hour), 1
	require.NoError(t, f.repo.Update(ctx, &rec, &declined))
	assert.Equal(t, stringAV(layout.DueKey(billing.StatusError, shard)), f.rawItem(t, &declined)[layout.AttrDue])

	stored, err := f.repo.Get(ctx, declined.UserID, declined.BillingDate)
	require.NoError(t, err)
	done := stored.Clone()
	done.Status, done.LastRunDate, done.Attempt = billing.StatusCompleted, declined.LastRunDate.Add(time.Hour), 2
	require.NoError(t, f.repo.Update(ctx, &stored, &done))
	assert.NotContains(t, f.rawItem(t, &done), layout.AttrDue, "a completed record leaves the due index")

	// Legacy mode reads the status index; shards filter it.
	var union []string
	for s := range testShards {
		keys, _, _ := readAll(t, f.repo, billing.StatusQuery{Status: billing.StatusPaused, Before: dueBefore, Shards: []int{s}})
		union = append(union, keys...)
	}
	assert.ElementsMatch(t, want[billing.StatusPaused], union)

	// Without shards the table is one shard.
	one := *f.repo
	one.cfg.Tables.DueShards = 0
	assert.Equal(t, 1, one.DueShards())
	_, err = one.QueryStatus(ctx, billing.StatusQuery{Status: billing.StatusPaused, Shards: []int{1}})
	require.ErrorIs(t, err, billing.ErrInvalidQuery)
	keys, _, _ := readAll(t, &one, billing.StatusQuery{Status: billing.StatusPaused, Before: dueBefore, Shards: []int{0}})
	assert.ElementsMatch(t, want[billing.StatusPaused], keys)
}

func (f *dynamoFixture) rawItem(t *testing.T, s *billing.Period) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.w.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: &f.cfg.Tables.Subscriptions, ConsistentRead: new(true),
		Key: map[string]types.AttributeValue{layout.AttrUserID: stringAV(s.UserID), layout.AttrBillingDate: stringAV(layout.BillingDateKey(s))},
	})
	require.NoError(t, err)
	require.NotNil(t, out.Item)
	return out.Item
}

// TestDynamoBackfillDue: records written before the table had due keys
// (and one with a stale key) are indexed by the backfill; a backfill
// killed midway (a failed write, then the process gone) and resumed from
// its last cursor by another instance finishes the job; a second pass
// writes nothing; afterwards the due index returns every collectable
// record exactly once and nothing else changed on any item.
func TestDynamoBackfillDue(t *testing.T) {
	f, want := dueFixture(t, StatusIndexLegacy, 0) // written without due keys
	ctx := t.Context()
	// A completed record with a stale key, and a scheduled one in the
	// wrong shard, as a change of DueShards would leave them.
	stale, err := f.repo.Get(ctx, "due-user-01", testRecord("due-user-01", 0, billing.StatusCompleted).BillingDate)
	require.NoError(t, err)
	f.setRaw(t, &stale, stringAV("SCHEDULED#3"))
	moved, err := f.repo.Get(ctx, "due-user-02", testRecord("due-user-02", 1, billing.StatusScheduled).BillingDate)
	require.NoError(t, err)
	f.setRaw(t, &moved, stringAV(layout.DueKey(billing.StatusScheduled, (layout.DueShard("due-user-02", testShards)+1)%testShards)))
	before := f.scanAll(t)

	cfg := f.cfg
	cfg.Tables.DueShards = testShards
	first, err := NewRepository(cfg)
	require.NoError(t, err)
	second, err := NewRepository(cfg) // another process resumes
	require.NoError(t, err)
	// Two SCHEDULED periods a user (one of them in the wrong shard), an
	// ERROR and a PAUSED one for 4 users, and the stale key removed.
	backfillKilledAndResumed(t, f.w, first, second, 12*2+4*2+1)

	after := f.scanAll(t)
	require.Equal(t, withoutDue(before), withoutDue(after), "only billing_due changed")
	requireDueKeysOf(t, after, testShards, func(map[string]types.AttributeValue) bool { return true })

	cfg.Tables.StatusIndexMode = StatusIndexDue
	reader, err := NewRepository(cfg)
	require.NoError(t, err)
	requireDueReads(t, reader, want)

	cfg.Tables.DueShards = 0
	none, err := NewRepository(Config{Client: f.w, Tables: TableConfig{Subscriptions: cfg.Tables.Subscriptions, History: cfg.Tables.History}})
	require.NoError(t, err)
	_, err = none.BackfillDue(ctx, "", 10)
	require.Error(t, err, "no shards, nothing to fill")
}

func (f *dynamoFixture) setRaw(t *testing.T, s *billing.Period, v types.AttributeValue) {
	t.Helper()
	item := f.rawItem(t, s)
	item[layout.AttrDue] = v
	_, err := f.w.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &f.cfg.Tables.Subscriptions, Item: item})
	require.NoError(t, err)
}

func (f *dynamoFixture) scanAll(t *testing.T) map[string]map[string]types.AttributeValue {
	t.Helper()
	out := map[string]map[string]types.AttributeValue{}
	in := &dynamodb.ScanInput{TableName: &f.cfg.Tables.Subscriptions, ConsistentRead: new(true)}
	for {
		page, err := f.w.Scan(t.Context(), in)
		require.NoError(t, err)
		for _, it := range page.Items {
			out[stringOf(it[layout.AttrUserID])+"|"+stringOf(it[layout.AttrBillingDate])] = it
		}
		if in.ExclusiveStartKey = page.LastEvaluatedKey; in.ExclusiveStartKey == nil {
			return out
		}
	}
}

// backfiller is a layout's BackfillDue.
type backfiller interface {
	BackfillDue(ctx context.Context, token string, limit int) (BackfillPage, error)
}

// backfillKilledAndResumed runs a backfill on first until a write fails
// on its second page (injected through w), resumes it to the end on
// second (another process), and checks that want items were written in
// all and that a second pass writes nothing.
func backfillKilledAndResumed(t *testing.T, w *dynamotest.Wrapper, first, second backfiller, want int) {
	t.Helper()
	ctx := t.Context()
	p, err := first.BackfillDue(ctx, "", 10)
	require.NoError(t, err)
	require.NotEmpty(t, p.Next)
	updated := p.Updated
	w.FailNth("UpdateItem", 2, errors.New("injected: connection reset"))
	p2, err := first.BackfillDue(ctx, p.Next, 10)
	require.Error(t, err)
	assert.Equal(t, p.Next, p2.Next, "a failed page is redone from its start")
	updated += p2.Updated
	w.ClearFaults()
	for tok := p2.Next; ; {
		p, err := second.BackfillDue(ctx, tok, 10)
		require.NoError(t, err)
		updated += p.Updated
		if tok = p.Next; tok == "" {
			break
		}
	}
	assert.Equal(t, want, updated, "every collectable record keyed once, the stale key removed")

	w.Reset()
	again := 0
	for tok := ""; ; {
		p, err := second.BackfillDue(ctx, tok, 7)
		require.NoError(t, err)
		again += p.Updated + p.Changed
		if tok = p.Next; tok == "" {
			break
		}
	}
	assert.Zero(t, again, "a second pass writes nothing")
	assert.Zero(t, w.Calls("UpdateItem"), "a second pass writes nothing")
}
