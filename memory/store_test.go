package memory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// rawSuite gives the suites stores they can write raw items into.
var rawSuite = billingtest.SuiteOptions{RawStores: func(t *testing.T) (billing.Repository, billing.History, billingtest.PutRawFunc) {
	s := billingtest.NewMemoryStore(t, memory.Options{})
	return s.Repository(), s.History(), func(_ context.Context, table string, item map[string]av.AttributeValue) error {
		return s.PutRawItem(table, item)
	}
}}

func TestRepositorySuite(t *testing.T) {
	billingtest.TestRepositoryWith(t, func(t *testing.T, opts memory.Options) (billing.Repository, billing.History) {
		s := billingtest.NewMemoryStore(t, opts)
		return s.Repository(), s.History()
	}, rawSuite)
}

func TestHistorySuite(t *testing.T) {
	billingtest.TestHistoryWith(t, func(t *testing.T) billing.History {
		return billingtest.NewMemoryStore(t, memory.Options{}).History()
	}, rawSuite)
}

var due = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

func rec(user string, n int, billingDate time.Time, st billing.Status) billing.Period {
	return billing.Period{
		UserID:         user,
		BillingDate:    billingDate,
		SubscriptionID: fmt.Sprintf("sub-%s-%d", user, n),
		Amount:         billing.Cents(499),
		Status:         st,
		LastRunDate:    time.Date(2024, 1, 1, 0, 0, n, 0, time.UTC),
	}
}

func mustAdd(t *testing.T, r billing.Repository, subs ...billing.Period) {
	t.Helper()
	for i := range subs {
		require.NoError(t, r.Add(t.Context(), &subs[i]))
	}
}

func TestStoreInvalidItemsReported(t *testing.T) {
	for _, mode := range []dynamostore.StatusIndexMode{dynamostore.StatusIndexLegacy, dynamostore.StatusIndexSorted} {
		t.Run(mode.String(), func(t *testing.T) {
			var logs bytes.Buffer
			s := billingtest.NewMemoryStore(t, memory.Options{PageSize: 2, StatusIndexMode: mode, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			repo := s.Repository()
			for i := range 5 { // one open record a user (Add refuses a second)
				mustAdd(t, repo, rec(fmt.Sprint("u", i+1), i, due.AddDate(0, 0, -10+i), billing.StatusScheduled))
			}
			bad := func(date, amount string) map[string]av.AttributeValue {
				return map[string]av.AttributeValue{
					layout.AttrUserID:         &av.AttributeValueMemberS{Value: "u0"},
					layout.AttrBillingDate:    &av.AttributeValueMemberS{Value: date},
					layout.AttrSubscriptionID: &av.AttributeValueMemberS{Value: "bad-" + date},
					layout.AttrBillingStatus:  &av.AttributeValueMemberS{Value: string(billing.StatusScheduled)},
					layout.AttrBillingAmount:  &av.AttributeValueMemberS{Value: amount},
				}
			}
			require.NoError(t, s.PutRawItem(memory.SubscriptionsTable, bad("2024-05-20T00:00:00Z", "4.999")))
			// Out of range: read in legacy mode, but filtered out, not reported.
			require.NoError(t, s.PutRawItem(memory.SubscriptionsTable, bad("2024-07-01T00:00:00Z", "x")))
			var items []billing.Period
			var invalid []error
			scanned, pages, cur := 0, 0, ""
			for {
				p, err := repo.QueryStatus(t.Context(), billing.StatusQuery{Status: billing.StatusScheduled, Before: due, Cursor: cur})
				require.NoError(t, err)
				if p.Count != len(p.Items)+len(p.Invalid) {
					t.Fatalf("Count %d with %d items and %d invalid", p.Count, len(p.Items), len(p.Invalid))
				}
				pages++
				scanned += p.Scanned
				items = append(items, p.Items...)
				invalid = append(invalid, p.Invalid...)
				if cur = p.Next; cur == "" {
					break
				}
			}
			if len(items) != 5 || len(invalid) != 1 {
				t.Fatalf("%d items and %d invalid over %d pages, want 5 and 1", len(items), len(invalid), pages)
			}
			var fe *billing.FieldError
			if !errors.As(invalid[0], &fe) || fe.Field != layout.AttrBillingAmount || !errors.Is(fe, billing.ErrInvalidItem) || !strings.Contains(fe.Key, "u0") {
				t.Fatalf("invalid item reported as %v, want a FieldError naming billing_amount and the key", invalid[0])
			}
			wantScanned := 6
			if mode == dynamostore.StatusIndexLegacy {
				wantScanned = 7
			}
			require.Equal(t, wantScanned, scanned, "Scanned %d over all pages, want %d", scanned, wantScanned)

			// A per-user read skips both, logs them with their keys and
			// reports them.
			var reported []error
			ctx := billing.WithInvalidItems(t.Context(), func(_ context.Context, err error) { reported = append(reported, err) })
			recs, err := repo.ListByUser(ctx, "u0")
			require.NoError(t, err, "ListByUser over undecodable items")
			require.Empty(t, recs, "ListByUser over undecodable items")
			require.Len(t, reported, 2, "items reported by ListByUser")
			for _, err := range reported {
				require.ErrorIs(t, err, billing.ErrInvalidItem)
			}
			require.Contains(t, logs.String(), "level=WARN msg=\"billing: skipping undecodable item\"")
			require.Contains(t, logs.String(), "user_id=u0 billing_date=2024-05-20T00:00:00Z", "the log names the item's key")
			require.Contains(t, logs.String(), "user_id=u0 billing_date=2024-07-01T00:00:00Z", "the log names the item's key")
		})
	}
}

func TestStoreLastPageExactlyFull(t *testing.T) {
	// DynamoDB returns a LastEvaluatedKey whenever Limit items were read.
	s := billingtest.NewMemoryStore(t, memory.Options{PageSize: 3, StatusIndexMode: dynamostore.StatusIndexSorted})
	for i := range 3 { // one open record a user (Add refuses a second)
		mustAdd(t, s.Repository(), rec(fmt.Sprint("u", i+1), i, due.AddDate(0, 0, -i-1), billing.StatusScheduled))
	}
	p, err := s.Repository().QueryStatus(t.Context(), billing.StatusQuery{Status: billing.StatusScheduled, Before: due, Cursor: ""})
	if err != nil || len(p.Items) != 3 || p.Next == "" {
		t.Fatalf("full page = %d items, next %q, %v; want 3 and a cursor", len(p.Items), p.Next, err)
	}
	p2, err := s.Repository().QueryStatus(t.Context(), billing.StatusQuery{Status: billing.StatusScheduled, Before: due, Cursor: p.Next})
	if err != nil || len(p2.Items) != 0 || p2.Scanned != 0 || p2.Next != "" {
		t.Fatalf("page after the full one = %+v, %v; want empty and last", p2, err)
	}
}

func TestStoreLegacyPageOfFilteredItems(t *testing.T) {
	s := billingtest.NewMemoryStore(t, memory.Options{PageSize: 2})
	mustAdd(t, s.Repository(),
		rec("a", 1, due.AddDate(0, 0, 5), billing.StatusScheduled),
		rec("b", 2, due.AddDate(0, 0, 6), billing.StatusScheduled),
		rec("c", 3, due.AddDate(0, 0, -1), billing.StatusScheduled),
	)
	p, err := s.Repository().QueryStatus(t.Context(), billing.StatusQuery{Status: billing.StatusScheduled, Before: due, Cursor: ""})
	if err != nil || len(p.Items) != 0 || p.Scanned != 2 || p.Count != 0 || p.Next == "" {
		t.Fatalf("first legacy page = %+v, %v; want nothing due among 2 read, and a cursor", p, err)
	}
	p2, err := s.Repository().QueryStatus(t.Context(), billing.StatusQuery{Status: billing.StatusScheduled, Before: due, Cursor: p.Next})
	if err != nil || len(p2.Items) != 1 || p2.Items[0].UserID != "c" || p2.Next != "" {
		t.Fatalf("second legacy page = %+v, %v; want user c's record", p2, err)
	}
}

func TestStoreReturnsCopies(t *testing.T) {
	s := billingtest.NewMemoryStore(t, memory.Options{})
	r := rec("u1", 1, due, billing.StatusScheduled)
	layout.SetExtraAttributes(&r, map[string]av.AttributeValue{"x_note": &av.AttributeValueMemberS{Value: "orig"}})
	layout.SetDataAttributes(&r, map[string]av.AttributeValue{"data_l": &av.AttributeValueMemberL{Value: []av.AttributeValue{&av.AttributeValueMemberS{Value: "orig"}}}})
	mustAdd(t, s.Repository(), r)
	// Changing the input after Add changes nothing stored.
	layout.ExtraAttributes(&r)["x_note"].(*av.AttributeValueMemberS).Value = "input changed"
	layout.DataAttributes(&r)["data_l"].(*av.AttributeValueMemberL).Value[0] = &av.AttributeValueMemberS{Value: "input changed"}

	mutate := func(sub billing.Period) {
		sub.Status = billing.StatusError
		if v, ok := layout.ExtraAttributes(&sub)["x_note"].(*av.AttributeValueMemberS); ok {
			v.Value = "mutated"
		}
		if l, ok := layout.DataAttributes(&sub)["data_l"].(*av.AttributeValueMemberL); ok {
			l.Value[0].(*av.AttributeValueMemberS).Value = "mutated"
		}
		layout.ExtraAttributes(&sub)["added"] = &av.AttributeValueMemberS{Value: "x"}
	}
	got, err := s.Repository().Get(t.Context(), "u1", due)
	require.NoError(t, err)
	mutate(got)
	list, _ := s.Repository().ListByUser(t.Context(), "u1")
	mutate(list[0])
	byID, _ := s.Repository().GetByID(t.Context(), r.SubscriptionID)
	mutate(byID)
	rows, _ := s.History().ListByUser(t.Context(), "u1")
	mutate(rows[0])

	again, err := s.Repository().Get(t.Context(), "u1", due)
	require.NoError(t, err)
	if v := layout.ExtraAttributes(&again)["x_note"].(*av.AttributeValueMemberS).Value; v != "orig" || again.Status != billing.StatusScheduled || len(layout.ExtraAttributes(&again)) != 1 {
		t.Fatalf("stored record changed through a returned copy: status %s, Extra %v", again.Status, layout.ExtraAttributes(&again))
	}
	hrows, _ := s.History().ListBySubscription(t.Context(), r.SubscriptionID)
	if v := layout.DataAttributes(&hrows[0])["data_l"].(*av.AttributeValueMemberL).Value[0].(*av.AttributeValueMemberS).Value; v != "orig" {
		t.Fatalf("stored history row changed through a copy: data_l[0] = %q", v)
	}
}

func TestStoreItemsAndPutRawItem(t *testing.T) {
	s := billingtest.NewMemoryStore(t, memory.Options{})
	mustAdd(t, s.Repository(), rec("u1", 1, due, billing.StatusCompleted), rec("u1", 2, due.AddDate(0, 1, 0), billing.StatusScheduled))
	if n, h := s.Items(memory.SubscriptionsTable), s.Items(memory.HistoryTable); n != 2 || h != 2 {
		t.Fatalf("Items = %d, %d; want 2, 2", n, h)
	}
	if err := s.PutRawItem(memory.HistoryTable, map[string]av.AttributeValue{
		layout.AttrUserID: &av.AttributeValueMemberS{Value: "u1"},
	}); err == nil {
		t.Fatal("PutRawItem without last_run_date succeeded")
	}
	if h := s.Items(memory.HistoryTable); h != 2 {
		t.Fatalf("history has %d items after a rejected PutRawItem", h)
	}
	defer func() {
		if recover() == nil {
			t.Error("Items of an unknown table did not panic")
		}
	}()
	s.Items("nope")
}

// indexStatuses are the statuses the index tests write.
var indexStatuses = []billing.Status{billing.StatusScheduled, billing.StatusError, billing.StatusCompleted, billing.StatusPaused, billing.StatusStale}

// listAll returns every record of users, by user then billing date.
func listAll(t *testing.T, repo billing.Repository, users []string) []billing.Period {
	t.Helper()
	var out []billing.Period
	for _, u := range users {
		recs, err := repo.ListByUser(t.Context(), u)
		require.NoError(t, err)
		out = append(out, recs...)
	}
	return out
}

// randomWrite makes one random write among users' records: an add, an
// update, a move, an attempt, an overwriting batch or a raw put. Writes
// that lose a condition are fine.
func randomWrite(t *testing.T, s *memory.Store, rng *rand.Rand, users []string, i int, run func() time.Time) {
	t.Helper()
	repo, ctx := s.Repository(), t.Context()
	recs := listAll(t, repo, users)
	switch op := rng.IntN(6); {
	case op == 0 || len(recs) == 0:
		r := rec(users[rng.IntN(len(users))], i, due.AddDate(0, 0, rng.IntN(60)-30), indexStatuses[rng.IntN(len(indexStatuses))])
		r.LastRunDate = run()
		_ = repo.Add(ctx, &r) // a taken key is a conflict: fine
	case op == 1:
		cur := recs[rng.IntN(len(recs))]
		upd := cur.Clone()
		upd.Status, upd.LastRunDate = indexStatuses[rng.IntN(len(indexStatuses))], run()
		if billing.CheckTransition(&cur, &upd) == nil {
			err := repo.Update(ctx, &cur, &upd)
			require.True(t, err == nil || billing.IsConflict(err), "%v", err)
		}
	case op == 2:
		cur := recs[rng.IntN(len(recs))]
		moved := cur.Clone()
		moved.BillingDate, moved.LastRunDate = cur.BillingDate.AddDate(0, 0, rng.IntN(9)-4).Add(time.Hour), run()
		err := repo.AdminUpdate(ctx, &cur, &moved)
		require.True(t, err == nil || billing.IsConflict(err) || errors.Is(err, billing.ErrIllegalTransition), "%v", err)
	case op == 3:
		cur := recs[rng.IntN(len(recs))]
		marked := cur.Clone()
		marked.LastAttempt = billing.Attempt{Number: cur.Attempt + 1, Key: "k", Amount: cur.Amount, Started: run()}
		if !cur.InFlight() {
			err := repo.SetAttempt(ctx, &cur, &marked)
			require.True(t, err == nil || billing.IsConflict(err), "%v", err)
		}
	case op == 4:
		// An overwriting batch: the same keys, other statuses and IDs.
		batch := []billing.Period{recs[rng.IntN(len(recs))].Clone()}
		batch[0].Status, batch[0].SubscriptionID, batch[0].LastRunDate = indexStatuses[rng.IntN(len(indexStatuses))], fmt.Sprint("batch-", users[0], i), run()
		batch[0].LastAttempt, batch[0].Attempt = billing.Attempt{}, 0
		_, err := repo.AddAll(ctx, batch)
		// A concurrent writer may have written the record after run():
		// the batch's copy is then older than it, and refused.
		require.True(t, err == nil || errors.Is(err, billing.ErrAttemptInFlight) || errors.Is(err, billing.ErrConflict), "%v", err)
	default:
		cur := recs[rng.IntN(len(recs))]
		require.NoError(t, s.PutRawItem(memory.SubscriptionsTable, map[string]av.AttributeValue{
			layout.AttrUserID:         &av.AttributeValueMemberS{Value: cur.UserID},
			layout.AttrBillingDate:    &av.AttributeValueMemberS{Value: layout.BillingDateKey(&cur)},
			layout.AttrSubscriptionID: &av.AttributeValueMemberS{Value: fmt.Sprint("raw-", users[0], i)},
			layout.AttrBillingStatus:  &av.AttributeValueMemberS{Value: string(indexStatuses[rng.IntN(len(indexStatuses))])},
			layout.AttrBillingAmount:  &av.AttributeValueMemberS{Value: "1.00"},
		}))
	}
}

// requireIndexesMatchScans checks every status query, GetByID and
// ListBySubscription against scans of users' records and history rows.
func requireIndexesMatchScans(t *testing.T, s *memory.Store, mode dynamostore.StatusIndexMode, users []string) {
	t.Helper()
	users = slices.Sorted(slices.Values(users)) // the legacy index's order
	repo, ctx := s.Repository(), t.Context()
	recs := listAll(t, repo, users)
	require.Equal(t, len(recs), s.Items(memory.SubscriptionsTable))
	for _, st := range indexStatuses {
		for _, q := range []billing.StatusQuery{
			{Status: st},
			{Status: st, Before: due},
			{Status: st, Since: due.AddDate(0, 0, -5)},
			{Status: st, After: due.AddDate(0, 0, -10), Before: due.AddDate(0, 0, 10)},
		} {
			var want []billing.Period
			for _, r := range recs {
				if r.Status == st && q.Matches(r.BillingDate) {
					want = append(want, r)
				}
			}
			if mode == dynamostore.StatusIndexSorted {
				slices.SortStableFunc(want, func(a, b billing.Period) int {
					return strings.Compare(layout.BillingDateKey(&a), layout.BillingDateKey(&b))
				})
			}
			var got []billing.Period
			for cur := ""; ; {
				q.Cursor = cur
				p, err := repo.QueryStatus(ctx, q)
				require.NoError(t, err)
				require.LessOrEqual(t, p.Scanned, 3)
				got = append(got, p.Items...)
				if cur = p.Next; cur == "" {
					break
				}
			}
			require.Equal(t, want, got, "query %+v", q)
		}
	}
	for _, r := range recs {
		var want *billing.Period
		for i := range recs {
			if recs[i].SubscriptionID == r.SubscriptionID {
				want = &recs[i]
				break
			}
		}
		got, err := repo.GetByID(ctx, r.SubscriptionID)
		require.NoError(t, err)
		require.Equal(t, *want, got)
	}
	var rows []billing.Period
	for _, u := range users {
		hs, err := s.History().ListByUser(ctx, u)
		require.NoError(t, err)
		rows = append(rows, hs...)
	}
	require.Equal(t, len(rows), s.Items(memory.HistoryTable))
	for _, r := range rows[:min(len(rows), 40)] {
		var want []billing.Period
		for _, h := range rows {
			if h.SubscriptionID == r.SubscriptionID {
				want = append(want, h)
			}
		}
		slices.SortStableFunc(want, func(a, b billing.Period) int {
			return strings.Compare(layout.LastRunDateKey(&a), layout.LastRunDateKey(&b))
		})
		got, err := s.History().ListBySubscription(ctx, r.SubscriptionID)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// TestStoreIndexesFollowWrites: after random adds, updates, moves,
// attempts, overwriting batches and raw puts, every status query pages
// through exactly the records a scan of the users' records finds, in the
// index's order, and lookups by subscription ID find what a scan finds:
// the indexes follow every write.
func TestStoreIndexesFollowWrites(t *testing.T) {
	for _, mode := range []dynamostore.StatusIndexMode{dynamostore.StatusIndexLegacy, dynamostore.StatusIndexSorted} {
		t.Run(mode.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(mode)))
			s := billingtest.NewMemoryStore(t, memory.Options{PageSize: 3, StatusIndexMode: mode})
			users := make([]string, 12)
			for i := range users {
				users[i] = fmt.Sprintf("u%02d", i)
			}
			run := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			next := func() time.Time { run = run.Add(time.Second); return run }
			for i := range 400 {
				randomWrite(t, s, rng, users, i, next)
			}
			requireIndexesMatchScans(t, s, mode, users)
		})
	}
}

// TestStoreConcurrentWrites: writers of their own users and of shared
// ones, and readers of pages and lookups across users, at once (run with
// -race): every write is atomic for the indexes, so they match scans
// afterwards.
func TestStoreConcurrentWrites(t *testing.T) {
	for _, mode := range []dynamostore.StatusIndexMode{dynamostore.StatusIndexLegacy, dynamostore.StatusIndexSorted} {
		t.Run(mode.String(), func(t *testing.T) {
			s := billingtest.NewMemoryStore(t, memory.Options{PageSize: 3, StatusIndexMode: mode})
			var all []string
			var wg sync.WaitGroup
			var clock atomic.Int64
			run := func() time.Time {
				return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(clock.Add(1)) * time.Millisecond)
			}
			for w := range 6 {
				users := []string{fmt.Sprintf("w%d-a", w), fmt.Sprintf("w%d-b", w), "shared"}
				all = append(all, users[:2]...)
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 9))
					for i := range 150 {
						randomWrite(t, s, rng, users, i, run)
					}
				})
			}
			all = append(all, "shared")
			for range 2 {
				wg.Go(func() {
					for range 40 {
						for _, st := range indexStatuses {
							for cur := ""; ; {
								p, err := s.Repository().QueryStatus(t.Context(), billing.StatusQuery{Status: st, Cursor: cur})
								require.NoError(t, err)
								for _, r := range p.Items {
									_, _ = s.Repository().GetByID(t.Context(), r.SubscriptionID)
								}
								if cur = p.Next; cur == "" {
									break
								}
							}
						}
					}
				})
			}
			wg.Wait()
			requireIndexesMatchScans(t, s, mode, all)
		})
	}
}
