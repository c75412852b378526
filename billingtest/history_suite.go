package billingtest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
)

// TestHistory runs the conformance suite of [billing.History] on the
// histories newHistory returns, each on a fresh, empty table. Every
// subtest calls t.Parallel and uses its own history and IDs.
//
// It checks that Add appends and never overwrites (a taken user_id and
// last_run_date is a *ConflictError wrapping ErrAlreadyExists), that
// AddAll writes every row or, for rows sharing a key within the call or
// unstorable rows, nothing, that AddAll never replaces a row (the same row
// again is accepted, another at its key refused and named), that both listings are ascending by
// last_run_date in time order (the fixed-width encoding) and complete,
// and that data_ and unknown attributes round trip. ListBySubscription
// reads an index: it is expected to see rows written before it, as moto
// and DynamoDB Local do.
func TestHistory(t *testing.T, newHistory func(t *testing.T) billing.History) {
	t.Helper()
	TestHistoryWith(t, newHistory, SuiteOptions{})
}

// TestHistoryWith is [TestHistory] with the user IDs mapped by
// opts.UserID. With opts.RawStores it checks too that ListByUser skips a
// row that does not decode, returns the others and reports it through
// [billing.WithInvalidItems].
func TestHistoryWith(t *testing.T, newHistory func(t *testing.T) billing.History, opts SuiteOptions) {
	t.Helper()
	s := &histSuite{newHistory: newHistory, ids: newSuiteIDs(opts), raw: opts.RawStores}
	for _, c := range append(s.cases(), repoCase{"ListByUserSkipsUndecodable", s.invalidCase}) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

type histSuite struct {
	newHistory func(t *testing.T) billing.History
	ids        *suiteIDs
	raw        RawStoresFunc
}

type histEnv struct {
	t    *testing.T
	hist billing.History
}

func (s *histSuite) env(t *testing.T) *histEnv {
	t.Helper()
	h := s.newHistory(t)
	if h == nil {
		t.Fatal("billingtest.TestHistory: the factory returned a nil History")
	}
	return &histEnv{t: t, hist: h}
}

func (e *histEnv) add(rows ...billing.Period) {
	e.t.Helper()
	for i := range rows {
		if err := e.hist.Add(e.t.Context(), &rows[i]); err != nil {
			e.t.Fatalf("History.Add(%s at %s): %v", rows[i].Key(), layout.LastRunDateKey(&rows[i]), err)
		}
	}
}

func (e *histEnv) bySub(id string) []billing.Period {
	e.t.Helper()
	rows, err := e.hist.ListBySubscription(e.t.Context(), id)
	if err != nil {
		e.t.Fatalf("ListBySubscription(%s): %v", id, err)
	}
	return rows
}

func (e *histEnv) byUser(u string) []billing.Period {
	e.t.Helper()
	rows, err := e.hist.ListByUser(e.t.Context(), u)
	if err != nil {
		e.t.Fatalf("ListByUser(%s): %v", u, err)
	}
	return rows
}

// requireRows checks that got are want in this order, attribute for
// attribute (data_ included).
func (e *histEnv) requireRows(what string, got, want []billing.Period) {
	e.t.Helper()
	if len(got) != len(want) {
		e.t.Fatalf("%s: %d rows %v, want %d %v", what, len(got), runDates(got), len(want), runDates(want))
	}
	for i := range got {
		if d := diffHistoryRow(&got[i], &want[i]); d != "" {
			e.t.Fatalf("%s: row %d (want last_run_date %s) differs: %s\n got order %v", what, i, layout.LastRunDateKey(&want[i]), d, runDates(got))
		}
	}
}

func runDates(rows []billing.Period) []string {
	out := make([]string, len(rows))
	for i := range rows {
		out[i] = layout.LastRunDateKey(&rows[i])
	}
	return out
}

// rowsOf returns n rows of one subscription at increasing last_run_dates,
// some of them a fraction of a second apart (a trimmed encoding would
// misorder 10:00:05.5 and 10:00:05).
func (s *histSuite) rowsOf(user, subID string, n int) []billing.Period {
	base := s.ids.record(user, day(0), billing.StatusScheduled)
	base.SubscriptionID = subID
	rows := make([]billing.Period, n)
	var sec time.Time
	for i := range rows {
		if i%2 == 0 {
			sec = s.ids.second()
		}
		rows[i] = base.Clone()
		rows[i].LastRunDate = sec.Add(time.Duration(i%2) * 500 * time.Millisecond)
		rows[i].Attempt = i
		if i > 0 {
			rows[i].Status = billing.StatusError
		}
	}
	return rows
}

// shuffled returns rows in a fixed scrambled order.
func shuffled(rows []billing.Period) []billing.Period {
	out := make([]billing.Period, 0, len(rows))
	n := len(rows)
	step := 7
	for n > 0 && gcd(step, n) != 1 {
		step++
	}
	for i := range n {
		out = append(out, rows[(i*step+3)%n])
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (s *histSuite) cases() []repoCase {
	ids := s.ids
	return []repoCase{
		{"AddAndList", func(t *testing.T) {
			e := s.env(t)
			r := ids.fullRecord(ids.user())
			e.add(r)
			e.requireRows("ListBySubscription", e.bySub(r.SubscriptionID), []billing.Period{r})
			e.requireRows("ListByUser", e.byUser(r.UserID), []billing.Period{r})
		}},
		{"ListBySubscriptionAscending", func(t *testing.T) {
			e := s.env(t)
			u := ids.user()
			rows := s.rowsOf(u, ids.subID(), 25)
			e.add(shuffled(rows)...)
			e.add(s.rowsOf(u, ids.subID(), 3)...)          // another subscription of the user
			e.add(s.rowsOf(ids.user(), ids.subID(), 2)...) // and another user's
			e.requireRows("ListBySubscription", e.bySub(rows[0].SubscriptionID), rows)
		}},
		{"ListByUserAscending", func(t *testing.T) {
			e := s.env(t)
			u := ids.user()
			var all []billing.Period
			for range 3 {
				all = append(all, s.rowsOf(u, ids.subID(), 5)...)
			}
			e.add(shuffled(all)...)
			e.add(s.rowsOf(ids.user(), ids.subID(), 4)...)
			got := e.byUser(u)
			want := slices.Clone(all)
			slices.SortFunc(want, func(a, b billing.Period) int { return a.LastRunDate.Compare(b.LastRunDate) })
			e.requireRows("ListByUser", got, want)
		}},
		{"DuplicateKey", func(t *testing.T) {
			e := s.env(t)
			r := ids.record(ids.user(), day(0), billing.StatusScheduled)
			e.add(r)
			dup := ids.record(r.UserID, day(31), billing.StatusError)
			dup.LastRunDate = r.LastRunDate
			err := e.hist.Add(t.Context(), &dup)
			requireConflict(t, err, billing.ErrAlreadyExists, "history add", r.UserID)
			e.requireRows("ListByUser", e.byUser(r.UserID), []billing.Period{r})
			if rows := e.bySub(dup.SubscriptionID); len(rows) != 0 {
				t.Fatalf("the rejected row is listed under its subscription: %d rows", len(rows))
			}
		}},
		{"SameRunDateOtherUser", func(t *testing.T) {
			e := s.env(t)
			a := ids.record(ids.user(), day(0), billing.StatusScheduled)
			b := ids.record(ids.user(), day(0), billing.StatusScheduled)
			b.LastRunDate = a.LastRunDate
			e.add(a, b)
			e.requireRows("ListByUser a", e.byUser(a.UserID), []billing.Period{a})
			e.requireRows("ListByUser b", e.byUser(b.UserID), []billing.Period{b})
		}},
		{"AddAllSixty", func(t *testing.T) {
			e := s.env(t)
			users := []string{ids.user(), ids.user()}
			subs := []string{ids.subID(), ids.subID(), ids.subID(), ids.subID(), ids.subID(), ids.subID()}
			var all []billing.Period
			for i, sub := range subs {
				all = append(all, s.rowsOf(users[i%2], sub, 10)...)
			}
			if err := e.hist.AddAll(t.Context(), shuffled(all)); err != nil {
				t.Fatalf("AddAll of %d rows: %v", len(all), err)
			}
			for i, sub := range subs {
				e.requireRows("ListBySubscription "+sub, e.bySub(sub), all[i*10:(i+1)*10])
			}
			for _, u := range users {
				if got := e.byUser(u); len(got) != 30 {
					t.Fatalf("user %s has %d rows, want 30", u, len(got))
				}
			}
		}},
		{"AddAllDuplicateWithinCall", func(t *testing.T) {
			e := s.env(t)
			u := ids.user()
			rows := s.rowsOf(u, ids.subID(), 30)
			dup := rows[4].Clone()
			dup.Status = billing.StatusCompleted
			batch := append(slices.Clone(rows), dup)
			if err := e.hist.AddAll(t.Context(), batch); err == nil {
				t.Fatal("AddAll with two rows on one key succeeded")
			}
			if got := e.byUser(u); len(got) != 0 {
				t.Fatalf("%d rows written by a rejected AddAll, want none", len(got))
			}
		}},
		{"AddAllNeverReplaces", func(t *testing.T) {
			// History is append-only: a row already stored is accepted
			// again (a retried batch), another row at its key is refused
			// and named, and the other rows of the batch are written.
			e := s.env(t)
			u := ids.user()
			rows := s.rowsOf(u, ids.subID(), 3)
			e.add(rows[0])
			if err := e.hist.AddAll(t.Context(), rows[:2]); err != nil {
				t.Fatalf("AddAll of a stored row and a new one: %v", err)
			}
			changed := rows[0].Clone()
			changed.Amount = billing.Cents(999)
			err := e.hist.AddAll(t.Context(), []billing.Period{changed, rows[2]})
			var be *billing.BatchError
			if !errors.As(err, &be) || !errors.Is(err, billing.ErrAlreadyExists) || len(be.Unwritten) != 1 || !strings.Contains(be.Unwritten[0], u) {
				t.Fatalf("AddAll of another row at a taken key = %v, want a BatchError naming it, wrapping ErrAlreadyExists", err)
			}
			e.requireRows("ListByUser", e.byUser(u), rows)
		}},
		{"AddAllUnstorableRow", func(t *testing.T) {
			e := s.env(t)
			u := ids.user()
			rows := s.rowsOf(u, ids.subID(), 3)
			noRunDate := ids.record(u, day(1), billing.StatusScheduled)
			noRunDate.LastRunDate = time.Time{}
			inactive := ids.record(u, day(2), billing.StatusInactive)
			for _, bad := range []billing.Period{noRunDate, inactive} {
				if err := e.hist.AddAll(t.Context(), append(slices.Clone(rows), bad)); err == nil {
					t.Fatalf("AddAll with an unstorable row (%s, last_run_date %q) succeeded", bad.Status, layout.LastRunDateKey(&bad))
				}
			}
			if got := e.byUser(u); len(got) != 0 {
				t.Fatalf("%d rows written by rejected AddAlls, want none", len(got))
			}
		}},
		{"AddAllEmpty", func(t *testing.T) {
			e := s.env(t)
			if err := e.hist.AddAll(t.Context(), nil); err != nil {
				t.Fatalf("AddAll(nil): %v", err)
			}
		}},
		{"UnknownIDs", func(t *testing.T) {
			e := s.env(t)
			e.add(ids.record(ids.user(), day(0), billing.StatusScheduled))
			if rows := e.bySub(ids.subID()); len(rows) != 0 {
				t.Fatalf("ListBySubscription of an unknown ID = %d rows", len(rows))
			}
			if rows := e.byUser(ids.user()); len(rows) != 0 {
				t.Fatalf("ListByUser of an unknown user = %d rows", len(rows))
			}
		}},
		{"MissingLastRunDate", func(t *testing.T) {
			e := s.env(t)
			r := ids.record(ids.user(), day(0), billing.StatusScheduled)
			r.LastRunDate = time.Time{}
			if err := e.hist.Add(t.Context(), &r); !errors.Is(err, billing.ErrInvalidItem) {
				t.Fatalf("Add without last_run_date = %v, want ErrInvalidItem", err)
			}
			if rows := e.byUser(r.UserID); len(rows) != 0 {
				t.Fatalf("%d rows written", len(rows))
			}
		}},
		{"DataAndUnknownAttributesRoundTrip", func(t *testing.T) {
			e := s.env(t)
			r := ids.record(ids.user(), day(0), billing.StatusCompleted)
			layout.SetDataAttributes(&r, map[string]av.AttributeValue{
				"data_s":    &av.AttributeValueMemberS{Value: "text"},
				"data_n":    &av.AttributeValueMemberN{Value: "42"},
				"data_bool": &av.AttributeValueMemberBOOL{Value: true},
				"data_list": &av.AttributeValueMemberL{Value: []av.AttributeValue{
					&av.AttributeValueMemberS{Value: "a"}, &av.AttributeValueMemberN{Value: "1"},
				}},
				"data_map": &av.AttributeValueMemberM{Value: map[string]av.AttributeValue{
					"nested": &av.AttributeValueMemberS{Value: "v"},
				}},
			})
			layout.SetExtraAttributes(&r, map[string]av.AttributeValue{"legacy_note": &av.AttributeValueMemberS{Value: "kept"}})
			e.add(r)
			for _, got := range [][]billing.Period{e.bySub(r.SubscriptionID), e.byUser(r.UserID)} {
				if len(got) != 1 {
					t.Fatalf("%d rows, want 1", len(got))
				}
				if !reflect.DeepEqual(layout.DataAttributes(&got[0]), layout.DataAttributes(&r)) {
					t.Fatalf("data_ attributes = %v, want %v", layout.DataAttributes(&got[0]), layout.DataAttributes(&r))
				}
				if !reflect.DeepEqual(layout.ExtraAttributes(&got[0]), layout.ExtraAttributes(&r)) {
					t.Fatalf("unknown attributes = %v, want %v", layout.ExtraAttributes(&got[0]), layout.ExtraAttributes(&r))
				}
			}
		}},
		{"CanceledContext", func(t *testing.T) {
			e := s.env(t)
			r := ids.record(ids.user(), day(0), billing.StatusScheduled)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if err := e.hist.Add(ctx, &r); !errors.Is(err, context.Canceled) {
				t.Fatalf("Add with a cancelled context = %v, want an error wrapping context.Canceled", err)
			}
			if rows := e.byUser(r.UserID); len(rows) != 0 {
				t.Fatalf("%d rows written with a cancelled context", len(rows))
			}
		}},
	}
}
