package billingtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
	"github.com/dynabill/billing/notice"
)

// The roles of the stored items a reminder's claim may change, the keys of
// [ReminderStore.Items].
const (
	// ReminderRecordItem is the record's own item (the legacy record, the
	// single table's period).
	ReminderRecordItem = "record"
	// ReminderSubscriptionItem is the single table's subscription item of
	// the record.
	ReminderSubscriptionItem = "subscription"
)

// ReminderStore is one store under [TestReminderWorkers].
type ReminderStore struct {
	// Repository holds the records. It must implement
	// [notice.ReminderClaimer].
	Repository billing.Repository
	// Items returns, as the table stores them, the items a claim of rec's
	// reminder may change, by role: [ReminderRecordItem] always, and
	// [ReminderSubscriptionItem] when the layout has one. A missing item
	// is left out.
	Items func(t testing.TB, rec *billing.Period) map[string]map[string]av.AttributeValue
}

// ReminderStoreFactory returns a store on fresh, empty tables, reading the
// time from clock.
type ReminderStoreFactory func(t *testing.T, clock billing.Clock) ReminderStore

// TestReminderWorkers runs the pre-billing notifier's [notice.Scheduler]
// and several [notice.Worker] instances with Reminders set to the store,
// and checks that every reminder is sent at most once per record and
// billing date:
//
//   - two workers handling the same message at once send it once (one
//     sent, one skipped as a duplicate);
//   - a second scheduler run the same day enqueues the messages again and
//     nothing more is sent;
//   - a failed send releases the claim, so the redelivered message sends
//     once;
//   - a record collected after its message was enqueued is not reminded.
//
// It compares the stored items before and after, attribute by attribute:
// a claim changes only billing_reminded_for, billing_reminded_at and
// billing_reminder_claim on the record, and LastReminderDate, Version and
// UpdatedAt on a subscription item; everything else keeps its bytes. A
// release leaves the record as it was before the claim, and the
// subscription item's LastReminderDate too.
func TestReminderWorkers(t *testing.T, newStore ReminderStoreFactory, opts SuiteOptions) {
	t.Helper()
	s := &reminderSuite{newStore: newStore, ids: newSuiteIDs(opts)}
	for _, c := range []repoCase{
		{"TwoWorkersSendOnce", s.twoWorkers},
		{"RerunSameDaySendsNothing", s.rerun},
		{"FailedSendReleasedRetrySendsOnce", s.failedSend},
		{"RecordChangedNotReminded", s.recordChanged},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

type reminderSuite struct {
	newStore ReminderStoreFactory
	ids      *suiteIDs
}

// reminderNow is the suite's clock: its notification window is billingBase.
var reminderNow = billingBase.AddDate(0, 0, -billing.NoticeLeadDays).Add(9*time.Hour + 123456789)

type reminderEnv struct {
	t        *testing.T
	clock    *Clock
	store    ReminderStore
	users    *UserDirectory
	notifier *RecordingNotifier
	recs     []billing.Period
}

// env returns a store holding n SCHEDULED records due in the window, each
// of its own ACTIVE user.
func (s *reminderSuite) env(t *testing.T, n int) *reminderEnv {
	t.Helper()
	e := &reminderEnv{t: t, clock: NewClock(reminderNow), users: NewUserDirectory(), notifier: &RecordingNotifier{}}
	e.store = s.newStore(t, e.clock)
	if _, ok := e.store.Repository.(notice.ReminderClaimer); !ok {
		t.Fatalf("billingtest.TestReminderWorkers: %T does not implement notice.ReminderClaimer", e.store.Repository)
	}
	for i := range n {
		rec := s.ids.record(s.ids.user(), billingBase.Add(time.Duration(i+1)*time.Hour), billing.StatusScheduled)
		e.users.Put(billing.User{ID: rec.UserID, Email: fmt.Sprintf("reminder-%d@example.com", i), Status: billing.UserStatusActive})
		if err := e.store.Repository.Add(t.Context(), &rec); err != nil {
			t.Fatalf("Add(%s): %v", rec.Key(), err)
		}
		e.recs = append(e.recs, rec)
	}
	return e
}

func (e *reminderEnv) worker() *notice.Worker {
	e.t.Helper()
	w, err := notice.NewWorker(notice.WorkerConfig{
		Users: e.users, Notifier: e.notifier,
		AccountMask: func(context.Context, string) (string, error) { return "00001234", nil },
		Reminders:   e.store.Repository.(notice.ReminderClaimer), Clock: e.clock,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// schedule runs the scheduler over the window and returns the messages
// it enqueued, one per record.
func (e *reminderEnv) schedule() []notice.QueueMessage {
	e.t.Helper()
	q := &RecordingEnqueuer{}
	sched, err := notice.NewScheduler(notice.SchedulerConfig{Repository: e.store.Repository, Enqueuer: q, Clock: e.clock})
	if err != nil {
		e.t.Fatal(err)
	}
	ev := notice.Event{}
	for range 20 {
		res, err := sched.Run(e.t.Context(), ev)
		if err != nil {
			e.t.Fatalf("Scheduler.Run: %v", err)
		}
		if res.Continuation == nil {
			break
		}
		ev = *res.Continuation
	}
	bodies := q.Bodies()
	if len(bodies) != len(e.recs) {
		e.t.Fatalf("the scheduler enqueued %d messages, want %d (one per record)", len(bodies), len(e.recs))
	}
	msgs := make([]notice.QueueMessage, len(bodies))
	for i, b := range bodies {
		msgs[i] = notice.QueueMessage{ID: fmt.Sprint("m", i), Body: b}
	}
	return msgs
}

func (e *reminderEnv) parse(msg notice.QueueMessage) notice.Message {
	e.t.Helper()
	m, err := notice.ParseMessage([]byte(msg.Body))
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// items returns the stored items of every record, by record and role.
func (e *reminderEnv) items() []map[string]map[string]av.AttributeValue {
	e.t.Helper()
	out := make([]map[string]map[string]av.AttributeValue, len(e.recs))
	for i := range e.recs {
		out[i] = e.store.Items(e.t, &e.recs[i])
		if _, ok := out[i][ReminderRecordItem]; !ok {
			e.t.Fatalf("Items(%s) has no %q item", e.recs[i].Key(), ReminderRecordItem)
		}
	}
	return out
}

// requireSent checks that each record's user got exactly one notification
// of its billing date, and nobody else any.
func (e *reminderEnv) requireSent(recs ...billing.Period) {
	e.t.Helper()
	var got, want []string
	for _, s := range e.notifier.Sent() {
		got = append(got, s.Notification.UserID+" "+s.Notification.BillingDate)
	}
	for _, r := range recs {
		want = append(want, r.UserID+" "+r.BillingDate.Format(notice.DateLayout))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		e.t.Fatalf("notifications sent (user, billing date):\n got %q\nwant %q", got, want)
	}
}

// changed returns the names of the attributes whose bytes differ between
// two forms of an item.
func changed(before, after map[string]av.AttributeValue) []string {
	var names []string
	for n, v := range after {
		if w, ok := before[n]; !ok || !reflect.DeepEqual(v, w) {
			names = append(names, n)
		}
	}
	for n := range before {
		if _, ok := after[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// requireClaimOnly checks that after differs from before only by the
// claim of rec's reminder made at the clock's time.
func (e *reminderEnv) requireClaimOnly(rec *billing.Period, before, after map[string]map[string]av.AttributeValue) {
	e.t.Helper()
	bd, _ := timefmt.Seconds(rec.BillingDate)
	at, _ := timefmt.Nanos(e.clock.Now())
	claim := layout.ReminderAttributes()
	slices.Sort(claim)
	rb, ra := before[ReminderRecordItem], after[ReminderRecordItem]
	if got := changed(rb, ra); !slices.Equal(got, claim) {
		e.t.Fatalf("record %s: the claim changed attributes %q, want exactly %q", rec.Key(), got, claim)
	}
	if got := layout.StringOf(ra[layout.AttrRemindedFor]); got != bd {
		e.t.Fatalf("record %s: %s = %q, want the billing date %q", rec.Key(), layout.AttrRemindedFor, got, bd)
	}
	if got := layout.StringOf(ra[layout.AttrRemindedAt]); got != at {
		e.t.Fatalf("record %s: %s = %q, want the claim time %q", rec.Key(), layout.AttrRemindedAt, got, at)
	}
	if layout.StringOf(ra[layout.AttrReminderClaim]) == "" {
		e.t.Fatalf("record %s: no %s", rec.Key(), layout.AttrReminderClaim)
	}
	sb, hasSub := before[ReminderSubscriptionItem]
	sa := after[ReminderSubscriptionItem]
	if !hasSub {
		if len(after) != 1 {
			e.t.Fatalf("record %s: items %d after the claim, 1 before", rec.Key(), len(after))
		}
		return
	}
	allowed := layout.SubscriptionReminderAttributes()
	got := changed(sb, sa)
	for _, n := range got {
		if !slices.Contains(allowed, n) {
			e.t.Fatalf("subscription item of %s: the claim changed %q (all changed: %q); only %q may change", rec.Key(), n, got, allowed)
		}
	}
	if d := layout.StringOf(sa[layout.AttrLastReminderDate]); d != layout.PaymentDayKey(entitlement.PaymentDate(e.clock.Now())) {
		e.t.Fatalf("subscription item of %s: %s = %q, want the claim's day", rec.Key(), layout.AttrLastReminderDate, d)
	}
	if vb, va := number(sb[layout.PayVersion]), number(sa[layout.PayVersion]); va != vb+1 {
		e.t.Fatalf("subscription item of %s: Version %d -> %d, want one up", rec.Key(), vb, va)
	}
}

// requireReleased checks that after (a claim then its release) is before
// again: the record byte for byte, the subscription item's
// LastReminderDate too (its Version and UpdatedAt move on).
func (e *reminderEnv) requireReleased(rec *billing.Period, before, after map[string]map[string]av.AttributeValue) {
	e.t.Helper()
	if got := changed(before[ReminderRecordItem], after[ReminderRecordItem]); len(got) > 0 {
		e.t.Fatalf("record %s: released, but attributes %q differ from before the claim", rec.Key(), got)
	}
	sb, ok := before[ReminderSubscriptionItem]
	if !ok {
		return
	}
	for _, n := range changed(sb, after[ReminderSubscriptionItem]) {
		if n == layout.AttrLastReminderDate || !slices.Contains(layout.SubscriptionReminderAttributes(), n) {
			e.t.Fatalf("subscription item of %s: released, but %q differs from before the claim", rec.Key(), n)
		}
	}
}

func number(v av.AttributeValue) int {
	if n, ok := v.(*av.AttributeValueMemberN); ok {
		i, _ := strconv.Atoi(n.Value)
		return i
	}
	return 0
}

func (s *reminderSuite) twoWorkers(t *testing.T) {
	e := s.env(t, 3)
	before := e.items()
	msgs := e.schedule()
	w1, w2 := e.worker(), e.worker()
	for _, msg := range msgs {
		m := e.parse(msg)
		var wg sync.WaitGroup
		start := make(chan struct{})
		outs := make([]notice.Outcome, 2)
		errs := make([]error, 2)
		for i, w := range []*notice.Worker{w1, w2} {
			wg.Go(func() {
				<-start
				outs[i], errs[i] = w.Handle(t.Context(), m)
			})
		}
		close(start)
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("message of %s: errors %v, %v", m.UserID, errs[0], errs[1])
		}
		slices.Sort(outs)
		if want := []notice.Outcome{notice.Sent, notice.SkippedDuplicate}; !slices.Equal(outs, want) {
			t.Fatalf("message of %s handled by two workers at once: outcomes %q, want %q", m.UserID, outs, want)
		}
	}
	e.requireSent(e.recs...)
	after := e.items()
	for i := range e.recs {
		e.requireClaimOnly(&e.recs[i], before[i], after[i])
	}
}

func (s *reminderSuite) rerun(t *testing.T) {
	e := s.env(t, 2)
	w := e.worker()
	if failed := w.HandleBatch(t.Context(), e.schedule()); len(failed) > 0 {
		t.Fatalf("first run: messages %q failed", failed)
	}
	e.requireSent(e.recs...)
	claimed := e.items()

	e.clock.Advance(3 * time.Hour) // the same day
	for _, msg := range e.schedule() {
		out, err := e.worker().Handle(t.Context(), e.parse(msg))
		if err != nil || out != notice.SkippedDuplicate {
			t.Fatalf("rerun: Handle = %q, %v; want %q", out, err, notice.SkippedDuplicate)
		}
	}
	e.requireSent(e.recs...)
	again := e.items()
	for i := range e.recs {
		for role, item := range claimed[i] {
			if got := changed(item, again[i][role]); len(got) > 0 {
				t.Fatalf("%s item of %s: the rerun changed %q", role, e.recs[i].Key(), got)
			}
		}
	}
}

func (s *reminderSuite) failedSend(t *testing.T) {
	e := s.env(t, 1)
	rec := &e.recs[0]
	user, _ := e.users.GetUser(t.Context(), rec.UserID)
	before := e.items()[0]
	msgs := e.schedule()
	boom := errors.New("billingtest: channel down")
	e.notifier.FailFor(user.Email, boom)
	w := e.worker()
	if _, err := w.Handle(t.Context(), e.parse(msgs[0])); !errors.Is(err, boom) {
		t.Fatalf("Handle with a failing channel: error %v, want the send's", err)
	}
	if failed := w.HandleBatch(t.Context(), msgs); !slices.Equal(failed, []string{msgs[0].ID}) {
		t.Fatalf("HandleBatch with a failing channel: failed %q, want %q", failed, msgs[0].ID)
	}
	e.requireSent()
	e.requireReleased(rec, before, e.items()[0])

	e.notifier.FailFor(user.Email, nil)
	if failed := e.worker().HandleBatch(t.Context(), msgs); len(failed) > 0 {
		t.Fatalf("redelivery: messages %q failed", failed)
	}
	e.requireSent(*rec)
	claimed := e.items()[0]
	if got := changed(before[ReminderRecordItem], claimed[ReminderRecordItem]); len(got) != len(layout.ReminderAttributes()) {
		t.Fatalf("record %s after the retry: changed %q, want the claim's attributes", rec.Key(), got)
	}
	if failed := e.worker().HandleBatch(t.Context(), msgs); len(failed) > 0 {
		t.Fatalf("second redelivery: messages %q failed", failed)
	}
	e.requireSent(*rec)
}

func (s *reminderSuite) recordChanged(t *testing.T) {
	e := s.env(t, 1)
	rec := e.recs[0]
	msgs := e.schedule()
	next := s.ids.next(rec, billing.StatusCompleted)
	next.CompletionDate = next.LastRunDate
	if err := e.store.Repository.Update(t.Context(), &rec, &next); err != nil {
		t.Fatalf("Update(%s) to COMPLETED: %v", rec.Key(), err)
	}
	before := e.items()[0]
	out, err := e.worker().Handle(t.Context(), e.parse(msgs[0]))
	if err != nil || out != notice.SkippedRecordChanged {
		t.Fatalf("Handle of a record completed since: %q, %v; want %q", out, err, notice.SkippedRecordChanged)
	}
	e.requireSent()
	after := e.items()[0]
	for role, item := range before {
		if got := changed(item, after[role]); len(got) > 0 {
			t.Fatalf("%s item of %s: a refused claim changed %q", role, rec.Key(), got)
		}
	}
}
