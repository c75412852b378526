package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dynamoFixture is a fresh pair of tables on the local server behind a
// counting, limit-checking, fault-injecting wrapper.
type dynamoFixture struct {
	repo *Repository
	hist *History
	w    *dynamotest.Wrapper
	cfg  Config
}

func newDynamoFixture(t *testing.T, mode StatusIndexMode, pageSize int, mut ...func(*Config)) *dynamoFixture {
	t.Helper()
	client := dynamotest.Client(t)
	tables := TableConfig{
		Subscriptions:   dynamotest.TableName(t, "billing-activity"),
		History:         dynamotest.TableName(t, "billing-activity-history"),
		StatusIndexMode: mode,
	}
	dynamotest.CreateTable(t, client, SubscriptionsTableDefinition(tables))
	dynamotest.CreateTable(t, client, HistoryTableDefinition(tables))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	cfg := Config{Client: w, Tables: tables, PageSize: pageSize, BatchBackoff: time.Millisecond, BatchMaxBackoff: 20 * time.Millisecond}
	for _, m := range mut {
		m(&cfg)
	}
	repo, err := NewRepository(cfg)
	require.NoError(t, err)
	hist, err := NewHistory(cfg)
	require.NoError(t, err)
	return &dynamoFixture{repo: repo, hist: hist, w: w, cfg: cfg}
}

func testRecord(user string, i int, st billing.Status) billing.Period {
	bd := time.Date(2024, 1, 31, 15, 0, 0, 0, time.UTC).AddDate(0, i, 0)
	return billing.Period{
		UserID: user, SubscriptionID: fmt.Sprintf("%s-sub-%03d", user, i), Status: st, Amount: billing.Cents(499),
		BillingDate: bd, BillingPeriod: billing.BillingPeriod(bd), Term: billing.TermMonthly, AnchorDay: 31,
		CreatedDate: bd.AddDate(0, -1, 0), LastRunDate: bd.AddDate(0, -1, 0).Add(time.Duration(i) * time.Millisecond),
	}
}

// requireConsistent checks the invariant that no primary record exists
// without its history row, and returns the number of primary records and
// history rows of the user.
func requireConsistent(t *testing.T, f *dynamoFixture, user string) (prim, hist int) {
	t.Helper()
	ctx := context.Background()
	recs, err := f.repo.ListByUser(ctx, user)
	require.NoError(t, err)
	rows, err := f.hist.ListByUser(ctx, user)
	require.NoError(t, err)
	byKey := map[string]billing.Period{}
	for _, r := range rows {
		byKey[r.SubscriptionID+"|"+layout.LastRunDateKey(&r)] = r
	}
	for _, r := range recs {
		h, ok := byKey[r.SubscriptionID+"|"+layout.LastRunDateKey(&r)]
		require.True(t, ok, "record %s (%s) has no history row for last_run_date %s", r.Key(), r.Status, layout.LastRunDateKey(&r))
		require.Equal(t, r.Status, h.Status, "history row of %s differs", r.Key())
		require.Equal(t, r.Amount, h.Amount, "history row of %s differs", r.Key())
		require.True(t, h.BillingDate.Equal(r.BillingDate), "history row of %s differs: %v/%v", r.Key(), h.BillingDate, r.BillingDate)
	}
	return len(recs), len(rows)
}

func TestDynamoAddAllSurvivesThrottling(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, StatusIndexLegacy, 0)
	var subs []billing.Period
	for i := range 60 {
		subs = append(subs, testRecord("u-batch", i, billing.StatusScheduled))
	}
	f.w.Throttle("BatchGetItem", 1)
	f.w.Throttle("TransactWriteItems", 2)
	written, err := f.repo.AddAll(t.Context(), subs)
	require.NoError(t, err)
	require.Len(t, written, 60, "written %d", len(written))
	prim, hist := requireConsistent(t, f, "u-batch")
	require.Equal(t, 60, prim, "primary %d history %d, want 60 each", prim, hist)
	require.Equal(t, 60, hist, "primary %d history %d, want 60 each", prim, hist)
	// 60 records and their history rows in transactions of 50 records:
	// 2 calls, plus 2 throttled ones.
	assert.Equal(t, 2+2, f.w.Calls("TransactWriteItems"), "TransactWriteItems calls")
	assert.Zero(t, f.w.Calls("BatchWriteItem"), "BatchWriteItem calls")
}

func TestDynamoAddAllNamesWhatWasNotWritten(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, StatusIndexLegacy, 0, func(c *Config) { c.BatchRetries = 2 })
	var subs []billing.Period
	for i := range 60 {
		subs = append(subs, testRecord("u-partial", i, billing.StatusScheduled))
	}
	// The first transaction's 3 attempts (BatchRetries 2) fail: its 50
	// records are given up on; the other transaction is written.
	for n := 1; n <= 3; n++ {
		f.w.FailNth("TransactWriteItems", n, nil)
	}
	_, err := f.repo.AddAll(t.Context(), subs)
	var be *billing.BatchError
	require.ErrorAs(t, err, &be)
	recs, _ := f.repo.ListByUser(t.Context(), "u-partial")
	rows, _ := f.hist.ListByUser(t.Context(), "u-partial")
	have := map[string]bool{}
	for _, r := range recs {
		have["p"+r.Key()] = true
	}
	for _, r := range rows {
		have["h"+r.Key()] = true
	}
	unwritten := map[string]bool{}
	for _, k := range be.Unwritten {
		unwritten[k] = true
	}
	assert.Len(t, unwritten, 50, "unwritten = %d records %v, want the 50 of the first transaction", len(unwritten), be.Unwritten)
	for _, s := range subs {
		complete := have["p"+s.Key()] && have["h"+s.Key()]
		assert.NotEqual(t, complete, unwritten[s.Key()], "%s: complete=%v but reported unwritten=%v", s.Key(), complete, unwritten[s.Key()])
	}
	// Retrying the batch completes it, every record once.
	f.w.ClearFaults()
	_, err = f.repo.AddAll(t.Context(), subs)
	require.NoError(t, err)
	prim, hist := requireConsistent(t, f, "u-partial")
	require.Equal(t, 60, prim, "after retry: primary %d history %d", prim, hist)
	require.Equal(t, 60, hist, "after retry: primary %d history %d", prim, hist)
}

// TestDynamoKthCallFails runs a sequence of writes where the k-th DynamoDB
// call fails (before or after reaching the server, or hangs), for every k,
// and checks after each that no record exists without its history row and
// that a retry of the failed step either succeeds or reports a conflict
// that a re-read explains.
func TestDynamoKthCallFails(t *testing.T) {
	t.Parallel()
	kinds := []string{"before", "after", "hang"}
	for _, kind := range kinds {
		for k := 1; k <= 8; k++ {
			t.Run(fmt.Sprintf("%s-%d", kind, k), func(t *testing.T) {
				t.Parallel()
				f := newDynamoFixture(t, StatusIndexLegacy, 0)
				user := fmt.Sprintf("u-k-%s-%d", kind, k)
				switch kind {
				case "before":
					f.w.FailNth(dynamotest.AnyOp, k, nil)
				case "after":
					f.w.FailAfterInner(dynamotest.AnyOp, k, nil)
				case "hang":
					f.w.Hang(dynamotest.AnyOp, k)
				}
				runSteps(t, f, user)
				requireConsistent(t, f, user)
			})
		}
	}
}

// runSteps: add, update to ACHSENT, update to COMPLETED, add the next
// period, admin-move it. Each step is retried once after a failure, the way
// a caller re-reads and tries again.
func runSteps(t *testing.T, f *dynamoFixture, user string) {
	ctx := context.Background()
	step := func(name string, fn func(ctx context.Context) error) {
		for attempt := range 2 {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := fn(sctx)
			cancel()
			if err == nil {
				return
			}
			if attempt == 1 {
				t.Fatalf("%s failed twice: %v", name, err)
			}
		}
	}
	first := testRecord(user, 0, billing.StatusScheduled)
	step("add", func(ctx context.Context) error {
		err := f.repo.Add(ctx, &first)
		if errors.Is(err, billing.ErrAlreadyExists) {
			return nil // the failed attempt was applied
		}
		return err
	})
	advance := func(to billing.Status) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			cur, err := f.repo.Get(ctx, user, first.BillingDate)
			if err != nil {
				return err
			}
			if cur.Status == to {
				return nil // applied by the attempt that reported failure
			}
			next := cur.Clone()
			next.Status = to
			next.LastRunDate = cur.LastRunDate.Add(time.Minute)
			return f.repo.Update(ctx, &cur, &next)
		}
	}
	step("achsent", advance(billing.StatusACHSent))
	step("completed", advance(billing.StatusCompleted))
	second := testRecord(user, 1, billing.StatusScheduled)
	step("add next", func(ctx context.Context) error {
		err := f.repo.Add(ctx, &second)
		if errors.Is(err, billing.ErrAlreadyExists) {
			return nil
		}
		return err
	})
	moved := second.BillingDate.AddDate(0, 0, 3)
	step("admin move", func(ctx context.Context) error {
		cur, err := f.repo.GetByID(ctx, second.SubscriptionID)
		if err != nil {
			return err
		}
		if cur.BillingDate.Equal(moved) {
			return nil
		}
		next := cur.Clone()
		next.BillingDate = moved
		next.LastRunDate = cur.LastRunDate.Add(time.Minute)
		return f.repo.AdminUpdate(ctx, &cur, &next)
	})
	recs, err := f.repo.ListByUser(ctx, user)
	require.NoError(t, err)
	require.Len(t, recs, 2, "final records: %+v", recs)
	require.Equal(t, billing.StatusCompleted, recs[0].Status, "final records: %+v", recs)
	require.True(t, recs[1].BillingDate.Equal(moved), "final records: %+v", recs)
}

func TestDynamoTransactionThrottledWritesNothing(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, StatusIndexLegacy, 0)
	rec := testRecord("u-throttle", 0, billing.StatusScheduled)
	f.w.Throttle("TransactWriteItems", 1)
	err := f.repo.Add(t.Context(), &rec)
	require.Error(t, err, "want a non-conflict failure")
	require.False(t, billing.IsConflict(err), "err = %v, want a non-conflict failure", err)
	prim, hist := requireConsistent(t, f, "u-throttle")
	require.Zero(t, prim, "throttled add wrote %d/%d", prim, hist)
	require.Zero(t, hist, "throttled add wrote %d/%d", prim, hist)
	require.NoError(t, f.repo.Add(t.Context(), &rec))
}
