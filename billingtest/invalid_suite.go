package billingtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// PutRawFunc writes item unchanged into the store under test, as a
// PutItem by another program would: into its records when table is
// [memory.SubscriptionsTable], into its history rows when it is
// [memory.HistoryTable]. item has the attributes of the legacy tables'
// items (user_id, billing_date, last_run_date, …); a store of another
// layout adds the keys it needs, as the single table's PK, SK and entity.
type PutRawFunc func(ctx context.Context, table string, item map[string]av.AttributeValue) error

// RawStoresFunc returns a repository and the history it writes to, on
// fresh, empty tables with the store's default options, and a
// [PutRawFunc] writing into the same tables.
type RawStoresFunc func(t *testing.T) (billing.Repository, billing.History, PutRawFunc)

// invalidCases are the cases of items another program wrote: the
// per-user reads skip an item that does not decode, return the user's
// other records and report the item through [billing.WithInvalidItems]
// (a *FieldError wrapping ErrInvalidItem and naming the item's key);
// Recent returns its limit of records whatever bad items lie among them.
// Bad items past the last record Recent returns may or may not be
// reported.
func (s *repoSuite) invalidCases() []repoCase {
	ids := s.ids
	// stores returns a user's records, added through the repository, and
	// two undecodable records of the user written raw: one between them
	// and one newer than all.
	stores := func(t *testing.T) (e *rawEnv, u string, good []billing.Period, badMid, badNew string) {
		e = newRawEnv(t, s.raw)
		u = ids.user()
		good = []billing.Period{
			ids.record(u, day(-62), billing.StatusCompleted),
			ids.record(u, day(-31), billing.StatusCompleted),
			ids.record(u, day(0), billing.StatusScheduled),
		}
		for i := range good {
			require.NoError(t, e.repo.Add(t.Context(), &good[i]), "Add(%s)", good[i].Key())
		}
		mid, newest := ids.record(u, day(-15), billing.StatusCompleted), ids.record(u, day(31), billing.StatusCompleted)
		e.putBad(memory.SubscriptionsTable, mid)
		e.putBad(memory.SubscriptionsTable, newest)
		return e, u, good, layout.BillingDateKey(&mid), layout.BillingDateKey(&newest)
	}
	return []repoCase{
		{"ListByUserSkipsUndecodable", func(t *testing.T) {
			e, u, good, badMid, badNew := stores(t)
			var r reports
			got, err := e.repo.ListByUser(r.ctx(t.Context()), u)
			require.NoError(t, err, "ListByUser with undecodable items")
			require.Equal(t, subIDs(good), subIDs(got), "ListByUser: the good records, ascending")
			r.require(t, "ListByUser", u, []string{badMid, badNew}, nil)

			got, err = e.repo.ListByUser(t.Context(), u)
			require.NoError(t, err, "ListByUser without WithInvalidItems")
			require.Len(t, got, len(good), "ListByUser without WithInvalidItems")
		}},
		{"RecentSkipsUndecodable", func(t *testing.T) {
			e, u, good, badMid, badNew := stores(t)
			desc := slices.Clone(good)
			slices.Reverse(desc)
			for _, c := range []struct {
				limit     int
				want      []billing.Period
				must, may []string
			}{
				{0, desc, []string{badMid, badNew}, nil}, // the default limit, 10
				{3, desc, []string{badMid, badNew}, nil},
				{2, desc[:2], []string{badMid, badNew}, nil},
				{1, desc[:1], []string{badNew}, []string{badMid}},
			} {
				var r reports
				got, err := e.repo.Recent(r.ctx(t.Context()), u, c.limit)
				require.NoError(t, err, "Recent(%d) with undecodable items", c.limit)
				require.Equal(t, subIDs(c.want), subIDs(got), "Recent(%d): the newest good records; a bad item takes no record's place", c.limit)
				r.require(t, "Recent", u, c.must, c.may)
			}
		}},
	}
}

// invalidCase is the history suite's case of a row another program
// wrote that does not decode: ListByUser returns the other rows and
// reports it.
func (s *histSuite) invalidCase(t *testing.T) {
	ids := s.ids
	e := newRawEnv(t, s.raw)
	u := ids.user()
	first := ids.record(u, day(0), billing.StatusScheduled)
	bad := ids.record(u, day(31), billing.StatusCompleted) // a later last_run_date
	rest := []billing.Period{ids.record(u, day(31), billing.StatusScheduled), ids.record(u, day(62), billing.StatusScheduled)}
	good := append([]billing.Period{first}, rest...)
	for i := range good {
		require.NoError(t, e.hist.Add(t.Context(), &good[i]), "History.Add(%s)", good[i].Key())
	}
	e.putBad(memory.HistoryTable, bad)
	var r reports
	got, err := e.hist.ListByUser(r.ctx(t.Context()), u)
	require.NoError(t, err, "History.ListByUser with an undecodable row")
	(&histEnv{t: t, hist: e.hist}).requireRows("ListByUser", got, good)
	r.require(t, "History.ListByUser", u, []string{layout.LastRunDateKey(&bad)}, nil)
}

// rawEnv is a subtest's stores with their raw writer.
type rawEnv struct {
	t    *testing.T
	repo billing.Repository
	hist billing.History
	put  PutRawFunc
}

func newRawEnv(t *testing.T, raw RawStoresFunc) *rawEnv {
	t.Helper()
	if raw == nil {
		t.Skip("SuiteOptions.RawStores is not set: the suite cannot write items another program would")
	}
	repo, hist, put := raw(t)
	require.True(t, repo != nil && hist != nil && put != nil, "RawStores returned a nil Repository, History or PutRawFunc")
	return &rawEnv{t: t, repo: repo, hist: hist, put: put}
}

// putBad writes r into table as its item, except for billing_amount
// "4,99" (a decimal comma, as another service might write it): an item
// that does not decode.
func (e *rawEnv) putBad(table string, r billing.Period) {
	e.t.Helper()
	encode := layout.EncodeItem
	if table == memory.HistoryTable {
		encode = layout.EncodeHistoryItem
	}
	item, err := encode(&r)
	require.NoError(e.t, err)
	item[layout.AttrBillingAmount] = &av.AttributeValueMemberS{Value: "4,99"}
	require.NoError(e.t, e.put(e.t.Context(), table, item), "writing a raw %s item", table)
}

// reports records what a read reports through [billing.WithInvalidItems].
type reports struct {
	mu   sync.Mutex
	errs []error
}

func (r *reports) ctx(parent context.Context) context.Context {
	return billing.WithInvalidItems(parent, func(_ context.Context, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.errs = append(r.errs, err)
	})
}

// require checks the reports of one read: one for each item whose key
// (its billing_date or last_run_date text) is in must, at most one for
// each in may, and nothing else; each a *FieldError on billing_amount
// wrapping ErrInvalidItem whose text names the user and that key.
func (r *reports) require(t *testing.T, what, user string, must, may []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, err := range r.errs {
		require.ErrorIs(t, err, billing.ErrInvalidItem, "%s reported", what)
		var fe *billing.FieldError
		require.ErrorAs(t, err, &fe, "%s reported", what)
		require.Equal(t, layout.AttrBillingAmount, fe.Field, "%s reported %v", what, err)
		require.Contains(t, err.Error(), user, "%s reported an error without the item's user", what)
		i := slices.IndexFunc(slices.Concat(must, may), func(k string) bool { return strings.Contains(err.Error(), k) })
		require.GreaterOrEqual(t, i, 0, "%s reported %v, naming none of the bad items %v", what, err, slices.Concat(must, may))
		k := slices.Concat(must, may)[i]
		require.False(t, seen[k], "%s reported the item at %s twice", what, k)
		seen[k] = true
	}
	for _, k := range must {
		require.True(t, seen[k], "%s did not report the undecodable item at %s (reports: %v)", what, k, errors.Join(r.errs...))
	}
}
