package billingtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stSuiteOptions maps the suites' users to subscriptions of their own
// accounts, as the DynamoDB store's conformance tests do.
var stSuiteOptions = billingtest.SuiteOptions{
	UserID: func(base string) string {
		return layout.SubscriptionRef{AccountID: base, SubscriptionID: "S1", SKU: "SKU9"}.UserID()
	},
	SkipStatusQueries: true,
	SeveralOpen:       true,
	RawStores: func(t *testing.T) (billing.Repository, billing.History, billingtest.PutRawFunc) {
		s := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{})
		return s.Repository(), s.History(), func(_ context.Context, table string, item map[string]av.AttributeValue) error {
			return s.PutRawItem(table, item)
		}
	},
}

func TestSingleTableRepositorySuite(t *testing.T) {
	billingtest.TestRepositoryWith(t, func(t *testing.T, opts memory.Options) (billing.Repository, billing.History) {
		s := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{PageSize: opts.PageSize, Collisions: opts.Collisions})
		return s.Repository(), s.History()
	}, stSuiteOptions)
}

// TestSingleTableDueQuerySuite: with due shards the twin's status
// queries read the due index and pass the status-query group in the due
// mode, as the legacy table's store does.
func TestSingleTableDueQuerySuite(t *testing.T) {
	billingtest.TestStatusQueriesWith(t, func(t *testing.T, opts memory.Options) (billing.Repository, billing.History) {
		s := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{PageSize: opts.PageSize, Collisions: opts.Collisions,
			Table: dynamostore.SingleTableConfig{DueShards: opts.DueShards}})
		return s.Repository(), s.History()
	}, stSuiteOptions, dynamostore.StatusIndexDue)
}

func TestSingleTableHistorySuite(t *testing.T) {
	billingtest.TestHistoryWith(t, func(t *testing.T) billing.History {
		return billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{}).History()
	}, stSuiteOptions)
}

func TestSingleTableLayoutSuite(t *testing.T) {
	for _, shards := range []int{0, 3} {
		t.Run(fmt.Sprint("DueShards", shards), func(t *testing.T) {
			billingtest.TestSingleTable(t, func(t *testing.T, clock billing.Clock, pageSize int) billingtest.SingleTableStores {
				s := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock, PageSize: pageSize, Table: dynamostore.SingleTableConfig{DueShards: shards}})
				return billingtest.SingleTableStores{Repository: s.Repository(), History: s.History(), Payments: s.Payments()}
			})
		})
	}
}

// stNow is the clock of the twin's own tests.
var stNow = time.Date(2024, 5, 15, 12, 0, 0, 0, time.UTC)

func stDay(n int) time.Time { return time.Date(2024, 5, 15, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n) }

// stRecord is a period of ref; n makes its IDs and last_run_date unique.
func stRecord(ref layout.SubscriptionRef, n int, billingDate time.Time, st billing.Status) billing.Period {
	run := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Minute)
	return billing.Period{
		UserID: ref.UserID(), BillingDate: billingDate, SubscriptionID: fmt.Sprintf("period-%d", n),
		Amount: billing.Cents(499), Status: st, BillingPeriod: billing.BillingPeriod(billingDate),
		LastRunDate: run, CreatedDate: run, Process: billing.ProcessInitial, Term: billing.TermMonthly,
	}
}

// stNext is prev rewritten in status st by run n.
func stNext(prev billing.Period, n int, st billing.Status) billing.Period {
	next := prev.Clone()
	next.Status = st
	next.LastRunDate = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Minute)
	return next
}

func TestSingleTableDefaults(t *testing.T) {
	s := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{})
	ref := layout.SubscriptionRef{AccountID: "acct", SubscriptionID: "sub", SKU: "STREAM"}
	r := stRecord(ref, 1, time.Date(2024, 1, 20, 9, 0, 0, 0, time.UTC), billing.StatusScheduled)
	require.NoError(t, s.Repository().Add(t.Context(), &r))
	sub, err := s.Payments().GetSubscription(t.Context(), ref.AccountID, ref.SubscriptionID, ref.SKU)
	want := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, err, "subscription item")
	require.True(t, sub.CreatedAt.Equal(want), "subscription item = %+v; want created and updated at %v (the default clock), version 1", sub, want)
	require.True(t, sub.UpdatedAt.Equal(want), "subscription item = %+v; want created and updated at %v (the default clock), version 1", sub, want)
	require.Equal(t, 1, sub.Version, "subscription item = %+v; want version 1", sub)
	require.True(t, sub.NextReminderDate.Equal(stDayOf(r.BillingDate).AddDate(0, 0, -billing.NoticeLeadDays)),
		"NextReminderDate = %v; want the default lead before %v", sub.NextReminderDate, r.BillingDate)
	// The open end of a status query is the day after the default clock's.
	p, err := s.Repository().QueryStatus(t.Context(), billing.StatusQuery{Status: billing.StatusScheduled})
	require.NoError(t, err, "open-ended query at the default clock")
	require.Empty(t, p.Items, "open-ended query at the default clock = %+v; want nothing (the period is later)", p)
	for _, o := range []memory.SingleTableOptions{{PageSize: -1}, {CatchUpDays: -1}, {ReminderLeadDays: -1}, {ReceiptRetention: -1},
		{Table: dynamostore.SingleTableConfig{AccountPrefix: "PER"}}} {
		s, err := memory.NewSingleTable(o)
		require.Error(t, err, "NewSingleTable(%+v)", o)
		require.Nil(t, s, "NewSingleTable(%+v)", o)
	}
}

func stDayOf(t time.Time) time.Time { return entitlement.PaymentDate(t) }

// stEnv is a twin with helpers that fail the test.
type stEnv struct {
	t     *testing.T
	clock *billingtest.Clock
	st    *memory.SingleTable
	repo  billing.Repository
	hist  billing.History
	pay   entitlement.Payments
}

func newSTEnv(t *testing.T, opts memory.SingleTableOptions) *stEnv {
	clock := billingtest.NewClock(stNow)
	if opts.Clock == nil {
		opts.Clock = clock
	}
	s := billingtest.NewMemorySingleTable(t, opts)
	return &stEnv{t: t, clock: clock, st: s, repo: s.Repository(), hist: s.History(), pay: s.Payments()}
}

func (e *stEnv) add(recs ...billing.Period) {
	e.t.Helper()
	for i := range recs {
		require.NoError(e.t, e.repo.Add(e.t.Context(), &recs[i]), "Add(%s)", recs[i].Key())
	}
}

func (e *stEnv) sub(ref layout.SubscriptionRef) entitlement.RecurringSubscription {
	e.t.Helper()
	s, err := e.pay.GetSubscription(e.t.Context(), ref.AccountID, ref.SubscriptionID, ref.SKU)
	require.NoError(e.t, err, "GetSubscription(%s)", ref.UserID())
	return s
}

func (e *stEnv) receipts(account string) []entitlement.Receipt {
	e.t.Helper()
	recs, err := e.pay.ReceiptsByAccount(e.t.Context(), account, time.Time{})
	require.NoError(e.t, err, "ReceiptsByAccount(%s)", account)
	return recs
}

func (e *stEnv) historyCount(ref layout.SubscriptionRef) int {
	e.t.Helper()
	rows, err := e.hist.ListByUser(e.t.Context(), ref.UserID())
	require.NoError(e.t, err, "history of %s", ref.UserID())
	return len(rows)
}

// TestSingleTableReceiptKeys: a receipt whose key another subscription's
// receipt holds moves on by a nanosecond, up to 8 times; past that the
// update writes nothing, and a failed condition of the period itself is
// reported first, as in the DynamoDB transaction.
func TestSingleTableReceiptKeys(t *testing.T) {
	e := newSTEnv(t, memory.SingleTableOptions{})
	ctx := t.Context()
	a := layout.SubscriptionRef{AccountID: "acct", SubscriptionID: "subA", SKU: "STREAM"}
	b := layout.SubscriptionRef{AccountID: "acct", SubscriptionID: "subB", SKU: "STREAM"} // same receipt partition and SKU
	c := layout.SubscriptionRef{AccountID: "acct", SubscriptionID: "subC", SKU: "STREAM"}
	ra, rb, rc := stRecord(a, 1, stDay(-1), billing.StatusScheduled), stRecord(b, 2, stDay(-1), billing.StatusScheduled),
		stRecord(c, 3, stDay(-1), billing.StatusScheduled)
	e.add(ra, rb, rc)
	paidAt := stDay(-1).Add(10 * time.Hour)
	da := stNext(ra, 4, billing.StatusCompleted)
	da.CompletionDate, da.TransactionID = paidAt, "tx-a"
	require.NoError(t, e.repo.Update(ctx, &ra, &da))
	db := stNext(rb, 5, billing.StatusCompleted)
	db.CompletionDate, db.TransactionID = paidAt, "tx-b"
	require.NoError(t, e.repo.Update(ctx, &rb, &db), "Update completing at a taken receipt key")
	recs := e.receipts("acct")
	require.Len(t, recs, 2, "receipts = %+v; want b's a nanosecond after a's", recs)
	require.True(t, recs[0].ProcessedDate.Equal(paidAt.Add(time.Nanosecond)), "receipts = %+v; want b's a nanosecond after a's", recs)
	require.Equal(t, b.SubscriptionID, recs[0].SubscriptionID, "receipts = %+v; want b's a nanosecond after a's", recs)

	// Every key up to 8 ns later taken: nothing is written.
	for i := 2; i <= stMaxReceiptMoves; i++ {
		_, err := e.pay.CreateReceipt(ctx, entitlement.Receipt{AccountID: "acct", SubscriptionID: "other", SKU: "STREAM",
			ProcessedDate: paidAt.Add(time.Duration(i) * time.Nanosecond), ProcessedAmount: 1})
		require.NoError(t, err)
	}
	before, beforeRows := e.sub(c), e.historyCount(c)
	dc := stNext(rc, 6, billing.StatusCompleted)
	dc.CompletionDate, dc.TransactionID = paidAt, "tx-c"
	next := stRecord(c, 7, stDay(30), billing.StatusScheduled)
	err := e.repo.Update(ctx, &rc, &dc, &next)
	var ce *billing.ConflictError
	require.ErrorAs(t, err, &ce, "Update with no free receipt key; want a *ConflictError wrapping ErrAlreadyExists")
	require.ErrorIs(t, err, billing.ErrAlreadyExists, "Update with no free receipt key; want a *ConflictError wrapping ErrAlreadyExists")
	require.Equal(t, "update", ce.Op, "Update with no free receipt key = %v", err)
	require.False(t, ce.HistoryRow, "Update with no free receipt key = %v", err)
	got, err := e.repo.Get(ctx, c.UserID(), rc.BillingDate)
	require.NoError(t, err, "period after the failed update")
	require.Equal(t, billing.StatusScheduled, got.Status, "period after the failed update; want still SCHEDULED")
	_, err = e.repo.Get(ctx, c.UserID(), next.BillingDate)
	require.ErrorIs(t, err, billing.ErrNotFound, "record to create after the failed update")
	require.Equal(t, before, e.sub(c), "failed update changed the subscription")
	require.Equal(t, beforeRows, e.historyCount(c), "failed update changed the history rows")
	require.Len(t, e.receipts("acct"), stMaxReceiptMoves+1, "failed update changed the receipts")

	// The same update from a stale read: the period's condition first.
	stale := rc
	stale.Status = billing.StatusError
	dc2 := stNext(stale, 8, billing.StatusCompleted)
	dc2.CompletionDate, dc2.TransactionID = paidAt, "tx-c"
	require.ErrorIs(t, e.repo.Update(ctx, &stale, &dc2), billing.ErrConflict, "stale Update with no free receipt key")
	// A history row taken by next: also before the receipt.
	row := stNext(rc, 9, billing.StatusCompleted)
	require.NoError(t, e.hist.Add(ctx, &row))
	row.CompletionDate, row.TransactionID = paidAt, "tx-c"
	err = e.repo.Update(ctx, &rc, &row)
	require.ErrorAs(t, err, &ce, "Update with a taken history row and no free receipt key; want the history row's ErrConflict")
	require.True(t, ce.HistoryRow, "Update with a taken history row and no free receipt key = %v; want the history row's ErrConflict", err)
	require.ErrorIs(t, err, billing.ErrConflict, "Update with a taken history row and no free receipt key; want the history row's ErrConflict")
	// Its own receipt replayed at the first key: idempotent.
	_, err = e.pay.CreateReceipt(ctx, entitlement.Receipt{AccountID: "acct", SubscriptionID: c.SubscriptionID, SKU: "STREAM",
		ProcessedDate: paidAt.Add(-time.Second), ProcessedAmount: dc.Amount, TransactionID: "tx-c"})
	require.NoError(t, err)
	dc.CompletionDate = paidAt.Add(-time.Second)
	require.NoError(t, e.repo.Update(ctx, &rc, &dc), "Update whose receipt is already stored")
	require.Len(t, e.receipts("acct"), stMaxReceiptMoves+2, "receipts")
}

// stMaxReceiptMoves is how far (in nanoseconds) the DynamoDB store moves
// a receipt whose key is taken.
const stMaxReceiptMoves = 8

// TestSingleTableAdminMoveCompletes: a move that completes the period
// writes its receipt and leaves no open period at the old key.
func TestSingleTableAdminMoveCompletes(t *testing.T) {
	e := newSTEnv(t, memory.SingleTableOptions{})
	ctx := t.Context()
	ref := layout.SubscriptionRef{AccountID: "acct", SubscriptionID: "sub", SKU: "STREAM"}
	r := stRecord(ref, 1, stDay(2), billing.StatusScheduled)
	e.add(r)
	moved := stNext(r, 2, billing.StatusCompleted)
	moved.BillingDate, moved.CompletionDate = stDay(3), stDay(1).Add(time.Hour)
	require.NoError(t, e.repo.AdminUpdate(ctx, &r, &moved))
	sub := e.sub(ref)
	require.True(t, sub.NextPaymentDate.IsZero(), "subscription after a completing move = %+v; want nothing due, paid %v, version 2", sub, stDay(1))
	require.True(t, sub.NextReminderDate.IsZero(), "subscription after a completing move = %+v; want nothing due, paid %v, version 2", sub, stDay(1))
	require.True(t, sub.LastPaymentDate.Equal(stDay(1)), "subscription after a completing move = %+v; want nothing due, paid %v, version 2", sub, stDay(1))
	require.Equal(t, 2, sub.Version, "subscription after a completing move = %+v; want nothing due, paid %v, version 2", sub, stDay(1))
	recs := e.receipts("acct")
	require.Len(t, recs, 1, "receipts = %+v; want one at %v", recs, moved.CompletionDate)
	require.True(t, recs[0].ProcessedDate.Equal(moved.CompletionDate), "receipts = %+v; want one at %v", recs, moved.CompletionDate)
	// The subscription item's CreatedAt and Email survive engine writes;
	// an update through Payments is kept too.
	sub.Email = "a@example.com"
	_, err := e.pay.UpdateSubscription(ctx, sub, sub)
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	r2 := stRecord(ref, 3, stDay(33), billing.StatusScheduled)
	e.add(r2)
	after := e.sub(ref)
	require.Equal(t, "a@example.com", after.Email, "subscription after another period = %+v", after)
	require.True(t, after.CreatedAt.Equal(sub.CreatedAt), "subscription after another period = %+v", after)
	require.Equal(t, 4, after.Version, "subscription after another period = %+v", after)
	require.True(t, after.UpdatedAt.Equal(stNow.Add(time.Hour)), "subscription after another period = %+v", after)
	require.True(t, after.NextPaymentDate.Equal(stDay(33)), "subscription after another period = %+v", after)
}

// TestSingleTableAddAllGroups: AddAll writes one subscription's records in
// groups of 8, each with its subscription item; a group the DynamoDB
// transaction would reject is reported alone.
func TestSingleTableAddAllGroups(t *testing.T) {
	var bad bool
	policy := func(subs []billing.Period) ([]billing.Period, error) {
		out := make([]billing.Period, len(subs))
		for i := range subs {
			out[i] = subs[i].Clone()
		}
		if bad { // leave two records of the second group on one key
			out[9].BillingDate = out[10].BillingDate
		}
		return out, nil
	}
	e := newSTEnv(t, memory.SingleTableOptions{Collisions: policy})
	ctx := t.Context()
	ref := layout.SubscriptionRef{AccountID: "acct", SubscriptionID: "sub", SKU: "STREAM"}
	other := layout.SubscriptionRef{AccountID: "acct2", SubscriptionID: "sub", SKU: "STREAM"}
	var recs []billing.Period
	for i := range 20 {
		recs = append(recs, stRecord(ref, i, stDay(31*i), billing.StatusScheduled))
	}
	recs = append(recs, stRecord(other, 100, stDay(1), billing.StatusScheduled))
	written, err := e.repo.AddAll(ctx, recs)
	require.NoError(t, err, "AddAll")
	require.Len(t, written, len(recs), "AddAll")
	sub := e.sub(ref)
	require.Equal(t, 3, sub.Version, "subscription after 20 records; want 3 writes (groups of 8)")
	require.True(t, sub.NextPaymentDate.Equal(stDay(0)), "subscription after 20 records = due %v; want due %v", sub.NextPaymentDate, stDay(0))

	e2 := newSTEnv(t, memory.SingleTableOptions{Collisions: policy})
	bad = true
	written, err = e2.repo.AddAll(ctx, recs)
	var be *billing.BatchError
	require.ErrorAs(t, err, &be, "AddAll with a duplicate key in one group; want a BatchError naming that group's 8")
	require.Len(t, be.Unwritten, 8, "AddAll with a duplicate key in one group; want a BatchError naming that group's 8")
	require.Len(t, written, len(recs), "AddAll with a duplicate key in one group")
	got, _ := e2.repo.ListByUser(ctx, ref.UserID())
	require.Len(t, got, 12, "records written; want the other groups' 12")
	require.Equal(t, 12, e2.historyCount(ref), "history rows written; want the other groups' 12")
	require.Equal(t, 2, e2.sub(ref).Version, "subscription version; want 2 (two groups written)")
}

// TestSingleTableGetByIDPointers: GetByID follows the period-ID pointers,
// also when a history batch pointed one at another billing date.
func TestSingleTableGetByIDPointers(t *testing.T) {
	e := newSTEnv(t, memory.SingleTableOptions{})
	ctx := t.Context()
	ref := layout.SubscriptionRef{AccountID: "acct", SubscriptionID: "sub", SKU: "STREAM"}
	r := stRecord(ref, 1, stDay(5), billing.StatusScheduled)
	e.add(r)
	row := stRecord(ref, 2, stDay(9), billing.StatusScheduled)
	row.SubscriptionID = r.SubscriptionID
	require.NoError(t, e.hist.AddAll(ctx, []billing.Period{row}))
	got, err := e.repo.GetByID(ctx, r.SubscriptionID)
	require.NoError(t, err, "GetByID")
	require.True(t, got.BillingDate.Equal(stDay(5)), "GetByID = %v; want the period at %v", got.BillingDate, stDay(5))
	rows, err := e.hist.ListBySubscription(ctx, r.SubscriptionID)
	require.NoError(t, err, "ListBySubscription")
	require.Len(t, rows, 2, "ListBySubscription")
	for _, id := range []string{"", "nope"} {
		_, err := e.repo.GetByID(ctx, id)
		assert.ErrorIs(t, err, billing.ErrNotFound, "GetByID(%q)", id)
	}
	// Only a history row: the pointer is there, the period is not.
	lone := stRecord(ref, 3, stDay(40), billing.StatusScheduled)
	require.NoError(t, e.hist.Add(ctx, &lone))
	_, err = e.repo.GetByID(ctx, lone.SubscriptionID)
	require.ErrorIs(t, err, billing.ErrNotFound, "GetByID of a history-only ID")
	_, err = e.repo.Get(ctx, "not-a-ref", stDay(5))
	require.ErrorIs(t, err, billing.ErrNotFound, "Get of another user ID")
	others, err := e.repo.ListByUser(ctx, "not-a-ref")
	require.NoError(t, err, "ListByUser of another user ID")
	require.Nil(t, others, "ListByUser of another user ID; want nothing")
}

// TestSingleTableRejectsUserIDs: every write path rejects user IDs that
// are not subscription references, before writing anything.
func TestSingleTableRejectsUserIDs(t *testing.T) {
	e := newSTEnv(t, memory.SingleTableOptions{})
	ctx := t.Context()
	ref := layout.SubscriptionRef{AccountID: "acct", SubscriptionID: "sub", SKU: "STREAM"}
	r := stRecord(ref, 1, stDay(5), billing.StatusScheduled)
	e.add(r)
	plain := r
	plain.UserID, plain.SubscriptionID = "plain", "other"
	next := stNext(r, 2, billing.StatusError)
	checks := map[string]error{
		"AddAll": func() error {
			_, err := e.repo.AddAll(ctx, []billing.Period{stRecord(ref, 3, stDay(40), billing.StatusScheduled), plain})
			return err
		}(),
		"UpdateCreate":  e.repo.Update(ctx, &r, &next, &plain),
		"HistoryAddAll": e.hist.AddAll(ctx, []billing.Period{plain}),
		"HistoryAdd":    e.hist.Add(ctx, &plain),
	}
	for name, err := range checks {
		assert.ErrorIs(t, err, entitlement.ErrInvalidPayment, "%s with user ID %q = %v; want ErrInvalidPayment", name, plain.UserID, err)
	}
	left, _ := e.repo.ListByUser(ctx, ref.UserID())
	require.Len(t, left, 1, "records after rejected writes = %+v", left)
	require.Equal(t, billing.StatusScheduled, left[0].Status, "records after rejected writes = %+v", left)
	require.Equal(t, 1, e.historyCount(ref), "history rows after rejected writes")
}

// TestSingleTableStatusPages checks the walk's paging: Limit counts index
// items, a cursor at a full page even when nothing remains, Scanned
// counts index items and periods read, empty stretches end pages.
func TestSingleTableStatusPages(t *testing.T) {
	e := newSTEnv(t, memory.SingleTableOptions{PageSize: 2, CatchUpDays: 70})
	ctx := t.Context()
	var want []billing.Period
	for i := range 3 {
		ref := layout.SubscriptionRef{AccountID: fmt.Sprintf("acct%d", i), SubscriptionID: "sub", SKU: "STREAM"}
		r := stRecord(ref, i, stDay(-2).Add(time.Duration(i)*time.Hour), billing.StatusScheduled)
		later := stRecord(ref, 10+i, stDay(20), billing.StatusScheduled) // not due before now
		e.add(r, later)
		want = append(want, r)
	}
	q := billing.StatusQuery{Status: billing.StatusScheduled, Before: stNow}
	var pages []billing.Page
	for {
		p, err := e.repo.QueryStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, len(p.Items)+len(p.Invalid), p.Count, "Count %d for %d items", p.Count, len(p.Items))
		pages = append(pages, p)
		if q.Cursor = p.Next; q.Cursor == "" {
			break
		}
	}
	// From the catch-up start (70 days back): the first page ends after
	// 62 empty days, the second with the full page of two index items (2
	// × 2 periods read, the later ones outside the range), the third with
	// the day's last item, the fourth with the two empty days left.
	var items []billing.Period
	scanned := 0
	for _, p := range pages {
		items = append(items, p.Items...)
		scanned += p.Scanned
	}
	require.Len(t, items, 3, "%d items, %d scanned over %d pages; want 3 and 6 (3 index items, 3 periods in the range)", len(items), scanned, len(pages))
	require.Equal(t, 3+3, scanned, "%d items, %d scanned over %d pages; want 3 and 6 (3 index items, 3 periods in the range)", len(items), scanned, len(pages))
	for i := range want {
		require.Equal(t, want[i].SubscriptionID, items[i].SubscriptionID, "item %d is %s; want %s (index order)", i, items[i].SubscriptionID, want[i].SubscriptionID)
	}
	require.Len(t, pages, 4, "%d pages, the first %+v; want 4, the first 62 empty days and a cursor", len(pages), pages[0])
	require.Zero(t, pages[0].Scanned, "%d pages, the first %+v; want 4, the first 62 empty days and a cursor", len(pages), pages[0])
	require.NotEmpty(t, pages[0].Next, "%d pages, the first %+v; want 4, the first 62 empty days and a cursor", len(pages), pages[0])
	full := pages[1]
	require.Len(t, full.Items, 2, "second page = %d items, %d scanned, next %q; want the two index items of a day and a cursor", len(full.Items), full.Scanned, full.Next)
	require.Equal(t, 4, full.Scanned, "second page = %d items, %d scanned, next %q; want the two index items of a day and a cursor", len(full.Items), full.Scanned, full.Next)
	require.NotEmpty(t, full.Next, "second page = %d items, %d scanned, next %q; want the two index items of a day and a cursor", len(full.Items), full.Scanned, full.Next)

	// Limit 1 reaches the limit on a day with one item left: the cursor
	// stays on that day, the next page finds nothing there and goes on.
	q = billing.StatusQuery{Status: billing.StatusScheduled, Since: stDay(-2), Before: stNow, Limit: 1}
	var got []billing.Period
	for n := 0; ; n++ {
		p, err := e.repo.QueryStatus(ctx, q)
		require.NoError(t, err, "page %d", n)
		require.LessOrEqual(t, n, 200, "page %d", n)
		require.LessOrEqual(t, p.Scanned, 2, "page %d read %d items with Limit 1", n, p.Scanned)
		got = append(got, p.Items...)
		if q.Cursor = p.Next; q.Cursor == "" {
			break
		}
	}
	require.Len(t, got, 3, "Limit 1: %d items; want 3", len(got))

	for name, bad := range map[string]billing.StatusQuery{
		"Garbage":    {Status: billing.StatusScheduled, Before: stNow, Cursor: "x"},
		"OtherQuery": {Status: billing.StatusError, Before: stNow, Cursor: pages[0].Next},
	} {
		_, err := e.repo.QueryStatus(ctx, bad)
		assert.ErrorIs(t, err, billing.ErrInvalidCursor, name)
	}
	_, err := e.repo.QueryStatus(ctx, billing.StatusQuery{Status: "NOPE"})
	assert.ErrorIs(t, err, billing.ErrInvalidQuery, "invalid query")
}

// TestSingleTableConcurrent races engine writes, Payments writes and
// status queries; every write is atomic, so the subscription item always
// matches its periods. Run under -race.
func TestSingleTableConcurrent(t *testing.T) {
	e := newSTEnv(t, memory.SingleTableOptions{PageSize: 3})
	ctx := t.Context()
	var refs []layout.SubscriptionRef
	var firsts []billing.Period
	for i := range 6 {
		ref := layout.SubscriptionRef{AccountID: fmt.Sprintf("acct%d", i%2), SubscriptionID: fmt.Sprintf("sub%d", i), SKU: "STREAM"}
		r := stRecord(ref, i, stDay(-1), billing.StatusScheduled)
		e.add(r)
		refs, firsts = append(refs, ref), append(firsts, r)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[string]int{}
	for w := range 8 {
		wg.Go(func() {
			for i, r := range firsts {
				done := stNext(r, 1000+w*10+i, billing.StatusCompleted)
				done.CompletionDate, done.TransactionID = stDay(-1).Add(time.Duration(w+1)*time.Minute), fmt.Sprintf("tx-%d", w)
				next := stRecord(refs[i], 2000+w*10+i, stDay(30), billing.StatusScheduled)
				err := e.repo.Update(ctx, &r, &done, &next)
				if err == nil {
					mu.Lock()
					wins[r.UserID]++
					mu.Unlock()
				} else if !billing.IsConflict(err) {
					t.Errorf("Update: %v", err)
				}
				if s, err := e.pay.GetSubscription(ctx, refs[i].AccountID, refs[i].SubscriptionID, refs[i].SKU); err == nil {
					s.Email = fmt.Sprintf("w%d@example.com", w)
					if _, err := e.pay.UpdateSubscription(ctx, s, s); err != nil && !errors.Is(err, billing.ErrConflict) {
						t.Errorf("UpdateSubscription: %v", err)
					}
				}
				_, err = e.repo.QueryStatus(ctx, billing.StatusQuery{Status: billing.StatusScheduled, Before: stNow})
				assert.NoError(t, err, "QueryStatus")
			}
		})
	}
	wg.Wait()
	for i, ref := range refs {
		require.Equal(t, 1, wins[ref.UserID()], "%s: %d winning updates; want 1", ref.UserID(), wins[ref.UserID()])
		periods, err := e.repo.ListByUser(ctx, ref.UserID())
		require.NoError(t, err, "%s: periods", ref.UserID())
		require.Len(t, periods, 2, "%s: periods", ref.UserID())
		sub := e.sub(ref)
		require.True(t, sub.NextPaymentDate.Equal(stDay(30)), "%s: subscription %+v; want due %v, paid %v", ref.UserID(), sub, stDay(30), stDay(-1))
		require.True(t, sub.LastPaymentDate.Equal(stDay(-1)), "%s: subscription %+v; want due %v, paid %v", ref.UserID(), sub, stDay(30), stDay(-1))
		require.Len(t, e.receipts(ref.AccountID), 3, "account %s: receipts; want one per subscription (3) [%d]", ref.AccountID, i)
	}
}

// TestSingleTableMatchesDynamo runs one script of writes and reads on
// billing.SingleTableRepository (on the local DynamoDB-compatible server,
// skipped without one unless CI=true) and on the twin, with one clock,
// and requires the same outcomes: errors by kind, records, history,
// subscription items, receipts, and status queries (their items in order
// and their Scanned totals: page breaks may differ, because moto, unlike
// DynamoDB and the twin, gives no cursor when a query stops exactly at
// its Limit).
// It runs twice: walking the payment index, and with due shards, reading
// the due index.
func TestSingleTableMatchesDynamo(t *testing.T) {
	if testing.Short() {
		t.Skip("a DynamoDB-compatible server: not in -short")
	}
	t.Parallel()
	for _, shards := range []int{0, 3} {
		t.Run(fmt.Sprint("DueShards", shards), func(t *testing.T) {
			t.Parallel()
			singleTableMatchesDynamo(t, shards)
		})
	}
}

func singleTableMatchesDynamo(t *testing.T, shards int) {
	client := dynamotest.Client(t)
	table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL", DueShards: shards}
	dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(table))
	wrapped := dynamotest.Wrap(client)
	t.Cleanup(func() { wrapped.AssertNoViolations(t) })
	clock := billingtest.NewClock(stNow)
	dyn, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: wrapped, Table: table, Clock: clock, PageSize: 2})
	require.NoError(t, err)
	twin := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock, PageSize: 2, Table: table})
	stores := []billingtest.SingleTableStores{
		{Repository: dyn, History: dyn.History(), Payments: dyn.Payments()},
		{Repository: twin.Repository(), History: twin.History(), Payments: twin.Payments()},
	}
	ctx := t.Context()
	step := func(name string, op func(s billingtest.SingleTableStores) (any, error)) {
		t.Helper()
		var got [2]string
		var errs [2]error
		for i, s := range stores {
			v, err := op(s)
			got[i], errs[i] = fmt.Sprintf("%+v", v), err
		}
		if errKind(errs[0]) != errKind(errs[1]) || got[0] != got[1] {
			t.Errorf("%s:\n\tdynamo: %s %s\n\ttwin:   %s %s", name, errKind(errs[0]), got[0], errKind(errs[1]), got[1])
		} else if fmt.Sprint(errs[0]) != fmt.Sprint(errs[1]) {
			t.Logf("%s: messages differ:\n\tdynamo: %v\n\ttwin:   %v", name, errs[0], errs[1])
		}
	}
	write := func(name string, op func(s billingtest.SingleTableStores) error) {
		t.Helper()
		step(name, func(s billingtest.SingleTableStores) (any, error) { return nil, op(s) })
	}

	a := layout.SubscriptionRef{AccountID: "a1", SubscriptionID: "subA", SKU: "STREAM"}
	b := layout.SubscriptionRef{AccountID: "a1", SubscriptionID: "subB", SKU: "STREAM"} // a's receipt partition and SKU
	c := layout.SubscriptionRef{AccountID: "a1", SubscriptionID: "subC", SKU: "MUSIC"}
	d := layout.SubscriptionRef{AccountID: "a2", SubscriptionID: "subD", SKU: "STREAM"}
	refs := []layout.SubscriptionRef{a, b, c, d}
	ids := map[string]bool{}
	rec := func(ref layout.SubscriptionRef, n int, bd time.Time, st billing.Status) billing.Period {
		r := stRecord(ref, n, bd, st)
		ids[r.SubscriptionID] = true
		return r
	}
	add := func(r billing.Period) {
		t.Helper()
		write("Add "+r.Key(), func(s billingtest.SingleTableStores) error { return s.Repository.Add(ctx, &r) })
	}
	update := func(name string, prev, next billing.Period, create ...billing.Period) {
		t.Helper()
		write(name, func(s billingtest.SingleTableStores) error {
			ptrs := make([]*billing.Period, len(create))
			for i := range create {
				c := create[i].Clone()
				ptrs[i] = &c
			}
			return s.Repository.Update(ctx, &prev, &next, ptrs...)
		})
	}
	admin := func(name string, prev, next billing.Period) {
		t.Helper()
		write(name, func(s billingtest.SingleTableStores) error { return s.Repository.AdminUpdate(ctx, &prev, &next) })
	}

	step("CreateSubscription d", func(s billingtest.SingleTableStores) (any, error) {
		return s.Payments.CreateSubscription(ctx, entitlement.RecurringSubscription{AccountID: d.AccountID, SubscriptionID: d.SubscriptionID, SKU: d.SKU,
			Email: "d@example.com", PaymentDay: 5, PaymentAmount: billing.Cents(999), PaymentDetails: "tok"})
	})
	paidAt := stDay(-3).Add(10*time.Hour + 123*time.Millisecond)
	p1 := rec(a, 1, stDay(-3).Add(9*time.Hour), billing.StatusScheduled)
	q1 := rec(b, 2, stDay(-3).Add(9*time.Hour), billing.StatusScheduled)
	c1 := rec(c, 3, stDay(5), billing.StatusPaused)
	d1 := rec(d, 4, stDay(-1), billing.StatusScheduled)
	d1.AnchorDay = 31
	for _, r := range []billing.Period{p1, p1, q1, c1, d1} {
		add(r)
	}
	plain := rec(a, 5, stDay(1), billing.StatusScheduled)
	plain.UserID = "plain"
	add(plain)
	clock.Advance(time.Hour)

	p1e := stNext(p1, 6, billing.StatusError)
	p2 := rec(a, 7, stDay(28).Add(9*time.Hour), billing.StatusScheduled)
	update("fail p1, open p2", p1, p1e, p2)
	update("stale p1", p1, stNext(p1, 8, billing.StatusCompleted))
	p1c := stNext(p1e, 9, billing.StatusCompleted)
	p1c.CompletionDate, p1c.TransactionID = paidAt, "t1"
	update("pay p1", p1e, p1c)
	q1c := stNext(q1, 10, billing.StatusCompleted)
	q1c.CompletionDate, q1c.TransactionID = paidAt, "t2"
	update("pay q1 onto a's receipt key", q1, q1c)
	staleQ := q1
	staleQ.Status = billing.StatusError
	update("pay q1 from a stale read onto a's receipt key", staleQ, stNext(q1c, 11, billing.StatusCompleted))
	q1c.CompletionDate = paidAt.Add(time.Second)
	update("pay q1", q1, q1c)
	update("replay q1's payment", q1, q1c)
	update("note on p1", p1c, stNext(p1c, 12, billing.StatusCompleted))
	q1w := stNext(q1, 13, billing.StatusWaived)
	update("waive completed q1 (illegal)", q1c, q1w)
	// Every receipt key a third payment at paidAt could move to is taken.
	e := layout.SubscriptionRef{AccountID: "a1", SubscriptionID: "subE", SKU: "STREAM"}
	refs = append(refs, e)
	for i := 2; i <= stMaxReceiptMoves; i++ {
		step(fmt.Sprint("CreateReceipt +", i, "ns"), func(s billingtest.SingleTableStores) (any, error) {
			return s.Payments.CreateReceipt(ctx, entitlement.Receipt{AccountID: "a1", SubscriptionID: "other", SKU: "STREAM",
				ProcessedDate: paidAt.Add(time.Duration(i) * time.Nanosecond), ProcessedAmount: 1})
		})
	}
	e1 := rec(e, 31, stDay(-2), billing.StatusScheduled)
	add(e1)
	e1c := stNext(e1, 32, billing.StatusCompleted)
	e1c.CompletionDate, e1c.TransactionID = paidAt, "t3"
	update("pay e1 with no free receipt key", e1, e1c, rec(e, 33, stDay(28), billing.StatusScheduled))
	staleE := e1
	staleE.Status = billing.StatusError
	update("pay e1 from a stale read with no free receipt key", staleE, stNext(e1c, 34, billing.StatusCompleted))
	e1c.CompletionDate = paidAt.Add(-time.Nanosecond)
	update("pay e1", e1, e1c)
	clock.Advance(time.Hour)

	c1m := stNext(c1, 14, billing.StatusPaused)
	c1m.BillingDate = stDay(7)
	admin("move c1", c1, c1m)
	c2 := rec(c, 15, stDay(9), billing.StatusScheduled)
	add(c2)
	c2m := stNext(c2, 16, billing.StatusScheduled)
	c2m.BillingDate = stDay(7)
	admin("move c2 onto c1", c2, c2m)
	admin("admin update in place", c1m, stNext(c1m, 17, billing.StatusPausedSkipped))
	c2d := stNext(c2, 18, billing.StatusCompleted)
	c2d.BillingDate, c2d.CompletionDate = stDay(10), stDay(8).Add(time.Hour)
	admin("move and complete c2", c2, c2d)

	// Updates creating records of other subscriptions, and bad creates.
	p2e := stNext(p2, 19, billing.StatusError)
	d2 := rec(d, 20, stDay(40), billing.StatusScheduled)
	update("fail p2, create d2", p2, p2e, d2)
	bad := rec(a, 21, stDay(28).Add(9*time.Hour), billing.StatusScheduled)
	update("create onto prev's key", p2e, stNext(p2e, 22, billing.StatusError), bad)
	many := make([]billing.Period, billing.MaxUpdateCreates+1)
	for i := range many {
		many[i] = rec(a, 100+i, stDay(60+i), billing.StatusScheduled)
	}
	update("too many creates", p2e, stNext(p2e, 23, billing.StatusError), many...)
	update("create an unstorable user", p2e, stNext(p2e, 24, billing.StatusError), plain)
	taken := rec(d, 25, stDay(40), billing.StatusScheduled)
	update("create onto a taken key of another subscription", p2e, stNext(p2e, 26, billing.StatusError), taken)

	// Payments writes between engine writes.
	step("Payments update of a", func(s billingtest.SingleTableStores) (any, error) {
		cur, err := s.Payments.GetSubscription(ctx, a.AccountID, a.SubscriptionID, a.SKU)
		if err != nil {
			return nil, err
		}
		cur.Email, cur.NextPaymentDate = "a@example.com", stDay(99)
		return s.Payments.UpdateSubscription(ctx, cur, cur)
	})
	p2c := stNext(p2e, 27, billing.StatusCompleted)
	update("pay p2 (no completion date)", p2e, p2c)

	// History.
	lone := rec(a, 28, stDay(50), billing.StatusScheduled)
	write("History.Add", func(s billingtest.SingleTableStores) error { return s.History.Add(ctx, &lone) })
	write("History.Add again", func(s billingtest.SingleTableStores) error { return s.History.Add(ctx, &lone) })
	write("History.Add plain", func(s billingtest.SingleTableStores) error { return s.History.Add(ctx, &plain) })
	rows := []billing.Period{rec(b, 29, stDay(70), billing.StatusScheduled), rec(b, 30, stDay(71), billing.StatusCancelled)}
	rows[1].SubscriptionID = q1.SubscriptionID
	write("History.AddAll", func(s billingtest.SingleTableStores) error { return s.History.AddAll(ctx, rows) })
	write("History.AddAll twice one key", func(s billingtest.SingleTableStores) error {
		return s.History.AddAll(ctx, []billing.Period{rows[0], rows[0]})
	})
	write("History.AddAll plain", func(s billingtest.SingleTableStores) error {
		return s.History.AddAll(ctx, []billing.Period{plain})
	})

	// AddAll: overwrites, collisions, groups.
	var batch []billing.Period
	for i := range 10 {
		batch = append(batch, rec(d, 200+i, stDay(-1+31*i), billing.StatusScheduled))
	}
	batch[3].Status = billing.StatusCancelled
	batch = append(batch, rec(d, 220, stDay(92), billing.StatusCancelled), rec(b, 221, stDay(-2), billing.StatusError))
	step("AddAll", func(s billingtest.SingleTableStores) (any, error) { return s.Repository.AddAll(ctx, batch) })
	step("AddAll two SCHEDULED on one key", func(s billingtest.SingleTableStores) (any, error) {
		return s.Repository.AddAll(ctx, []billing.Period{batch[0], batch[0]})
	})
	step("AddAll plain", func(s billingtest.SingleTableStores) (any, error) {
		return s.Repository.AddAll(ctx, []billing.Period{plain})
	})
	step("AddAll nothing", func(s billingtest.SingleTableStores) (any, error) { return s.Repository.AddAll(ctx, nil) })

	// The state each store is left in.
	for _, ref := range refs {
		u := ref.UserID()
		step("ListByUser "+u, func(s billingtest.SingleTableStores) (any, error) { return s.Repository.ListByUser(ctx, u) })
		step("Recent "+u, func(s billingtest.SingleTableStores) (any, error) { return s.Repository.Recent(ctx, u, 3) })
		step("History "+u, func(s billingtest.SingleTableStores) (any, error) { return s.History.ListByUser(ctx, u) })
		step("Subscription "+u, func(s billingtest.SingleTableStores) (any, error) {
			return s.Payments.GetSubscription(ctx, ref.AccountID, ref.SubscriptionID, ref.SKU)
		})
		step("Get "+u, func(s billingtest.SingleTableStores) (any, error) { return s.Repository.Get(ctx, u, stDay(7)) })
	}
	for _, acct := range []string{"a1", "a2"} {
		step("Receipts "+acct, func(s billingtest.SingleTableStores) (any, error) {
			return s.Payments.ReceiptsByAccount(ctx, acct, time.Time{})
		})
		step("Subscriptions "+acct, func(s billingtest.SingleTableStores) (any, error) {
			return s.Payments.SubscriptionsByAccount(ctx, acct)
		})
	}
	for id := range ids {
		step("GetByID "+id, func(s billingtest.SingleTableStores) (any, error) { return s.Repository.GetByID(ctx, id) })
		step("ListBySubscription "+id, func(s billingtest.SingleTableStores) (any, error) { return s.History.ListBySubscription(ctx, id) })
	}
	for n := -5; n < 100; n++ {
		for name, list := range map[string]func(entitlement.Payments) func(context.Context, time.Time, string) ([]entitlement.RecurringSubscription, string, error){
			"DuePayments": func(p entitlement.Payments) func(context.Context, time.Time, string) ([]entitlement.RecurringSubscription, string, error) {
				return p.DuePaymentsByDate
			},
			"DueReminders": func(p entitlement.Payments) func(context.Context, time.Time, string) ([]entitlement.RecurringSubscription, string, error) {
				return p.DueRemindersByDate
			},
		} {
			step(fmt.Sprint(name, " ", n), func(s billingtest.SingleTableStores) (any, error) {
				subs, _, err := list(s.Payments)(ctx, stDay(n), "")
				return subs, err
			})
		}
	}
	now := clock.Now()
	for _, q := range []billing.StatusQuery{
		{Status: billing.StatusScheduled, Before: now},
		{Status: billing.StatusScheduled},
		{Status: billing.StatusScheduled, Since: stDay(25), Before: stDay(35)},
		{Status: billing.StatusError, After: now.AddDate(0, 0, -37)},
		{Status: billing.StatusPaused, Before: now.AddDate(0, 0, 10)},
		{Status: billing.StatusPausedSkipped, Before: now.AddDate(0, 0, 10)},
		{Status: billing.StatusCancelled, Before: now},
		{Status: billing.StatusScheduled, Since: stDay(-10), Before: stDay(100)},
	} {
		for _, limit := range []int{0, 1, 3} {
			q.Limit = limit
			step(fmt.Sprintf("QueryStatus %+v", q), func(s billingtest.SingleTableStores) (any, error) {
				var items []string
				scanned, pages := 0, 0
				for cur := ""; ; {
					q := q
					q.Cursor = cur
					p, err := s.Repository.QueryStatus(ctx, q)
					if err != nil {
						return nil, err
					}
					if pages++; pages > 1000 {
						return nil, errors.New("more than 1000 pages")
					}
					for _, it := range p.Items {
						items = append(items, it.SubscriptionID+"@"+layout.BillingDateKey(&it))
					}
					scanned += p.Scanned
					if cur = p.Next; cur == "" {
						return fmt.Sprintf("%v scanned %d", items, scanned), nil
					}
				}
			})
		}
	}
}

// errKind describes err by what callers test: the sentinels it wraps and
// the fields of a *ConflictError or *BatchError.
func errKind(err error) string {
	if err == nil {
		return "ok"
	}
	kind := ""
	for _, s := range []error{billing.ErrConflict, billing.ErrAlreadyExists, billing.ErrNotFound, entitlement.ErrInvalidPayment,
		billing.ErrInvalidItem, billing.ErrIllegalTransition, billing.ErrInvalidCursor, billing.ErrInvalidQuery, billing.ErrInvalidDate} {
		if errors.Is(err, s) {
			kind += "[" + s.Error() + "]"
		}
	}
	var ce *billing.ConflictError
	if errors.As(err, &ce) {
		kind += fmt.Sprintf(" conflict op=%q history=%v taken=%v", ce.Op, ce.HistoryRow, ce.Taken)
	}
	var be *billing.BatchError
	if errors.As(err, &be) {
		kind += fmt.Sprintf(" batch unwritten=%d", len(be.Unwritten))
	}
	if kind == "" {
		return "error"
	}
	return kind
}
