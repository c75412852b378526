package billingtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/memory"
)

// StoreFactory returns a repository and the history it writes to, on
// fresh, empty tables, configured by opts: page size, status index mode
// and collision policy. [TestRepository] calls it once or twice per
// subtest, from parallel subtests; release resources with t.Cleanup.
type StoreFactory func(t *testing.T, opts memory.Options) (billing.Repository, billing.History)

// TestRepository runs the conformance suite of [billing.Repository] on
// the stores newStores returns. Every subtest calls t.Parallel and uses
// its own stores and user IDs.
//
// The suite asserts only what the interface documents and DynamoDB does:
// adds and updates are transactions with their history rows, conditional
// on the record read (a lost race is a *ConflictError wrapping ErrConflict,
// an add onto a taken key one wrapping ErrAlreadyExists, and nothing is
// written); AdminUpdate moves a record atomically; status pages read at
// most Limit items, continue with opaque cursors that reject tampering,
// and report Scanned and Count as DynamoDB does; AddAll applies the
// collision policy and replaces stored records, except those in flight,
// which it names in its *BatchError, but never a history row: a record
// whose history key holds another row (a record read back and written
// again) moves to the next free last_run_date, and an identical retry
// of a batch writes nothing. It never asserts the order of a page of
// the legacy (hash-only) status index, nor whether the last page of a
// query that ends exactly at the limit carries a cursor (DynamoDB's does,
// moto's does not); a cursor always leads to an empty page or to the rest.
//
// With [SuiteOptions.RawStores] (see [TestRepositoryWith]) it checks too
// that ListByUser and Recent skip an item another program wrote that does
// not decode, return the user's other records (Recent its limit of them)
// and report the item through [billing.WithInvalidItems].
//
// Status queries run in both index modes. Reads through indexes
// (GetByID, QueryStatus) are expected to see writes that completed
// before them, as moto and DynamoDB Local do; DynamoDB itself only
// promises that eventually.
//
// Choices the suite pins down for every implementation, beyond the
// interface comments:
//   - Update and AdminUpdate whose next history row (user_id,
//     last_run_date) exists fail with a *ConflictError wrapping
//     ErrConflict (not ErrAlreadyExists), as does an AdminUpdate onto a
//     taken billing_date.
//   - ConflictError.Op is "add", "update" or "admin update" (AdminUpdate
//     that moves the record), as documented on the type.
//   - Updates that ValidateUpdate rejects return its error (wrapping
//     ErrIllegalTransition or ErrInvalidItem) without writing.
func TestRepository(t *testing.T, newStores StoreFactory) {
	t.Helper()
	TestRepositoryWith(t, newStores, SuiteOptions{})
}

// SuiteOptions adapts [TestRepositoryWith] and [TestHistoryWith] to a
// store whose layout constrains user IDs or status queries.
type SuiteOptions struct {
	// UserID maps each user ID the suite makes ("user-<tag>-<n>") to one
	// the store accepts, e.g. the single table's
	// "<account>#<subscription>#<sku>". Defaults to leaving it as is.
	UserID func(base string) string
	// SeveralOpen says the store keeps several open (SCHEDULED or PAUSED)
	// records of one user ID, as the single table does (an account has
	// several subscriptions): Add does not refuse a second with
	// ErrOpenSubscription, which the suite otherwise requires of the
	// legacy layout's one subscription per user.
	SeveralOpen bool
	// SkipStatusQueries leaves out the QueryStatus group: its cases assume
	// a status index over every billing_date (unbounded ranges, records
	// years apart, read counts of the legacy and sorted index modes). A
	// store that answers status queries another way tests them itself.
	SkipStatusQueries bool
	// RawStores gives the cases about items another program wrote (an
	// undecodable item among a user's records, which the per-user reads
	// skip and report through [billing.WithInvalidItems]) stores they can
	// write such items into. Those cases are skipped when it is nil.
	RawStores RawStoresFunc
}

// TestRepositoryWith is [TestRepository] adapted by opts.
func TestRepositoryWith(t *testing.T, newStores StoreFactory, opts SuiteOptions) {
	t.Helper()
	s := &repoSuite{newStores: newStores, ids: newSuiteIDs(opts), severalOpen: opts.SeveralOpen, raw: opts.RawStores}
	groups := []struct {
		name  string
		cases []repoCase
	}{
		{"Add", s.addCases()},
		{"Read", s.readCases()},
		{"Update", s.updateCases()},
		{"UpdateCreate", s.updateCreateCases()},
		{"AdminUpdate", s.adminUpdateCases()},
		{"SetAttempt", s.attemptCases()},
		{"AddAll", s.addAllCases()},
		{"Invariants", s.invariantCases()},
		{"Reminder", s.reminderCases()},
		{"InvalidItems", s.invalidCases()},
		{"Subscribe", s.subscribeCases()},
		{"Totals", s.totalsCases()},
		{"Proration", s.prorationCases()},
		{"Discounts", s.discountCases()},
		{"Tax", s.taxCases()},
		{"Dunning", s.dunningCases()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t)
				})
			}
		})
	}
	if opts.SkipStatusQueries {
		return
	}
	t.Run("QueryStatus", func(t *testing.T) {
		t.Parallel()
		s.statusQueries(t, dynamostore.StatusIndexLegacy, dynamostore.StatusIndexSorted, dynamostore.StatusIndexDue)
	})
}

// repoCase is one subtest of TestRepository.
type repoCase struct {
	name string
	run  func(t *testing.T)
}

type repoSuite struct {
	newStores   StoreFactory
	ids         *suiteIDs
	severalOpen bool
	raw         RawStoresFunc
}

// repoEnv is a subtest's fresh stores with helpers that fail the test.
type repoEnv struct {
	t    *testing.T
	repo billing.Repository
	hist billing.History
	ids  *suiteIDs
}

func (s *repoSuite) env(t *testing.T, opts memory.Options) *repoEnv {
	t.Helper()
	repo, hist := s.newStores(t, opts)
	if repo == nil || hist == nil {
		t.Fatal("billingtest.TestRepository: the factory returned a nil Repository or History")
	}
	return &repoEnv{t: t, repo: repo, hist: hist, ids: s.ids}
}

// suiteIDs hands out user IDs, subscription IDs and last_run_dates unique
// to one suite run (and increasing), so that subtests never collide.
type suiteIDs struct {
	tag    string
	seq    atomic.Int64
	userID func(string) string
}

func newSuiteIDs(opts SuiteOptions) *suiteIDs {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &suiteIDs{tag: hex.EncodeToString(b), userID: opts.UserID}
}

func (ids *suiteIDs) user() string {
	u := fmt.Sprintf("user-%s-%d", ids.tag, ids.seq.Add(1))
	if ids.userID != nil {
		u = ids.userID(u)
	}
	return u
}

// subID returns a UUID-shaped subscription ID.
func (ids *suiteIDs) subID() string {
	return fmt.Sprintf("%s-0000-4000-8000-%012d", ids.tag, ids.seq.Add(1))
}

// runBase is the first last_run_date handed out.
var runBase = time.Date(2024, 1, 1, 8, 0, 0, 0, time.UTC)

// runDate returns a last_run_date later than every one before it, with a
// fraction that is sometimes zero and sometimes not (5s, 6.1s, …, 14.9s,
// 15s), so that encodings that trim zeros would misorder them.
func (ids *suiteIDs) runDate() time.Time {
	n := ids.seq.Add(1)
	return runBase.Add(time.Duration(n)*time.Second + time.Duration(n%10)*100*time.Millisecond)
}

// second returns a whole second no runDate or second call returns (and
// no runDate falls within).
func (ids *suiteIDs) second() time.Time {
	return runBase.Add(time.Duration(ids.seq.Add(1)) * time.Second)
}

// billingBase is the reference billing date of the suites.
var billingBase = time.Date(2024, 5, 15, 0, 0, 0, 0, time.UTC)

func day(n int) time.Time { return billingBase.AddDate(0, 0, n) }

// record returns a new record of user due on billingDate.
func (ids *suiteIDs) record(user string, billingDate time.Time, status billing.Status) billing.Period {
	run := ids.runDate()
	return billing.Period{
		UserID:          user,
		BillingDate:     billingDate,
		SubscriptionID:  ids.subID(),
		Amount:          billing.Cents(499),
		Status:          status,
		BillingPeriod:   billing.BillingPeriod(billingDate),
		LastRunDate:     run,
		CreatedDate:     run,
		Process:         billing.ProcessInitial,
		Term:            billing.TermMonthly,
		ReceiptTierName: "Plus:v2",
	}
}

// next returns prev moved to status with a later last_run_date.
func (ids *suiteIDs) next(prev billing.Period, status billing.Status) billing.Period {
	n := prev.Clone()
	n.Status = status
	n.LastRunDate = ids.runDate()
	return n
}

func (e *repoEnv) ctx() context.Context { return e.t.Context() }

func (e *repoEnv) add(recs ...billing.Period) {
	e.t.Helper()
	for i := range recs {
		if err := e.repo.Add(e.ctx(), &recs[i]); err != nil {
			e.t.Fatalf("Add(%s): %v", recs[i].Key(), err)
		}
	}
}

func (e *repoEnv) update(prev, next billing.Period) {
	e.t.Helper()
	if err := e.repo.Update(e.ctx(), &prev, &next); err != nil {
		e.t.Fatalf("Update(%s, %s -> %s): %v", prev.Key(), prev.Status, next.Status, err)
	}
}

func (e *repoEnv) get(userID string, billingDate time.Time) billing.Period {
	e.t.Helper()
	got, err := e.repo.Get(e.ctx(), userID, billingDate)
	if err != nil {
		e.t.Fatalf("Get(%s, %s): %v", userID, billingDate.Format(time.RFC3339), err)
	}
	return got
}

// requireStored checks that the record at want's key is want, attribute
// for attribute as the table stores it.
func (e *repoEnv) requireStored(want billing.Period) {
	e.t.Helper()
	got := e.get(want.UserID, want.BillingDate)
	if d := diffStored(&got, &want); d != "" {
		e.t.Fatalf("record %s differs from the one written (got vs want): %s", want.Key(), d)
	}
}

func (e *repoEnv) requireAbsent(userID string, billingDate time.Time) {
	e.t.Helper()
	got, err := e.repo.Get(e.ctx(), userID, billingDate)
	if !errors.Is(err, billing.ErrNotFound) {
		e.t.Fatalf("Get(%s, %s) = %s %s, %v; want ErrNotFound", userID, billingDate.Format(time.RFC3339), got.Key(), got.Status, err)
	}
}

func (e *repoEnv) list(userID string) []billing.Period {
	e.t.Helper()
	got, err := e.repo.ListByUser(e.ctx(), userID)
	if err != nil {
		e.t.Fatalf("ListByUser(%s): %v", userID, err)
	}
	return got
}

func (e *repoEnv) historyRows(userID string) []billing.Period {
	e.t.Helper()
	rows, err := e.hist.ListByUser(e.ctx(), userID)
	if err != nil {
		e.t.Fatalf("History.ListByUser(%s): %v", userID, err)
	}
	return rows
}

func (e *repoEnv) requireHistoryCount(userID string, want int) {
	e.t.Helper()
	if rows := e.historyRows(userID); len(rows) != want {
		e.t.Fatalf("user %s has %d history rows, want %d", userID, len(rows), want)
	}
}

// requireLastHistoryRow checks that the user's newest history row is want,
// data_ attributes included.
func (e *repoEnv) requireLastHistoryRow(want billing.Period) {
	e.t.Helper()
	rows := e.historyRows(want.UserID)
	if len(rows) == 0 {
		e.t.Fatalf("user %s has no history rows", want.UserID)
	}
	last := rows[len(rows)-1]
	if d := diffHistoryRow(&last, &want); d != "" {
		e.t.Fatalf("newest history row of %s differs from the record written (got vs want): %s", want.UserID, d)
	}
}

// requireConflict checks that err is a *ConflictError wrapping sentinel,
// with operation op ("" for any) and naming the user.
func requireConflict(t *testing.T, err, sentinel error, op, userID string) {
	t.Helper()
	var ce *billing.ConflictError
	switch {
	case err == nil:
		t.Fatalf("got no error, want a *ConflictError wrapping %v", sentinel)
	case !errors.Is(err, sentinel):
		t.Fatalf("error %v does not wrap %v", err, sentinel)
	case !errors.As(err, &ce):
		t.Fatalf("error %v is not a *billing.ConflictError", err)
	case op != "" && ce.Op != op:
		t.Fatalf("ConflictError.Op = %q, want %q (error %v)", ce.Op, op, err)
	case !strings.Contains(ce.Key, userID):
		t.Fatalf("ConflictError.Key = %q does not name user %s", ce.Key, userID)
	}
}

// requireRejected checks that err wraps sentinel and is not a conflict.
func requireRejected(t *testing.T, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) || billing.IsConflict(err) {
		t.Fatalf("error = %v, want one wrapping %v (and not a conflict)", err, sentinel)
	}
}

func subIDs(recs []billing.Period) []string {
	out := make([]string, len(recs))
	for i := range recs {
		out[i] = recs[i].SubscriptionID
	}
	return out
}

func sortedIDs(recs []billing.Period) []string {
	out := subIDs(recs)
	slices.Sort(out)
	return out
}
