package billingtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
)

// SingleTableStores is one store of the single-table layout under test:
// the engine's repository and history and the [entitlement.Payments] view of
// the same table.
type SingleTableStores struct {
	Repository billing.Repository
	History    billing.History
	Payments   entitlement.Payments
}

// SingleTableFactory returns stores on a fresh, empty table, reading the
// time from clock, with pageSize index items per status page (0: the
// store's default) and the default catch-up (billing.DefaultCatchUpDays),
// reminder lead (billing.NoticeLeadDays) and receipt retention.
type SingleTableFactory func(t *testing.T, clock billing.Clock, pageSize int) SingleTableStores

// TestSingleTable runs the suite of the single-table layout of the
// collection engine (billing.SingleTableRepository and its in-memory
// twin) on the stores newStores returns: what the layout adds to the
// Repository contract, beyond [TestRepositoryWith].
//
//   - the subscription item follows its periods in the same write: due
//     dates (NextPaymentDate the day of the earliest open period,
//     NextReminderDate the lead before the earliest SCHEDULED one, both
//     removed when nothing is open), amount, version, LastPaymentDate;
//   - a period completed by an update has exactly one receipt, with the
//     record's amount, transaction and completion date, expiring after the
//     retention; begins_with "SUB#" lists subscriptions only;
//   - status queries walk the payment index (or, with due shards, read
//     the due index): every open period of a subscription in the range is
//     found, across SKUs of one account and behind an older open period,
//     over pages of one index item, and cursors are bound to their query
//     (status and range);
//   - engine user IDs that are not subscription references are rejected.
func TestSingleTable(t *testing.T, newStores SingleTableFactory) {
	t.Helper()
	s := &stSuite{newStores: newStores, ids: newSuiteIDs(SuiteOptions{})}
	for _, c := range []repoCase{
		{"SubscriptionItemFollowsPeriods", s.subscriptionFollowsPeriods},
		{"SeveralSKUsPerAccount", s.severalSKUs},
		{"AdminMoveKeepsTheIndex", s.adminMove},
		{"StatusWalk", func(t *testing.T) { s.statusWalk(t, 0) }},
		{"StatusWalkByPagesOfOne", func(t *testing.T) { s.statusWalk(t, 1) }},
		{"CursorsBoundToTheirQuery", s.cursors},
		{"RejectsOtherUserIDs", s.rejectsUserIDs},
		{"AddAllRecordsSharingAnID", s.addAllSharedID},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

type stSuite struct {
	newStores SingleTableFactory
	ids       *suiteIDs
}

// stNow is the suite's clock: midday of the suites' reference day.
var stNow = billingBase.Add(12 * time.Hour)

type stEnv struct {
	t     *testing.T
	clock *Clock
	SingleTableStores
	ids *suiteIDs
}

func (s *stSuite) env(t *testing.T, pageSize int) *stEnv {
	t.Helper()
	clock := NewClock(stNow)
	return &stEnv{t: t, clock: clock, SingleTableStores: s.newStores(t, clock, pageSize), ids: s.ids}
}

func (e *stEnv) ctx() context.Context { return e.t.Context() }

// ref returns a new subscription of account (a new account when "").
func (e *stEnv) ref(account, sku string) layout.SubscriptionRef {
	if account == "" {
		account = "acct-" + e.ids.tag + "-" + strings.TrimPrefix(e.ids.user(), "user-")
	}
	return layout.SubscriptionRef{AccountID: account, SubscriptionID: "sub" + strings.ReplaceAll(e.ids.subID()[len(e.ids.tag):], "-", ""), SKU: sku}
}

func (e *stEnv) add(ref layout.SubscriptionRef, billingDate time.Time, st billing.Status) billing.Period {
	e.t.Helper()
	r := e.ids.record(ref.UserID(), billingDate, st)
	if err := e.Repository.Add(e.ctx(), &r); err != nil {
		e.t.Fatalf("Add(%s): %v", r.Key(), err)
	}
	return r
}

func (e *stEnv) update(prev, next billing.Period, create ...billing.Period) {
	e.t.Helper()
	ptrs := make([]*billing.Period, len(create))
	for i := range create {
		ptrs[i] = &create[i]
	}
	if err := e.Repository.Update(e.ctx(), &prev, &next, ptrs...); err != nil {
		e.t.Fatalf("Update(%s → %s): %v", prev.Key(), next.Status, err)
	}
}

func (e *stEnv) sub(ref layout.SubscriptionRef) entitlement.RecurringSubscription {
	e.t.Helper()
	s, err := e.Payments.GetSubscription(e.ctx(), ref.AccountID, ref.SubscriptionID, ref.SKU)
	if err != nil {
		e.t.Fatalf("GetSubscription(%s): %v", ref.UserID(), err)
	}
	return s
}

// requireDue checks the subscription item's due dates (zero: absent).
func (e *stEnv) requireDue(ref layout.SubscriptionRef, payment, reminder time.Time) entitlement.RecurringSubscription {
	e.t.Helper()
	s := e.sub(ref)
	if !s.NextPaymentDate.Equal(entitlement.PaymentDate(payment)) || !s.NextReminderDate.Equal(entitlement.PaymentDate(reminder)) {
		e.t.Fatalf("%s: NextPaymentDate %v, NextReminderDate %v; want %v, %v", ref.UserID(),
			s.NextPaymentDate, s.NextReminderDate, entitlement.PaymentDate(payment), entitlement.PaymentDate(reminder))
	}
	return s
}

func reminderOf(billingDate time.Time) time.Time {
	return entitlement.PaymentDate(billingDate).AddDate(0, 0, -billing.NoticeLeadDays)
}

func (s *stSuite) subscriptionFollowsPeriods(t *testing.T) {
	e := s.env(t, 0)
	ref := e.ref("", "STREAM")
	r1 := e.add(ref, day(3).Add(9*time.Hour), billing.StatusScheduled)
	sub := e.requireDue(ref, r1.BillingDate, reminderOf(r1.BillingDate))
	if sub.Version != 1 || sub.PaymentAmount != r1.Amount || sub.PaymentDay != 18 || !sub.LastPaymentDate.IsZero() {
		t.Fatalf("new subscription item = %+v; want version 1, amount %v, payment day 18, never paid", sub, r1.Amount)
	}

	// The first attempt fails and opens the next period: the item stays at
	// the overdue period's day, the reminder moves to the next period.
	failed := e.ids.next(r1, billing.StatusError)
	r2 := e.ids.record(ref.UserID(), day(33).Add(9*time.Hour), billing.StatusScheduled)
	e.update(r1, failed, r2)
	e.requireDue(ref, r1.BillingDate, reminderOf(r2.BillingDate))

	// The retry collects it: one receipt, the item moves to the next period.
	done := e.ids.next(failed, billing.StatusCompleted)
	done.CompletionDate, done.TransactionID = day(5).Add(10*time.Hour+time.Second/3), "tx-"+e.ids.tag
	e.update(failed, done)
	sub = e.requireDue(ref, r2.BillingDate, reminderOf(r2.BillingDate))
	if !sub.LastPaymentDate.Equal(day(5)) || sub.Version != 3 {
		t.Fatalf("after the payment: LastPaymentDate %v, version %d; want %v, 3", sub.LastPaymentDate, sub.Version, day(5))
	}
	recs, err := e.Payments.ReceiptsByAccount(e.ctx(), ref.AccountID, time.Time{})
	want := entitlement.Receipt{AccountID: ref.AccountID, SubscriptionID: ref.SubscriptionID, SKU: ref.SKU,
		ProcessedDate: done.CompletionDate, ProcessedAmount: done.Amount, TransactionID: done.TransactionID,
		ExpiresAt: done.CompletionDate.Add(layout.DefaultReceiptRetention).Truncate(time.Second)}
	if err != nil || len(recs) != 1 || !recs[0].ProcessedDate.Equal(want.ProcessedDate) || !recs[0].ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("receipts = %+v, %v; want exactly %+v", recs, err, want)
	}
	recs[0].ProcessedDate, recs[0].ExpiresAt = want.ProcessedDate, want.ExpiresAt
	if recs[0] != want {
		t.Fatalf("receipt = %+v; want %+v", recs[0], want)
	}

	// A later write of the completed period (a refund) is not a payment.
	e.update(done, e.ids.next(done, billing.StatusRefunded))
	if recs, err := e.Payments.ReceiptsByAccount(e.ctx(), ref.AccountID, time.Time{}); err != nil || len(recs) != 1 {
		t.Fatalf("receipts after refunding a completed period = %d, %v; want still 1", len(recs), err)
	}

	// Cancelled: nothing is due, the item leaves both indexes.
	e.update(r2, e.ids.next(r2, billing.StatusCancelled))
	e.requireDue(ref, time.Time{}, time.Time{})
	for _, d := range []time.Time{day(3), r2.BillingDate} {
		due, _, err := e.Payments.DuePaymentsByDate(e.ctx(), d, "")
		if err != nil || slices.ContainsFunc(due, func(s entitlement.RecurringSubscription) bool { return s.SubscriptionID == ref.SubscriptionID }) {
			t.Fatalf("DuePaymentsByDate(%v) = %+v, %v; want the cancelled subscription gone", d, due, err)
		}
	}

	// begins_with(SK, "SUB#"): the subscription only, never its periods,
	// history rows or receipts.
	subs, err := e.Payments.SubscriptionsByAccount(e.ctx(), ref.AccountID)
	if err != nil || len(subs) != 1 || subs[0].SubscriptionID != ref.SubscriptionID || subs[0].SKU != ref.SKU {
		t.Fatalf("SubscriptionsByAccount = %+v, %v; want the one subscription", subs, err)
	}
	rows, err := e.History.ListByUser(e.ctx(), ref.UserID())
	if err != nil || len(rows) != 6 {
		t.Fatalf("history rows = %d, %v; want 6 (2 adds, 4 updates)", len(rows), err)
	}
}

func (s *stSuite) severalSKUs(t *testing.T) {
	e := s.env(t, 0)
	first := e.ref("", "STREAM")
	refs := []layout.SubscriptionRef{first, e.ref(first.AccountID, "MUSIC"), e.ref(first.AccountID, "NEWS")}
	due := day(-1).Add(7 * time.Hour)
	var added []billing.Period
	for _, ref := range refs {
		added = append(added, e.add(ref, due, billing.StatusScheduled)) // one billing date, three keys
	}
	got := e.collect(billing.StatusQuery{Status: billing.StatusScheduled, Before: stNow})
	requireSameRecords(t, got, added)
	subs, err := e.Payments.SubscriptionsByAccount(e.ctx(), first.AccountID)
	if err != nil || len(subs) != 3 {
		t.Fatalf("SubscriptionsByAccount = %+v, %v; want 3", subs, err)
	}
	for _, c := range []struct {
		name string
		list func(context.Context, time.Time, string) ([]entitlement.RecurringSubscription, string, error)
		day  time.Time
	}{{"DuePaymentsByDate", e.Payments.DuePaymentsByDate, due}, {"DueRemindersByDate", e.Payments.DueRemindersByDate, reminderOf(due)}} {
		var n int
		for cur := ""; ; {
			page, next, err := c.list(e.ctx(), c.day, cur)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			for _, s := range page {
				if s.AccountID == first.AccountID {
					n++
				}
			}
			if cur = next; cur == "" {
				break
			}
		}
		if n != 3 {
			t.Fatalf("%s(%v) lists %d of the account's subscriptions, want 3", c.name, c.day, n)
		}
	}
}

func (s *stSuite) adminMove(t *testing.T) {
	e := s.env(t, 0)
	ref := e.ref("", "STREAM")
	r := e.add(ref, day(10), billing.StatusScheduled)
	moved := e.ids.next(r, billing.StatusScheduled)
	moved.BillingDate = day(12)
	if err := e.Repository.AdminUpdate(e.ctx(), &r, &moved); err != nil {
		t.Fatalf("AdminUpdate: %v", err)
	}
	e.requireDue(ref, day(12), reminderOf(day(12)))
	if _, err := e.Repository.Get(e.ctx(), ref.UserID(), day(10)); !errors.Is(err, billing.ErrNotFound) {
		t.Fatalf("old key after the move: %v; want ErrNotFound", err)
	}
	if got, err := e.Repository.GetByID(e.ctx(), r.SubscriptionID); err != nil || !got.BillingDate.Equal(day(12)) {
		t.Fatalf("GetByID after the move = %v, %v; want billing date %v", got.BillingDate, err, day(12))
	}
}

// collect reads every page of q and fails on undecodable items.
func (e *stEnv) collect(q billing.StatusQuery) []billing.Period {
	e.t.Helper()
	var out []billing.Period
	for pages := 0; ; pages++ {
		if pages > 500 {
			e.t.Fatalf("QueryStatus(%+v): more than 500 pages", q)
		}
		p, err := e.Repository.QueryStatus(e.ctx(), q)
		if err != nil || len(p.Invalid) > 0 {
			e.t.Fatalf("QueryStatus(%+v): %v %v", q, err, p.Invalid)
		}
		if p.Count != len(p.Items) {
			e.t.Fatalf("QueryStatus(%+v): Count %d for %d items", q, p.Count, len(p.Items))
		}
		out = append(out, p.Items...)
		if q.Cursor = p.Next; q.Cursor == "" {
			return out
		}
	}
}

// requireSameRecords compares by subscription ID, ignoring repeats (a
// walk may return a period twice when its subscription moves days
// during the walk; not here, but the suite does not pin it).
func requireSameRecords(t *testing.T, got, want []billing.Period) {
	t.Helper()
	ids := func(recs []billing.Period) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.SubscriptionID+" "+r.BillingDate.UTC().Format(time.RFC3339)+" "+string(r.Status))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	if g, w := ids(got), ids(want); !slices.Equal(g, w) {
		t.Fatalf("records found:\n\t%s\nwant:\n\t%s", strings.Join(g, "\n\t"), strings.Join(w, "\n\t"))
	}
}

func (s *stSuite) statusWalk(t *testing.T, pageSize int) {
	e := s.env(t, pageSize)
	at := func(days int, h time.Duration) time.Time {
		return entitlement.PaymentDate(stNow).AddDate(0, 0, days).Add(h)
	}
	var scheduled, errored, paused, window []billing.Period
	// SCHEDULED: overdue within the catch-up, yesterday, earlier today,
	// later today (not before now), in ten days (the notification window).
	for _, d := range []time.Time{at(-40, 0), at(-1, 3*time.Hour), at(0, time.Hour)} {
		scheduled = append(scheduled, e.add(e.ref("", "STREAM"), d, billing.StatusScheduled))
	}
	e.add(e.ref("", "STREAM"), at(0, 13*time.Hour), billing.StatusScheduled)
	window = append(window, e.add(e.ref("", "STREAM"), at(10, 2*time.Hour), billing.StatusScheduled))
	e.add(e.ref("", "STREAM"), at(11, 0), billing.StatusScheduled) // just after the window
	// A subscription whose first period failed 20 days ago and whose next
	// period is due in ten days: it sits at the old day, and both its
	// periods are still found by their queries.
	behind := e.ref("", "MUSIC")
	old := e.add(behind, at(-20, 5*time.Hour), billing.StatusScheduled)
	oldErr := e.ids.next(old, billing.StatusError)
	later := e.ids.record(behind.UserID(), at(10, 5*time.Hour), billing.StatusScheduled)
	e.update(old, oldErr, later)
	errored, window = append(errored, oldErr), append(window, later)
	errored = append(errored, e.add(e.ref(behind.AccountID, "NEWS"), at(-3, 0), billing.StatusError))
	e.add(e.ref("", "STREAM"), at(-40, 0), billing.StatusError) // before the retry range
	paused = append(paused, e.add(e.ref("", "STREAM"), at(-2, 0), billing.StatusPaused))
	e.add(e.ref("", "STREAM"), at(5, 0), billing.StatusPaused)
	e.add(e.ref("", "STREAM"), at(-4, 0), billing.StatusCompleted)

	requireSameRecords(t, e.collect(billing.StatusQuery{Status: billing.StatusScheduled, Before: stNow}), scheduled)
	requireSameRecords(t, e.collect(billing.StatusQuery{Status: billing.StatusError, After: stNow.AddDate(0, 0, -37)}), errored)
	requireSameRecords(t, e.collect(billing.StatusQuery{Status: billing.StatusPaused, Before: stNow}), paused)
	requireSameRecords(t, e.collect(billing.StatusQuery{Status: billing.StatusScheduled, Since: at(10, 0), Before: at(11, 0)}), window)
	// Closed periods are in no index: the walk finds none, the due index
	// refuses a status runs do not read.
	cancelled := billing.StatusQuery{Status: billing.StatusCancelled, Before: stNow}
	if _, err := e.Repository.QueryStatus(e.ctx(), cancelled); !errors.Is(err, billing.ErrInvalidQuery) {
		if got := e.collect(cancelled); len(got) != 0 {
			t.Fatalf("CANCELLED query = %d records; want none (closed periods are not in the index)", len(got))
		}
	}
}

func (s *stSuite) cursors(t *testing.T) {
	e := s.env(t, 1)
	for i := range 4 {
		e.add(e.ref("", "STREAM"), entitlement.PaymentDate(stNow).AddDate(0, 0, -i-1), billing.StatusScheduled)
	}
	q := billing.StatusQuery{Status: billing.StatusScheduled, Before: stNow}
	p, err := e.Repository.QueryStatus(e.ctx(), q)
	if err != nil || p.Next == "" {
		t.Fatalf("first page: next %q, %v; want a cursor", p.Next, err)
	}
	mid := len(p.Next) / 2
	for name, other := range map[string]billing.StatusQuery{
		"OtherStatus":  {Status: billing.StatusPaused, Before: stNow, Cursor: p.Next},
		"OtherRange":   {Status: billing.StatusScheduled, Before: stNow.Add(time.Hour), Cursor: p.Next},
		"Garbage":      {Status: billing.StatusScheduled, Before: stNow, Cursor: "not a cursor"},
		"CharSwapped":  {Status: billing.StatusScheduled, Before: stNow, Cursor: p.Next[:mid] + string(nextChar(p.Next[mid])) + p.Next[mid+1:]},
		"Truncated":    {Status: billing.StatusScheduled, Before: stNow, Cursor: p.Next[:len(p.Next)-1]},
		"OtherSinceOf": {Status: billing.StatusScheduled, Since: stNow.AddDate(0, 0, -3), Before: stNow, Cursor: p.Next},
	} {
		got, err := e.Repository.QueryStatus(e.ctx(), other)
		if !errors.Is(err, billing.ErrInvalidCursor) || len(got.Items) != 0 {
			t.Errorf("%s: %d items, %v; want ErrInvalidCursor and nothing", name, len(got.Items), err)
		}
	}
}

func (s *stSuite) rejectsUserIDs(t *testing.T) {
	e := s.env(t, 0)
	for _, u := range []string{"plain-user", "acct#sub", "#sub#sku", "acct#sub#", "acct##sku"} {
		r := e.ids.record(u, day(1), billing.StatusScheduled)
		if err := e.Repository.Add(e.ctx(), &r); !errors.Is(err, entitlement.ErrInvalidPayment) {
			t.Errorf("Add with user ID %q: %v; want ErrInvalidPayment", u, err)
		}
		if err := e.History.Add(e.ctx(), &r); !errors.Is(err, entitlement.ErrInvalidPayment) {
			t.Errorf("History.Add with user ID %q: %v; want ErrInvalidPayment", u, err)
		}
		if got, err := e.Repository.GetByID(e.ctx(), r.SubscriptionID); !errors.Is(err, billing.ErrNotFound) {
			t.Errorf("GetByID after rejected adds of %q = %+v, %v; want ErrNotFound", u, got, err)
		}
	}
}

// addAllSharedID: imports may reuse one subscription_id for several
// periods of a subscription; AddAll writes them all (one pointer per ID).
func (s *stSuite) addAllSharedID(t *testing.T) {
	e := s.env(t, 0)
	ref := e.ref("", "STREAM")
	a := e.ids.record(ref.UserID(), day(1), billing.StatusCompleted)
	b := e.ids.record(ref.UserID(), day(31), billing.StatusScheduled)
	b.SubscriptionID = a.SubscriptionID
	if _, err := e.Repository.AddAll(e.ctx(), []billing.Period{a, b}); err != nil {
		t.Fatalf("AddAll: %v", err)
	}
	recs, err := e.Repository.ListByUser(e.ctx(), ref.UserID())
	if err != nil || len(recs) != 2 {
		t.Fatalf("ListByUser = %d records, %v; want 2", len(recs), err)
	}
	if got, err := e.Repository.GetByID(e.ctx(), a.SubscriptionID); err != nil || got.SubscriptionID != a.SubscriptionID {
		t.Fatalf("GetByID(%s) = %+v, %v", a.SubscriptionID, got, err)
	}
	e.requireDue(ref, b.BillingDate, reminderOf(b.BillingDate))
}
