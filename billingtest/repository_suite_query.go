package billingtest

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"

	"github.com/stretchr/testify/require"
)

// TestStatusQueriesWith runs the QueryStatus group of [TestRepositoryWith]
// in the given index modes only, for a store that answers status queries
// from an index in some modes and another way in the rest: the single
// table reads its sharded due index (dynamostore.SingleTableConfig.DueShards)
// exactly as the legacy table's due mode does, and walks its payment
// index otherwise, so its suites set SkipStatusQueries and run this with
// [dynamostore.StatusIndexDue]. newStores receives the mode and its
// shards in memory.Options.StatusIndexMode and DueShards.
func TestStatusQueriesWith(t *testing.T, newStores StoreFactory, opts SuiteOptions, modes ...dynamostore.StatusIndexMode) {
	t.Helper()
	s := &repoSuite{newStores: newStores, ids: newSuiteIDs(opts)}
	s.statusQueries(t, modes...)
}

// statusQueries runs the query cases of each mode as parallel subtests.
func (s *repoSuite) statusQueries(t *testing.T, modes ...dynamostore.StatusIndexMode) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			for _, c := range s.queryCases(mode) {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t)
				})
			}
		})
	}
}

// maxPages bounds every pagination loop of the suite.
const maxPages = 1000

// pager fetches one page of a query from a cursor.
type pager func(cursor string) (billing.Page, error)

// queryRun is the outcome of reading every page of a query.
type queryRun struct {
	items   []billing.Period
	pages   []billing.Page
	scanned int
}

// collect reads every page and checks what holds for any page of any
// store: Count is len(Items)+len(Invalid) and at most Scanned, Scanned is
// at most limit, a page that read fewer than limit items is the last (of
// its shard, in due mode), and
// (in sorted mode) only matching items are read and they come ascending
// by billing_date.
func (e *repoEnv) collect(mode dynamostore.StatusIndexMode, limit int, fetch pager) queryRun {
	e.t.Helper()
	var run queryRun
	cur := ""
	for n := 0; ; n++ {
		require.Less(e.t, n, maxPages, "query did not end after %d pages", maxPages)
		p, err := fetch(cur)
		require.NoError(e.t, err, "page %d", n)
		require.Empty(e.t, p.Invalid, "page %d reports invalid items", n)
		require.Equal(e.t, len(p.Items)+len(p.Invalid), p.Count, "page %d: Count, want len(Items)+len(Invalid)", n)
		require.LessOrEqual(e.t, p.Count, p.Scanned, "page %d: Count %d > Scanned %d", n, p.Count, p.Scanned)
		require.LessOrEqual(e.t, p.Scanned, limit, "page %d: Scanned %d > limit %d", n, p.Scanned, limit)
		if p.Next != "" && mode != dynamostore.StatusIndexDue { // a due page ends with its shard
			require.GreaterOrEqual(e.t, p.Scanned, limit, "page %d read %d items, fewer than the limit %d, but has a Next cursor", n, p.Scanned, limit)
		}
		if isSorted(mode) {
			require.Equal(e.t, p.Count, p.Scanned, "sorted index page %d: Scanned %d != Count %d: items outside the range were read", n, p.Scanned, p.Count)
		}
		run.pages = append(run.pages, p)
		run.items = append(run.items, p.Items...)
		run.scanned += p.Scanned
		if p.Next == "" {
			break
		}
		require.NotEqual(e.t, cur, p.Next, "page %d returned its own cursor as Next", n)
		cur = p.Next
	}
	if isSorted(mode) {
		require.True(e.t, slices.IsSortedFunc(run.items, func(a, b billing.Period) int {
			return a.BillingDate.Compare(b.BillingDate)
		}), "sorted index: items not ascending by billing_date: %v", billingDates(run.items))
	}
	return run
}

// requireExactly checks that items are want, each exactly once (in any
// order), with the status queried and as stored.
func (e *repoEnv) requireExactly(items, want []billing.Period) {
	e.t.Helper()
	seen := map[string]int{}
	for _, it := range items {
		seen[it.SubscriptionID]++
	}
	for id, n := range seen {
		require.LessOrEqual(e.t, n, 1, "record %s returned %d times", id, n)
	}
	got, w := sortedIDs(items), sortedIDs(want)
	require.True(e.t, slices.Equal(got, w), "query returned %d records %v\nwant %d: %v", len(got), billingDates(items), len(w), billingDates(want))
	byID := map[string]billing.Period{}
	for _, w := range want {
		byID[w.SubscriptionID] = w
	}
	for i := range items {
		w := byID[items[i].SubscriptionID]
		require.Empty(e.t, diffStored(&items[i], &w), "record %s differs from the one stored", w.Key())
	}
}

func billingDates(recs []billing.Period) []string {
	out := make([]string, len(recs))
	for i := range recs {
		out[i] = recs[i].Status.String() + "@" + layout.BillingDateKey(&recs[i])
	}
	return out
}

func countStatus(recs []billing.Period, st billing.Status) int {
	n := 0
	for i := range recs {
		if recs[i].Status == st {
			n++
		}
	}
	return n
}

// queryFixture adds records of several users and returns them.
type queryFixture struct {
	e     *repoEnv
	users []string
	all   []billing.Period
	taken map[string]bool
}

func (s *repoSuite) queryFixture(t *testing.T, mode dynamostore.StatusIndexMode, pageSize int) *queryFixture {
	t.Helper()
	opts := memory.Options{PageSize: pageSize, StatusIndexMode: mode}
	if mode == dynamostore.StatusIndexDue {
		opts.DueShards = 1 // one shard reads like the sorted index; see the Shards case for more
	}
	f := &queryFixture{e: s.env(t, opts), taken: map[string]bool{}}
	for range 3 {
		f.users = append(f.users, s.ids.user())
	}
	return f
}

// put adds a record of status due at d, for the users in turn (skipping
// users that have a record due at d). It writes it with AddAll, as an
// import would: the queries read whatever the table holds, several open
// records of a user included, which Add refuses on the legacy layout.
func (f *queryFixture) put(d time.Time, st billing.Status) billing.Period {
	f.e.t.Helper()
	for i := range f.users {
		u := f.users[(len(f.all)+i)%len(f.users)]
		if k := u + " " + d.UTC().Format(time.RFC3339); !f.taken[k] {
			f.taken[k] = true
			r := f.e.ids.record(u, d, st)
			f.e.addAll([]billing.Period{r})
			f.all = append(f.all, r)
			return r
		}
	}
	f.e.t.Fatalf("queryFixture: every user has a record due at %v", d)
	return billing.Period{}
}

func (s *repoSuite) queryCases(mode dynamostore.StatusIndexMode) []repoCase {
	const pageSize = 4
	sorted := isSorted(mode)
	// window runs a range query case: records put by fill, the query read
	// with a named helper, the result compared with the records want keeps.
	window := func(t *testing.T, st billing.Status, fill func(f *queryFixture), fetch func(e *repoEnv) pager, want func(r billing.Period) bool) {
		f := s.queryFixture(t, mode, pageSize)
		fill(f)
		run := f.e.collect(mode, pageSize, fetch(f.e))
		var expected []billing.Period
		for _, r := range f.all {
			if r.Status == st && want(r) {
				expected = append(expected, r)
			}
		}
		f.e.requireExactly(run.items, expected)
		if !sorted {
			require.Equal(t, countStatus(f.all, st), run.scanned, "legacy index: items read over all pages, want every %s record", st)
		}
	}
	cut := day(30)
	return []repoCase{
		{"ScheduledBefore", func(t *testing.T) {
			window(t, billing.StatusScheduled, func(f *queryFixture) {
				for _, d := range []time.Time{day(-40), day(29), cut.Add(-time.Second), cut, cut.Add(time.Second), day(31), day(90)} {
					f.put(d, billing.StatusScheduled)
				}
				f.put(day(1), billing.StatusError)
				f.put(day(2), billing.StatusPaused)
				f.put(day(3), billing.StatusCompleted)
				f.put(day(4), billing.StatusACHSent)
			}, func(e *repoEnv) pager {
				return func(c string) (billing.Page, error) {
					return e.repo.QueryStatus(e.ctx(), billing.StatusQuery{Status: billing.StatusScheduled, Before: cut, Cursor: c})
				}
			}, func(r billing.Period) bool { return r.BillingDate.Before(cut) })
		}},
		{"RetryAfter", func(t *testing.T) {
			window(t, billing.StatusError, func(f *queryFixture) {
				for _, d := range []time.Time{day(-3), cut.Add(-time.Second), cut, cut.Add(time.Second), day(45), day(400)} {
					f.put(d, billing.StatusError)
				}
				f.put(day(40), billing.StatusScheduled)
				f.put(day(41), billing.StatusACHSent)
			}, func(e *repoEnv) pager {
				return func(c string) (billing.Page, error) {
					return e.repo.QueryStatus(e.ctx(), billing.StatusQuery{Status: billing.StatusError, After: cut, Cursor: c})
				}
			}, func(r billing.Period) bool { return r.BillingDate.After(cut) })
		}},
		{"PausedBefore", func(t *testing.T) {
			window(t, billing.StatusPaused, func(f *queryFixture) {
				for _, d := range []time.Time{day(-100), day(0), cut.Add(-time.Second), cut, day(60)} {
					f.put(d, billing.StatusPaused)
				}
				f.put(day(1), billing.StatusScheduled)
				f.put(day(2), billing.StatusPausedSkipped)
			}, func(e *repoEnv) pager {
				return func(c string) (billing.Page, error) {
					return e.repo.QueryStatus(e.ctx(), billing.StatusQuery{Status: billing.StatusPaused, Before: cut, Cursor: c})
				}
			}, func(r billing.Period) bool { return r.BillingDate.Before(cut) })
		}},
		{"NotificationWindow", func(t *testing.T) {
			start, end := day(10), day(17)
			window(t, billing.StatusScheduled, func(f *queryFixture) {
				for _, d := range []time.Time{
					day(0), start.Add(-time.Second), start, start.Add(time.Second), day(13),
					end.Add(-time.Second), end, end.Add(time.Second), day(30),
				} {
					f.put(d, billing.StatusScheduled)
				}
				f.put(start.Add(time.Hour), billing.StatusError)
				f.put(day(12), billing.StatusCancelled)
			}, func(e *repoEnv) pager {
				return func(c string) (billing.Page, error) {
					return e.repo.QueryStatus(e.ctx(), billing.StatusQuery{Status: billing.StatusScheduled, Since: start, Before: end, Cursor: c})
				}
			}, func(r billing.Period) bool { return !r.BillingDate.Before(start) && r.BillingDate.Before(end) })
		}},
		{"Unbounded", func(t *testing.T) {
			window(t, billing.StatusError, func(f *queryFixture) {
				for i := range 5 {
					f.put(day(-50+40*i), billing.StatusError)
				}
				f.put(day(0), billing.StatusScheduled)
			}, func(e *repoEnv) pager {
				return func(c string) (billing.Page, error) {
					return e.repo.QueryStatus(e.ctx(), billing.StatusQuery{Status: billing.StatusError, Cursor: c})
				}
			}, func(billing.Period) bool { return true })
		}},
		{"NoRecordsOfStatus", func(t *testing.T) {
			f := s.queryFixture(t, mode, pageSize)
			f.put(day(0), billing.StatusScheduled)
			p, err := f.e.repo.QueryStatus(f.e.ctx(), billing.StatusQuery{Status: billing.StatusPaused, Before: day(100), Cursor: ""})
			require.NoError(t, err, "page of a status without records")
			require.Empty(t, p.Items, "page of a status without records = %+v; want an empty last page", p)
			require.Zero(t, p.Count, "page of a status without records = %+v; want an empty last page", p)
			require.Zero(t, p.Scanned, "page of a status without records = %+v; want an empty last page", p)
			require.Empty(t, p.Next, "page of a status without records = %+v; want an empty last page", p)
		}},
		{"Pagination", func(t *testing.T) {
			for _, c := range []struct{ due, pageSize int }{{20, 3}, {6, 3}, {1, 3}, {7, 1}} {
				t.Run(fmt.Sprintf("%dDueByPage%d", c.due, c.pageSize), func(t *testing.T) {
					f := s.queryFixture(t, mode, c.pageSize)
					var due []billing.Period
					for i := range c.due { // several users share each date: ties in the sorted index
						due = append(due, f.put(day(-i/3), billing.StatusScheduled))
					}
					for i := range 7 {
						f.put(day(1+i), billing.StatusScheduled)
					}
					for i := range 5 {
						f.put(day(-i).Add(time.Hour), billing.StatusError)
					}
					run := f.e.collect(mode, c.pageSize, func(cur string) (billing.Page, error) {
						return f.e.repo.QueryStatus(f.e.ctx(), billing.StatusQuery{Status: billing.StatusScheduled, Before: day(1), Cursor: cur})
					})
					f.e.requireExactly(run.items, due)
					read := c.due
					if !sorted {
						read += 7
					}
					require.Equal(t, read, run.scanned, "items read over all pages")
					minPages := (read + c.pageSize - 1) / c.pageSize
					n := len(run.pages)
					require.GreaterOrEqual(t, n, minPages, "%d pages for %d items read by %d, want %d or %d", n, read, c.pageSize, minPages, minPages+1)
					require.LessOrEqual(t, n, minPages+1, "%d pages for %d items read by %d, want %d or %d", n, read, c.pageSize, minPages, minPages+1)
				})
			}
		}},
		{"LimitOverridesPageSize", func(t *testing.T) {
			f := s.queryFixture(t, mode, 3)
			for i := range 10 {
				f.put(day(-i), billing.StatusScheduled)
			}
			q := billing.StatusQuery{Status: billing.StatusScheduled, Before: day(1), Limit: 7}
			p, err := f.e.repo.QueryStatus(f.e.ctx(), q)
			require.NoError(t, err, "first page with Limit 7")
			require.Equal(t, 7, p.Scanned, "first page with Limit 7 = %d read, %d items, next %q; want 7, 7 and a cursor", p.Scanned, len(p.Items), p.Next)
			require.Len(t, p.Items, 7, "first page with Limit 7 = %d read, %d items, next %q; want 7, 7 and a cursor", p.Scanned, len(p.Items), p.Next)
			require.NotEmpty(t, p.Next, "first page with Limit 7 = %d read, %d items, next %q; want 7, 7 and a cursor", p.Scanned, len(p.Items), p.Next)
			q.Cursor = p.Next
			p2, err := f.e.repo.QueryStatus(f.e.ctx(), q)
			require.NoError(t, err, "second page with Limit 7")
			require.Equal(t, 3, p2.Scanned, "second page with Limit 7 = %d read, %d items, next %q; want the last 3", p2.Scanned, len(p2.Items), p2.Next)
			require.Len(t, p2.Items, 3, "second page with Limit 7 = %d read, %d items, next %q; want the last 3", p2.Scanned, len(p2.Items), p2.Next)
			require.Empty(t, p2.Next, "second page with Limit 7 = %d read, %d items, next %q; want the last 3", p2.Scanned, len(p2.Items), p2.Next)
			f.e.requireExactly(append(p.Items, p2.Items...), f.all)

			d := s.queryFixture(t, mode, 0) // default page size
			for i := range 12 {
				d.put(day(-i), billing.StatusScheduled)
			}
			all, err := d.e.repo.QueryStatus(d.e.ctx(), billing.StatusQuery{Status: billing.StatusScheduled, Before: day(1), Cursor: ""})
			require.NoError(t, err, "page with the default page size")
			require.Equal(t, 12, all.Scanned, "page with the default page size = %d read, next %q; want all 12 in one page", all.Scanned, all.Next)
			require.Empty(t, all.Next, "page with the default page size = %d read, next %q; want all 12 in one page", all.Scanned, all.Next)
		}},
		{"CursorOfAnotherStatus", func(t *testing.T) {
			f := s.queryFixture(t, mode, 2)
			for i := range 5 {
				f.put(day(-i), billing.StatusScheduled)
				f.put(day(-i).Add(time.Hour), billing.StatusError)
			}
			p, err := f.e.repo.QueryStatus(f.e.ctx(), billing.StatusQuery{Status: billing.StatusScheduled, Before: day(1), Cursor: ""})
			require.NoError(t, err, "first page")
			require.NotEmpty(t, p.Next, "first page: next")
			for _, st := range []billing.Status{billing.StatusError, billing.StatusPaused} {
				got, err := f.e.repo.QueryStatus(f.e.ctx(), billing.StatusQuery{Status: st, Cursor: p.Next})
				require.ErrorIs(t, err, billing.ErrInvalidCursor, "%s query with a SCHEDULED cursor = %d items; want ErrInvalidCursor", st, len(got.Items))
				require.Empty(t, got.Items, "%s query with a SCHEDULED cursor; want ErrInvalidCursor", st)
			}
		}},
		{"CorruptCursor", func(t *testing.T) {
			f := s.queryFixture(t, mode, 2)
			for i := range 6 {
				f.put(day(-i), billing.StatusScheduled)
			}
			p, err := f.e.repo.QueryStatus(f.e.ctx(), billing.StatusQuery{Status: billing.StatusScheduled, Before: day(1), Cursor: ""})
			require.NoError(t, err, "first page")
			require.NotEmpty(t, p.Next, "first page: next")
			otherMode := dynamostore.StatusIndexLegacy
			if !sorted {
				otherMode = dynamostore.StatusIndexSorted
			}
			other := s.queryFixture(t, otherMode, 2)
			for i := range 6 {
				other.put(day(-i), billing.StatusScheduled)
			}
			op, err := other.e.repo.QueryStatus(other.e.ctx(), billing.StatusQuery{Status: billing.StatusScheduled, Before: day(1), Cursor: ""})
			require.NoError(t, err, "first page of the other mode")
			require.NotEmpty(t, op.Next, "first page of the other mode: next")
			tok := p.Next
			raw, _ := base64.RawURLEncoding.DecodeString(tok)
			flipped := slices.Clone(raw)
			if len(flipped) > 0 {
				flipped[len(flipped)/2] ^= 0x04
			}
			mid := len(tok) / 2
			swapped := tok[:mid] + string(nextChar(tok[mid])) + tok[mid+1:]
			for _, c := range []struct{ name, cursor string }{
				{"Garbage", "not a cursor"},
				{"GarbageBase64", base64.RawURLEncoding.EncodeToString([]byte("hello, world: a cursor?"))},
				{"JSONKey", base64.RawURLEncoding.EncodeToString([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-01-01T00:00:00Z"}}`))},
				{"Truncated", tok[:len(tok)-1]},
				{"TruncatedHalf", tok[:len(tok)/2]},
				{"Extended", tok + "AA"},
				{"BitFlipped", base64.RawURLEncoding.EncodeToString(flipped)},
				{"CharSwapped", swapped},
				{"StdBase64", base64.StdEncoding.EncodeToString(raw)},
				{"Whitespace", " " + tok},
				{"OtherIndexMode", op.Next},
			} {
				t.Run(c.name, func(t *testing.T) {
					if c.cursor == tok {
						t.Skip("mutation left the token unchanged")
					}
					got, err := f.e.repo.QueryStatus(f.e.ctx(), billing.StatusQuery{Status: billing.StatusScheduled, Before: day(1), Cursor: c.cursor})
					require.ErrorIs(t, err, billing.ErrInvalidCursor, "page with cursor %q = %d items; want ErrInvalidCursor and nothing (never a restart)", c.cursor, len(got.Items))
					require.Empty(t, got.Items, "page with cursor %q; want ErrInvalidCursor and nothing (never a restart)", c.cursor)
				})
			}
		}},
		{"InvalidQuery", func(t *testing.T) {
			f := s.queryFixture(t, mode, pageSize)
			f.put(day(0), billing.StatusScheduled)
			for _, c := range []struct {
				name string
				q    billing.StatusQuery
			}{
				{"NoStatus", billing.StatusQuery{Before: day(1)}},
				{"UnknownStatus", billing.StatusQuery{Status: "BOGUS"}},
				{"LowercaseStatus", billing.StatusQuery{Status: "scheduled"}},
				{"Inactive", billing.StatusQuery{Status: billing.StatusInactive}},
				{"SinceAndAfter", billing.StatusQuery{Status: billing.StatusScheduled, Since: day(-1), After: day(-2)}},
				{"NegativeLimit", billing.StatusQuery{Status: billing.StatusScheduled, Limit: -1}},
			} {
				t.Run(c.name, func(t *testing.T) {
					p, err := f.e.repo.QueryStatus(f.e.ctx(), c.q)
					require.ErrorIs(t, err, billing.ErrInvalidQuery, "QueryStatus(%+v) = %d items; want ErrInvalidQuery", c.q, len(p.Items))
					require.Empty(t, p.Items, "QueryStatus(%+v); want ErrInvalidQuery", c.q)
				})
			}
		}},
		{"RecordsMovedBetweenPages", func(t *testing.T) {
			f := s.queryFixture(t, mode, 3)
			for i := range 12 {
				f.put(day(-i/2), billing.StatusScheduled)
			}
			fetch := func(c string) (billing.Page, error) {
				return f.e.repo.QueryStatus(f.e.ctx(), billing.StatusQuery{Status: billing.StatusScheduled, Before: day(1), Cursor: c})
			}
			first, err := fetch("")
			require.NoError(t, err, "first page")
			require.Len(t, first.Items, 3, "first page = %d items, next %q; want 3 and a cursor", len(first.Items), first.Next)
			require.NotEmpty(t, first.Next, "first page = %d items, next %q; want 3 and a cursor", len(first.Items), first.Next)
			read := map[string]bool{}
			for _, it := range first.Items {
				read[it.SubscriptionID] = true
			}
			var unread []billing.Period
			for _, r := range f.all {
				if !read[r.SubscriptionID] {
					unread = append(unread, r)
				}
			}
			// The cursor's own item leaves the status, another read item is
			// rewritten in place, and an unread one leaves too.
			atCursor, rewritten, gone := first.Items[2], first.Items[0], unread[len(unread)/2]
			f.e.update(atCursor, f.e.ids.next(atCursor, billing.StatusError))
			f.e.update(rewritten, f.e.ids.next(rewritten, billing.StatusScheduled))
			f.e.update(gone, f.e.ids.next(gone, billing.StatusCancelled))
			rest := f.e.collect(mode, 3, func(c string) (billing.Page, error) {
				if c == "" {
					c = first.Next
				}
				return fetch(c)
			})
			var want []billing.Period
			for _, r := range unread {
				if r.SubscriptionID != gone.SubscriptionID {
					want = append(want, r)
				}
			}
			f.e.requireExactly(rest.items, want)
		}},
		{"Shards", func(t *testing.T) { s.shardCase(t, mode) }},
	}
}

// isSorted reports whether mode reads only the records in a query's
// range, in billing_date order (within a shard).
func isSorted(mode dynamostore.StatusIndexMode) bool {
	return mode == dynamostore.StatusIndexSorted || mode == dynamostore.StatusIndexDue
}

// shardCase checks status queries narrowed to shards on a store asked for
// three: every shard's pages return only records of its users, the shards
// together every matching record exactly once, as a query of all shards
// does; a shard the store does not have is refused, and a cursor continues
// only the shards it was made for. A store that does not shard is one
// shard.
func (s *repoSuite) shardCase(t *testing.T, mode dynamostore.StatusIndexMode) {
	const pageSize = 2
	f := &queryFixture{e: s.env(t, memory.Options{PageSize: pageSize, StatusIndexMode: mode, DueShards: 3}), taken: map[string]bool{}}
	for range 9 {
		f.users = append(f.users, f.e.ids.user())
	}
	var due []billing.Period
	for i := range 12 {
		due = append(due, f.put(day(-i/4), billing.StatusScheduled))
		f.put(day(1+i), billing.StatusScheduled)
	}
	k := 1
	if sr, ok := f.e.repo.(billing.ShardedRepository); ok {
		k = sr.DueShards()
	}
	q := billing.StatusQuery{Status: billing.StatusScheduled, Before: day(1)}
	var union []billing.Period
	shardOf := map[string]int{}
	for shard := range k {
		q.Shards = []int{shard}
		// Outside the due mode the shards are a filter: a page reads other
		// shards' records too, so it is checked as a legacy page is.
		checkAs := dynamostore.StatusIndexLegacy
		if mode == dynamostore.StatusIndexDue {
			checkAs = mode
		}
		run := f.e.collect(checkAs, pageSize, func(cur string) (billing.Page, error) {
			q.Cursor = cur
			return f.e.repo.QueryStatus(f.e.ctx(), q)
		})
		for _, r := range run.items {
			if prev, ok := shardOf[r.UserID]; ok {
				require.Equal(t, prev, shard, "user %s in shards %d and %d", r.UserID, prev, shard)
			}
			shardOf[r.UserID] = shard
		}
		union = append(union, run.items...)
	}
	f.e.requireExactly(union, due)
	// Every shard, one after the other (in billing_date order within each).
	q.Shards, q.Cursor = nil, ""
	var all []billing.Period
	for range maxPages {
		p, err := f.e.repo.QueryStatus(f.e.ctx(), q)
		require.NoError(t, err, "every shard")
		all = append(all, p.Items...)
		if q.Cursor = p.Next; q.Cursor == "" {
			break
		}
	}
	f.e.requireExactly(all, due)

	if mode == dynamostore.StatusIndexDue {
		// Only the statuses runs read are in the due index.
		_, err := f.e.repo.QueryStatus(f.e.ctx(), billing.StatusQuery{Status: billing.StatusCompleted})
		if k > 1 {
			require.ErrorIs(t, err, billing.ErrInvalidQuery, "a COMPLETED query in the due mode")
		}
	}
	q.Cursor, q.Shards = "", []int{k}
	_, err := f.e.repo.QueryStatus(f.e.ctx(), q)
	require.ErrorIs(t, err, billing.ErrInvalidQuery, "shard %d of a store with %d", k, k)
	if k < 2 {
		return
	}
	q.Shards, q.Limit = []int{0}, 1
	p, err := f.e.repo.QueryStatus(f.e.ctx(), q)
	require.NoError(t, err, "first page of shard 0")
	require.NotEmpty(t, p.Next, "first page of shard 0: next")
	q.Shards, q.Cursor = []int{1}, p.Next
	_, err = f.e.repo.QueryStatus(f.e.ctx(), q)
	require.ErrorIs(t, err, billing.ErrInvalidCursor, "shard 0's cursor on shard 1")
}

// nextChar returns another base64url character.
func nextChar(c byte) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, c)
	return alphabet[(i+1)%len(alphabet)]
}
