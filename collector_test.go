package billing_test

import (
	"context"
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
	e.store = billingtest.NewMemoryStore(t, memory.Options{PageSize: 7})
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

func (e *collectorEnv) add(user string, date time.Time, st billing.Status, mut ...func(*billing.Period)) billing.Period {
	e.t.Helper()
	s := envRecord(user, date, st)
	for _, m := range mut {
		m(&s)
	}
	require.NoError(e.t, e.repo.Add(context.Background(), &s))
	return s
}

// addBatch writes SCHEDULED records of user on dates with one AddAll, as
// another service's batch would (Add keeps a legacy user to one open
// record).
func (e *collectorEnv) addBatch(user string, dates ...time.Time) {
	e.t.Helper()
	var recs []billing.Period
	for _, d := range dates {
		recs = append(recs, envRecord(user, d, billing.StatusScheduled))
	}
	_, err := e.repo.AddAll(context.Background(), recs)
	require.NoError(e.t, err)
}

func envRecord(user string, date time.Time, st billing.Status) billing.Period {
	return billing.Period{UserID: user, SubscriptionID: user + "-" + date.Format("20060102"), BillingDate: date,
		Amount: billing.MustParseAmount("4.99"), Status: st, BillingPeriod: billing.BillingPeriod(date), Term: billing.TermMonthly,
		AnchorDay: date.Day(), ReceiptTierName: "Plus:v2", CreatedDate: date.AddDate(0, -1, 0), LastRunDate: date.AddDate(0, -1, 0)}
}

func (e *collectorEnv) run(kind billing.RunKind) *billing.Report {
	e.t.Helper()
	return runToCompletion(e.t, e.c, kind)
}

// runToCompletion runs kind on c through every continuation, as the
// invocations of one run would, and returns the sum of their reports.
func runToCompletion(t testing.TB, c *billing.Collector, kind billing.RunKind) *billing.Report {
	t.Helper()
	req := billing.RunRequest{Kind: kind}
	var total *billing.Report
	for {
		rep, err := c.Run(context.Background(), req)
		require.NoError(t, err, "%s run", kind)
		if total == nil {
			total = rep
		} else {
			billing.AddReport(total, rep)
		}
		if rep.Next == "" {
			return total
		}
		req.Cursor = rep.Next
	}
}

func (e *collectorEnv) records(user string) []billing.Period {
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
	require.Equal(t, 1, rep.Attempted, "report = %+v", rep)
	require.Equal(t, 1, rep.Collected, "report = %+v", rep)
	recs := e.records("u1")
	require.Len(t, recs, 2, "u1 has %d records, want 2", len(recs))
	got, next := recs[0], recs[1]
	assert.Equal(t, billing.StatusCompleted, got.Status, "collected record = %+v", got)
	assert.Equal(t, 1, got.Attempt, "collected record = %+v", got)
	assert.Equal(t, billing.ProcessInitial, got.Process, "collected record = %+v", got)
	assert.False(t, got.InitialRunDate.IsZero(), "collected record = %+v", got)
	assert.False(t, got.CompletionDate.IsZero(), "collected record = %+v", got)
	assert.NotEmpty(t, got.TransactionID, "collected record = %+v", got)
	assert.Equal(t, "6789", got.ReceiptAccountMask, "collected record = %+v", got)
	want := time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC)
	assert.Equal(t, billing.StatusScheduled, next.Status, "next period = %+v", next)
	assert.True(t, next.BillingDate.Equal(want), "next period = %+v", next)
	assert.Equal(t, 31, next.AnchorDay, "next period = %+v", next)
	assert.Equal(t, s.Amount, next.Amount, "next period = %+v", next)
	assert.Equal(t, "02/2024", next.BillingPeriod, "next period = %+v", next)
	assert.Equal(t, "gen-0001", next.SubscriptionID, "next period = %+v", next)
	calls := e.pay.Calls()
	if assert.Len(t, calls, 1, "provider calls = %+v", calls) {
		assert.Equal(t, billing.IdempotencyKey(s.SubscriptionID, 1), calls[0].Request.IdempotencyKey, "provider calls = %+v", calls)
		assert.Equal(t, s.Amount, calls[0].Request.Amount, "provider calls = %+v", calls)
	}
	assert.Equal(t, 1, e.events.Count(billing.EventPaymentSucceeded), "events = %+v", e.events.Events())
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u1")
	rows, _ := e.hist.ListByUser(context.Background(), "u1")
	assert.Len(t, rows, 3, "history rows = %d, want 3 (add, attempt, next period)", len(rows))
	// A second run finds nothing due.
	assert.Zero(t, e.run(billing.RunScheduled).Attempted, "second run attempted")
}

func TestCollectorDeclineAndDailyRetry(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.Declined("R01 insufficient funds", true), billingtest.Declined("R01", true), billingtest.Succeeded())
	e.run(billing.RunScheduled)
	cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID)
	require.Equal(t, billing.StatusError, cur.Status, "after decline: %+v", cur)
	require.Equal(t, "R01 insufficient funds", cur.PaymentError, "after decline: %+v", cur)
	require.Equal(t, 1, cur.Attempt, "after decline: %+v", cur)
	// Same day: the retry policy waits.
	e.clock.Advance(time.Hour)
	same := e.run(billing.RunRetry)
	require.Zero(t, same.Attempted, "retried on the same day: %+v", same)
	e.clock.Advance(24 * time.Hour)
	e.run(billing.RunRetry) // declined again
	e.clock.Advance(24 * time.Hour)
	rep := e.run(billing.RunRetry)
	require.Equal(t, 1, rep.Collected, "third attempt: %+v", rep)
	keys := e.pay.KeysFor(s.SubscriptionID)
	require.Len(t, keys, 3, "keys = %v", keys)
	require.Equal(t, billing.IdempotencyKey(s.SubscriptionID, 3), keys[2], "keys = %v", keys)
	cur, _ = e.repo.GetByID(context.Background(), s.SubscriptionID)
	require.Equal(t, billing.StatusCompleted, cur.Status, "after retry: %+v", cur)
	require.Empty(t, cur.PaymentError, "after retry: %+v", cur)
	require.Equal(t, billing.ProcessRetry, cur.Process, "after retry: %+v", cur)
	require.Len(t, e.records("u1"), 2, "u1 records, want 2 (one next period only)")
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u1")
}

func TestCollectorUnknownOutcomeReusesKey(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil))
	rep := e.run(billing.RunScheduled)
	require.Equal(t, 1, rep.Unknown, "report = %+v", rep)
	require.Len(t, rep.Failed, 1, "report = %+v", rep)
	cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID)
	require.Equal(t, billing.StatusScheduled, cur.Status, "record after unknown outcome = %+v", cur)
	require.Zero(t, cur.Attempt, "record after unknown outcome = %+v", cur)
	require.Len(t, e.records("u1"), 1, "unknown outcome opened the next period")
	rep = e.run(billing.RunScheduled)
	require.Equal(t, 1, rep.Collected, "rerun: %+v", rep)
	calls := e.pay.Calls()
	require.Len(t, calls, 2, "calls = %+v, want the same key twice, the second replayed", calls)
	require.Equal(t, calls[0].Request.IdempotencyKey, calls[1].Request.IdempotencyKey, "calls = %+v, want the same key twice, the second replayed", calls)
	require.True(t, calls[1].Replayed, "calls = %+v, want the same key twice, the second replayed", calls)
	require.Len(t, e.pay.ChargesFor(s.SubscriptionID), 1, "charged twice")
	billingtest.RequireNoDoubleCharge(t, e.pay)
}

func TestCollectorACHSettlement(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.Pending())
	e.run(billing.RunScheduled)
	cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID)
	require.Equal(t, billing.StatusACHSent, cur.Status, "after submit: %+v", cur)
	require.NotEmpty(t, cur.TransactionID, "after submit: %+v", cur)
	ctx := context.Background()
	// A return must name the record's debit. (A settlement of another
	// transaction is money for the period: it is recorded, see
	// TestSettlementOfEarlierAttemptRecordsUnpaidPeriod.)
	_, _, err := e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: "other", Kind: billing.SettlementReturned})
	require.ErrorIs(t, err, billing.ErrTransactionMismatch, "mismatch")
	ev := billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: cur.TransactionID, Kind: billing.SettlementSettled}
	got, changed, err := e.c.ApplySettlement(ctx, ev)
	require.NoError(t, err, "settle")
	require.True(t, changed, "settle: %+v", got)
	require.Equal(t, billing.StatusCompleted, got.Status, "settle: %+v", got)
	_, changed, err = e.c.ApplySettlement(ctx, ev)
	require.NoError(t, err, "replay")
	require.False(t, changed, "replay changed")
	_, _, err = e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: cur.TransactionID, Kind: billing.SettlementReturned})
	require.ErrorIs(t, err, billing.ErrIllegalTransition, "return after settlement")
	ref := billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: cur.TransactionID, Kind: billing.SettlementRefunded}
	got, changed, err = e.c.ApplySettlement(ctx, ref)
	require.NoError(t, err, "refund")
	require.True(t, changed, "refund: %+v", got)
	require.Equal(t, billing.StatusRefunded, got.Status, "refund: %+v", got)
	require.Equal(t, 1, e.events.Count(billing.EventPaymentRefunded), "events: %+v", e.events.Events())
	require.Equal(t, 1, e.events.Count(billing.EventPaymentSucceeded), "events: %+v", e.events.Events())
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
	require.NoError(t, err, "return")
	require.True(t, changed, "return: %+v", got)
	require.Equal(t, billing.StatusError, got.Status, "return: %+v", got)
	require.Equal(t, "R01", got.PaymentError, "return: %+v", got)
	require.Equal(t, 1, e.events.Count(billing.EventPaymentReturned), "no payment-failed event")
	// The settlement of the same debit arriving late is recorded: it
	// cannot be told from a recovery, and the customer must not pay the
	// period twice (see Collector.ApplySettlement).
	late := ret
	late.Kind = billing.SettlementSettled
	got, changed, err = e.c.ApplySettlement(context.Background(), late)
	require.NoError(t, err, "late settlement")
	require.True(t, changed, "late settlement")
	require.Equal(t, billing.StatusCompleted, got.Status, "late settlement")
	require.Equal(t, 1, e.events.Count(billing.EventPaymentReturned), "one payment-failed event")
}

func TestCollectorStaleAndPause(t *testing.T) {
	e := newCollectorEnv(t)
	old := e.add("u-old", jan31.AddDate(0, 0, -40), billing.StatusScheduled)
	p := e.add("u-pause", jan31.AddDate(0, 0, -1), billing.StatusPaused, func(s *billing.Period) { s.PauseDurationMonths = 2 })
	rep := e.run(billing.RunScheduled)
	require.Equal(t, 1, rep.Stale, "scheduled run: %+v", rep)
	require.Zero(t, rep.Attempted, "scheduled run: %+v", rep)
	st, _ := e.repo.GetByID(context.Background(), old.SubscriptionID)
	require.Equal(t, billing.StatusStale, st.Status, "stale record %+v", st)
	require.Len(t, e.records("u-old"), 2, "stale record %+v", st)
	require.Equal(t, 1, e.events.Count(billing.EventStale), "stale record %+v", st)
	e.run(billing.RunPause)
	recs := e.records("u-pause")
	require.Len(t, recs, 2, "after first pause run: %+v", recs)
	require.Equal(t, billing.StatusPausedSkipped, recs[0].Status, "after first pause run: %+v", recs)
	require.Equal(t, billing.UpdatedPauseSkipped, recs[0].UpdatedEvent, "after first pause run: %+v", recs)
	require.Equal(t, billing.StatusPaused, recs[1].Status, "after first pause run: %+v", recs)
	require.Equal(t, 1, recs[1].PauseDurationMonths, "after first pause run: %+v", recs)
	require.Equal(t, billing.UpdatedPausePendingResume, recs[1].UpdatedEvent, "after first pause run: %+v", recs)
	e.clock.Set(recs[1].BillingDate.Add(time.Hour))
	e.run(billing.RunPause)
	recs = e.records("u-pause")
	require.Len(t, recs, 3, "after second pause run: %+v", recs)
	require.Equal(t, billing.StatusScheduled, recs[2].Status, "after second pause run: %+v", recs)
	require.Equal(t, billing.UpdatedPauseResume, recs[2].UpdatedEvent, "after second pause run: %+v", recs)
	require.Zero(t, recs[2].PauseDurationMonths, "after second pause run: %+v", recs)
	_ = p
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u-pause")
}

func TestCollectorLockedUserIsSkippedUntouched(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	lease, err := e.locker.Lock(context.Background(), "u1")
	require.NoError(t, err)
	rep := e.run(billing.RunScheduled)
	require.Equal(t, 1, rep.SkippedLocked, "report = %+v", rep)
	require.Zero(t, rep.Attempted, "report = %+v", rep)
	require.Zero(t, e.pay.CallCount(), "report = %+v", rep)
	cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID)
	require.Equal(t, billing.StatusScheduled, cur.Status, "locked record was touched")
	require.True(t, cur.LastRunDate.Equal(s.LastRunDate), "locked record was touched")
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
	require.Equal(t, 1, e.pay.CallCount(), "provider calls")
	require.Len(t, e.records("u1"), 2, "records")
	billingtest.RequireNoDoubleCharge(t, e.pay)
}

func TestCollectorAdminChanges(t *testing.T) {
	e := newCollectorEnv(t)
	ctx := context.Background()
	a := e.add("u1", jan31.AddDate(0, 0, 10), billing.StatusScheduled)
	ch, err := e.c.Periods().Pause(ctx, a.SubscriptionID, 2)
	require.NoError(t, err, "pause")
	require.Equal(t, billing.StatusScheduled, ch.Before.Status, "pause: %+v", ch)
	require.Equal(t, billing.StatusPaused, ch.After.Status, "pause: %+v", ch)
	require.Equal(t, 2, ch.After.PauseDurationMonths, "pause: %+v", ch)
	ch, err = e.c.Periods().Resume(ctx, a.SubscriptionID)
	require.NoError(t, err, "resume")
	require.Equal(t, billing.StatusScheduled, ch.After.Status, "resume: %+v", ch)
	require.Equal(t, billing.UpdatedPauseResume, ch.After.UpdatedEvent, "resume: %+v", ch)
	moved := jan31.AddDate(0, 0, 12)
	ch, err = e.c.Periods().Move(ctx, a.SubscriptionID, moved)
	require.NoError(t, err, "change date")
	require.True(t, ch.After.BillingDate.Equal(moved), "change date: %+v", ch)
	recs := e.records("u1")
	require.Len(t, recs, 1, "records after move: %+v", recs)
	require.True(t, recs[0].BillingDate.Equal(moved), "records after move: %+v", recs)
	ch, err = e.c.Periods().ChangeTier(ctx, a.SubscriptionID, "Lite:v1", billing.MustParseAmount("2.99"), true)
	require.NoError(t, err, "downgrade")
	require.True(t, ch.After.IsPendingDowngrade, "downgrade: %+v", ch)
	ch, err = e.c.Periods().WaiveByID(ctx, a.SubscriptionID)
	require.NoError(t, err, "waive")
	require.Equal(t, billing.StatusWaived, ch.After.Status, "waive: %+v", ch)
	require.Len(t, ch.Created, 1, "waive: %+v", ch)
	require.Equal(t, "Lite:v1", ch.Created[0].ReceiptTierName, "next period after pending downgrade: %+v", ch.Created[0])
	require.Equal(t, billing.MustParseAmount("2.99"), ch.Created[0].Amount, "next period after pending downgrade: %+v", ch.Created[0])
	_, err = e.c.Periods().Cancel(ctx, a.SubscriptionID)
	require.ErrorIs(t, err, billing.ErrNotCollectible, "cancel of a waived record")
	_, err = e.c.Periods().Cancel(ctx, ch.Created[0].SubscriptionID)
	require.NoError(t, err)
	r, err := e.c.Reactivate(ctx, "u1", jan31.AddDate(0, 3, 0))
	require.NoError(t, err, "reactivate")
	require.Equal(t, billing.ProcessReactivation, r.Process, "reactivate: %+v", r)
	require.Equal(t, billing.UpdatedUserReactivated, r.UpdatedEvent, "reactivate: %+v", r)
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
	require.ErrorIs(t, err, billing.ErrSettlementEarly, "early settlement")
	require.ErrorIs(t, err, billing.ErrTransactionMismatch, "early settlement")
	require.False(t, changed, "early settlement changed")
	cur, _ := e.repo.GetByID(context.Background(), s.SubscriptionID)
	require.Equal(t, billing.StatusScheduled, cur.Status, "early settlement wrote: %+v", cur)
	require.True(t, cur.InFlight(), "early settlement wrote: %+v", cur)
	// Redelivered once the processor answers: the settlement first
	// replays the attempt's key (ACHSENT recorded), then applies.
	e.pay.SetUnreachable(false)
	e.clock.Advance(time.Hour)
	got, changed, err := e.c.ApplySettlement(context.Background(), ev)
	require.NoError(t, err, "redelivered settlement")
	require.True(t, changed, "redelivered settlement: %+v", got.Status)
	require.Equal(t, billing.StatusCompleted, got.Status, "redelivered settlement")
	// A settlement for a transaction the record never had, once it is
	// past collection, is a plain mismatch.
	other := ev
	other.TransactionID = "txn-other"
	_, _, err = e.c.ApplySettlement(context.Background(), other)
	require.ErrorIs(t, err, billing.ErrTransactionMismatch, "foreign transaction")
	require.NotErrorIs(t, err, billing.ErrSettlementEarly, "foreign transaction")
	billingtest.RequireNoDoubleCharge(t, e.pay)
}
