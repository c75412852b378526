package billing_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collectorEnv is a collector on the in-memory store with scripted parts.
type collectorEnv struct {
	t      *testing.T
	clock  *billingtest.Clock
	store  *memory.Store
	repo   billing.Repository
	hist   billing.History
	locker *billingtest.Locker
	pay    *billingtest.Provider
	events *billingtest.EventRecorder
	c      *billing.Collector
	ids    int
}

var jan31 = time.Date(2024, 1, 31, 15, 0, 0, 0, time.UTC)

func newCollectorEnv(t *testing.T, mut ...func(*billing.Config)) *collectorEnv {
	t.Helper()
	e := &collectorEnv{t: t, clock: billingtest.NewClock(jan31.Add(time.Hour)), events: &billingtest.EventRecorder{}}
	e.store = memory.New(memory.Options{PageSize: 7})
	e.repo, e.hist = e.store.Repository(), e.store.History()
	e.locker = billingtest.NewLocker(e.clock, time.Minute)
	e.pay = billingtest.NewProvider(billingtest.ProviderOptions{Clock: e.clock})
	cfg := billing.Config{Repository: e.repo, History: e.hist, Locker: e.locker, Provider: e.pay, Clock: e.clock,
		Events: e.events, NewID: func() string { e.ids++; return fmt.Sprintf("gen-%04d", e.ids) }}
	var mu sync.Mutex
	gen := cfg.NewID
	cfg.NewID = func() string { mu.Lock(); defer mu.Unlock(); return gen() }
	for _, m := range mut {
		m(&cfg)
	}
	c, err := billing.NewCollector(cfg)
	require.NoError(t, err)
	e.c = c
	return e
}

func (e *collectorEnv) add(user string, date time.Time, st billing.Status, mut ...func(*billing.Subscription)) billing.Subscription {
	e.t.Helper()
	s := billing.Subscription{UserID: user, SubscriptionID: user + "-" + date.Format("20060102"), BillingDate: date,
		Amount: billing.MustParseAmount("4.99"), Status: st, BillingPeriod: billing.BillingPeriod(date), Term: billing.TermMonthly,
		AnchorDay: date.Day(), ReceiptTierName: "Plus:v2", CreatedDate: date.AddDate(0, -1, 0), LastRunDate: date.AddDate(0, -1, 0)}
	for _, m := range mut {
		m(&s)
	}
	require.NoError(e.t, e.repo.Add(context.Background(), &s))
	return s
}

func (e *collectorEnv) run(kind billing.RunKind) *billing.Report {
	e.t.Helper()
	req := billing.RunRequest{Kind: kind}
	var total *billing.Report
	for {
		rep, err := e.c.Run(context.Background(), req)
		require.NoError(e.t, err, "%s run", kind)
		if total == nil {
			total = rep
		} else {
			total.Attempted += rep.Attempted
			total.Collected += rep.Collected
			total.Declined += rep.Declined
			total.Pending += rep.Pending
		}
		if rep.Next == "" {
			return total
		}
		req.Cursor = rep.Next
	}
}

func (e *collectorEnv) records(user string) []billing.Subscription {
	e.t.Helper()
	recs, err := e.repo.ListByUser(context.Background(), user)
	require.NoError(e.t, err)
	return recs
}

func TestCollectorScheduledRunCollectsAndOpensNextPeriod(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.add("u2", jan31.AddDate(0, 0, 5), billing.StatusScheduled) // not due
	rep := e.run(billing.RunScheduled)
	if rep.Attempted != 1 || rep.Collected != 1 {
		t.Fatalf("report = %+v", rep)
	}
	recs := e.records("u1")
	require.Len(t, recs, 2, "u1 has %d records, want 2", len(recs))
	got, next := recs[0], recs[1]
	if got.Status != billing.StatusCompleted || got.Attempt != 1 || got.Process != billing.ProcessInitial ||
		got.InitialRunDate.IsZero() || got.CompletionDate.IsZero() || got.TransactionID == "" || got.ReceiptAccountMask != "6789" {
		t.Errorf("collected record = %+v", got)
	}
	want := time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC)
	if next.Status != billing.StatusScheduled || !next.BillingDate.Equal(want) || next.AnchorDay != 31 ||
		next.Amount != s.Amount || next.BillingPeriod != "02/2024" || next.SubscriptionID != "gen-0001" {
		t.Errorf("next period = %+v", next)
	}
	calls := e.pay.Calls()
	if len(calls) != 1 || calls[0].Request.IdempotencyKey != billing.IdempotencyKey(s.SubscriptionID, 1) || calls[0].Request.Amount != s.Amount {
		t.Errorf("provider calls = %+v", calls)
	}
	assert.Equal(t, 1, e.events.Count(billing.EventPaymentSucceeded), "events = %+v", e.events.Events())
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u1")
	rows, _ := e.hist.ListByUser(context.Background(), "u1")
	assert.Len(t, rows, 3, "history rows = %d, want 3 (add, attempt, next period)", len(rows))
	// A second run finds nothing due.
	if rep := e.run(billing.RunScheduled); rep.Attempted != 0 {
		t.Errorf("second run attempted %d", rep.Attempted)
	}
}

func TestCollectorDeclineAndDailyRetry(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.Declined("R01 insufficient funds", true), billingtest.Declined("R01", true), billingtest.Succeeded())
	e.run(billing.RunScheduled)
	cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID)
	if cur.Status != billing.StatusError || cur.PaymentError != "R01 insufficient funds" || cur.Attempt != 1 {
		t.Fatalf("after decline: %+v", cur)
	}
	// Same day: the retry policy waits.
	e.clock.Advance(time.Hour)
	if rep := e.run(billing.RunRetry); rep.Attempted != 0 {
		t.Fatalf("retried on the same day: %+v", rep)
	}
	e.clock.Advance(24 * time.Hour)
	e.run(billing.RunRetry) // declined again
	e.clock.Advance(24 * time.Hour)
	rep := e.run(billing.RunRetry)
	require.Equal(t, 1, rep.Collected, "third attempt: %+v", rep)
	keys := e.pay.KeysFor(s.SubscriptionID)
	if len(keys) != 3 || keys[2] != billing.IdempotencyKey(s.SubscriptionID, 3) {
		t.Fatalf("keys = %v", keys)
	}
	cur, _ = e.repo.GetByID(context.Background(), s.SubscriptionID)
	if cur.Status != billing.StatusCompleted || cur.PaymentError != "" || cur.Process != billing.ProcessRetry {
		t.Fatalf("after retry: %+v", cur)
	}
	if n := len(e.records("u1")); n != 2 {
		t.Fatalf("u1 has %d records, want 2 (one next period only)", n)
	}
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u1")
}

func TestCollectorUnknownOutcomeReusesKey(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil))
	rep := e.run(billing.RunScheduled)
	if rep.Unknown != 1 || len(rep.Failed) != 1 {
		t.Fatalf("report = %+v", rep)
	}
	if cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID); cur.Status != billing.StatusScheduled || cur.Attempt != 0 {
		t.Fatalf("record after unknown outcome = %+v", cur)
	}
	require.Len(t, e.records("u1"), 1, "unknown outcome opened the next period")
	rep = e.run(billing.RunScheduled)
	require.Equal(t, 1, rep.Collected, "rerun: %+v", rep)
	calls := e.pay.Calls()
	if len(calls) != 2 || calls[0].Request.IdempotencyKey != calls[1].Request.IdempotencyKey || !calls[1].Replayed {
		t.Fatalf("calls = %+v, want the same key twice, the second replayed", calls)
	}
	if len(e.pay.ChargesFor(s.SubscriptionID)) != 1 {
		t.Fatal("charged twice")
	}
	billingtest.RequireNoDoubleCharge(t, e.pay)
}

func TestCollectorACHSettlement(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.Pending())
	e.run(billing.RunScheduled)
	cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID)
	if cur.Status != billing.StatusACHSent || cur.TransactionID == "" {
		t.Fatalf("after submit: %+v", cur)
	}
	ctx := context.Background()
	_, _, err := e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: "other", Kind: billing.SettlementSettled})
	require.ErrorIs(t, err, billing.ErrTransactionMismatch, "mismatch")
	ev := billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: cur.TransactionID, Kind: billing.SettlementSettled}
	got, changed, err := e.c.ApplySettlement(ctx, ev)
	if err != nil || !changed || got.Status != billing.StatusCompleted {
		t.Fatalf("settle: %+v %v %v", got, changed, err)
	}
	if _, changed, err := e.c.ApplySettlement(ctx, ev); err != nil || changed {
		t.Fatalf("replay changed=%v err=%v", changed, err)
	}
	_, _, err = e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: cur.TransactionID, Kind: billing.SettlementReturned})
	require.ErrorIs(t, err, billing.ErrIllegalTransition, "return after settlement")
	ref := billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: cur.TransactionID, Kind: billing.SettlementRefunded}
	if got, changed, err := e.c.ApplySettlement(ctx, ref); err != nil || !changed || got.Status != billing.StatusRefunded {
		t.Fatalf("refund: %+v %v", got, err)
	}
	if e.events.Count(billing.EventPaymentRefunded) != 1 || e.events.Count(billing.EventPaymentSucceeded) != 1 {
		t.Fatalf("events: %+v", e.events.Events())
	}
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u1")
}

func TestCollectorACHReturn(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.Pending())
	e.run(billing.RunScheduled)
	cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID)
	ret := billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: cur.TransactionID, Kind: billing.SettlementReturned, Reason: "R01"}
	got, changed, err := e.c.ApplySettlement(context.Background(), ret)
	if err != nil || !changed || got.Status != billing.StatusError || got.PaymentError != "R01" {
		t.Fatalf("return: %+v %v", got, err)
	}
	// The settlement of the same debit arriving late changes nothing.
	late := ret
	late.Kind = billing.SettlementSettled
	if _, changed, err := e.c.ApplySettlement(context.Background(), late); err != nil || changed {
		t.Fatalf("late settlement: changed=%v err=%v", changed, err)
	}
	if e.events.Count(billing.EventPaymentReturned) != 1 {
		t.Fatal("no payment-failed event")
	}
}

func TestCollectorStaleAndPause(t *testing.T) {
	e := newCollectorEnv(t)
	old := e.add("u-old", jan31.AddDate(0, 0, -40), billing.StatusScheduled)
	p := e.add("u-pause", jan31.AddDate(0, 0, -1), billing.StatusPaused, func(s *billing.Subscription) { s.PauseDurationMonths = 2 })
	rep := e.run(billing.RunScheduled)
	if rep.Stale != 1 || rep.Attempted != 0 {
		t.Fatalf("scheduled run: %+v", rep)
	}
	st, _ := e.repo.GetByID(context.Background(), old.SubscriptionID)
	if st.Status != billing.StatusStale || len(e.records("u-old")) != 2 || e.events.Count(billing.EventStale) != 1 {
		t.Fatalf("stale record %+v, %d records", st, len(e.records("u-old")))
	}
	e.run(billing.RunPause)
	recs := e.records("u-pause")
	if len(recs) != 2 || recs[0].Status != billing.StatusPausedSkipped || recs[0].UpdatedEvent != billing.EventPauseSkipped ||
		recs[1].Status != billing.StatusPaused || recs[1].PauseDurationMonths != 1 || recs[1].UpdatedEvent != billing.EventPausePendingResume {
		t.Fatalf("after first pause run: %+v", recs)
	}
	e.clock.Set(recs[1].BillingDate.Add(time.Hour))
	e.run(billing.RunPause)
	recs = e.records("u-pause")
	if len(recs) != 3 || recs[2].Status != billing.StatusScheduled || recs[2].UpdatedEvent != billing.EventPauseResume || recs[2].PauseDurationMonths != 0 {
		t.Fatalf("after second pause run: %+v", recs)
	}
	_ = p
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u-pause")
}

func TestCollectorLockedUserIsSkippedUntouched(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	lease, err := e.locker.Lock(context.Background(), "u1")
	require.NoError(t, err)
	rep := e.run(billing.RunScheduled)
	if rep.SkippedLocked != 1 || rep.Attempted != 0 || e.pay.CallCount() != 0 {
		t.Fatalf("report = %+v", rep)
	}
	if cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID); cur.Status != billing.StatusScheduled || !cur.LastRunDate.Equal(s.LastRunDate) {
		t.Fatal("locked record was touched")
	}
	_ = lease.Release(context.Background())
}

func TestCollectorConcurrentCollectionsCallProviderOnce(t *testing.T) {
	e := newCollectorEnv(t)
	e.add("u1", jan31, billing.StatusScheduled)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { _, _ = e.c.CollectUser(context.Background(), "u1", billing.ProcessWebhook) })
	}
	wg.Wait()
	if n := e.pay.CallCount(); n != 1 {
		t.Fatalf("provider called %d times, want 1", n)
	}
	if n := len(e.records("u1")); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
	billingtest.RequireNoDoubleCharge(t, e.pay)
}

func TestCollectorAdminChanges(t *testing.T) {
	e := newCollectorEnv(t)
	ctx := context.Background()
	a := e.add("u1", jan31.AddDate(0, 0, 10), billing.StatusScheduled)
	ch, err := e.c.Pause(ctx, a.SubscriptionID, 2)
	if err != nil || ch.Before.Status != billing.StatusScheduled || ch.After.Status != billing.StatusPaused || ch.After.PauseDurationMonths != 2 {
		t.Fatalf("pause: %+v %v", ch, err)
	}
	if ch, err = e.c.Resume(ctx, a.SubscriptionID); err != nil || ch.After.Status != billing.StatusScheduled || ch.After.UpdatedEvent != billing.EventPauseResume {
		t.Fatalf("resume: %+v %v", ch, err)
	}
	moved := jan31.AddDate(0, 0, 12)
	if ch, err = e.c.ChangeBillingDate(ctx, a.SubscriptionID, moved); err != nil || !ch.After.BillingDate.Equal(moved) {
		t.Fatalf("change date: %+v %v", ch, err)
	}
	if recs := e.records("u1"); len(recs) != 1 || !recs[0].BillingDate.Equal(moved) {
		t.Fatalf("records after move: %+v", recs)
	}
	if ch, err = e.c.ChangeTier(ctx, a.SubscriptionID, "Lite:v1", billing.MustParseAmount("2.99"), true); err != nil || !ch.After.IsPendingDowngrade {
		t.Fatalf("downgrade: %+v %v", ch, err)
	}
	if ch, err = e.c.Waive(ctx, a.SubscriptionID); err != nil || ch.After.Status != billing.StatusWaived || len(ch.Created) != 1 {
		t.Fatalf("waive: %+v %v", ch, err)
	}
	if ch.Created[0].ReceiptTierName != "Lite:v1" || ch.Created[0].Amount != billing.MustParseAmount("2.99") {
		t.Fatalf("next period after pending downgrade: %+v", ch.Created[0])
	}
	_, err = e.c.Cancel(ctx, a.SubscriptionID)
	require.ErrorIs(t, err, billing.ErrNotCollectible, "cancel of a waived record")
	if _, err = e.c.Cancel(ctx, ch.Created[0].SubscriptionID); err != nil {
		t.Fatal(err)
	}
	r, err := e.c.Reactivate(ctx, "u1", jan31.AddDate(0, 3, 0))
	if err != nil || r.Process != billing.ProcessReactivation || r.UpdatedEvent != billing.EventUserReactivated {
		t.Fatalf("reactivate: %+v %v", r, err)
	}
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u1")
}

// TestCollectorSettlementBeforeItsAttemptIsRecorded: the processor charged
// (ACH submitted) but the collector saw a timeout, so the record does not
// know the transaction when the settlement arrives: ErrSettlementEarly, no
// write; after the rerun records the attempt, the redelivered event applies.
func TestCollectorSettlementBeforeItsAttemptIsRecorded(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.UnknownAfterCharge(billingtest.Pending(), nil))
	e.run(billing.RunScheduled)
	charges := e.pay.ChargesFor(s.SubscriptionID)
	require.Len(t, charges, 1, "charges = %+v", charges)
	ev := billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: charges[0].TransactionID, Kind: billing.SettlementSettled}
	// The processor cannot be reached to resolve the attempt: the event is
	// early, and nothing is written.
	e.pay.SetUnreachable(true)
	_, changed, err := e.c.ApplySettlement(context.Background(), ev)
	if !errors.Is(err, billing.ErrSettlementEarly) || !errors.Is(err, billing.ErrTransactionMismatch) || changed {
		t.Fatalf("early settlement: changed=%v err=%v", changed, err)
	}
	if cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID); cur.Status != billing.StatusScheduled || !cur.InFlight() {
		t.Fatalf("early settlement wrote: %+v", cur)
	}
	// Redelivered once the processor answers: the settlement first
	// replays the attempt's key (ACHSENT recorded), then applies.
	e.pay.SetUnreachable(false)
	e.clock.Advance(time.Hour)
	got, changed, err := e.c.ApplySettlement(context.Background(), ev)
	if err != nil || !changed || got.Status != billing.StatusCompleted {
		t.Fatalf("redelivered settlement: %+v %v %v", got.Status, changed, err)
	}
	// A settlement for a transaction the record never had, once it is
	// past collection, is a plain mismatch.
	other := ev
	other.TransactionID = "txn-other"
	if _, _, err := e.c.ApplySettlement(context.Background(), other); !errors.Is(err, billing.ErrTransactionMismatch) || errors.Is(err, billing.ErrSettlementEarly) {
		t.Fatalf("foreign transaction: %v", err)
	}
	billingtest.RequireNoDoubleCharge(t, e.pay)
}
