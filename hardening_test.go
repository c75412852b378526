package billing_test

import (
	"context"
	"errors"
	"github.com/dynabill/billing/internal/av"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// panicOnce is a provider that panics on its first n calls, then charges
// through next.
type panicOnce struct {
	next  billing.PaymentProvider
	left  atomic.Int32
	calls atomic.Int32
}

func (p *panicOnce) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	p.calls.Add(1)
	if p.left.Add(-1) >= 0 {
		panic("processor SDK: nil map")
	}
	return p.next.Collect(ctx, req)
}

// TestPanicLeavesNoLock: a provider that panics once, behind a manual
// repayment (an HTTP handler would recover it) or a run, leaves the user's
// lock free: the panic is a *PanicError, the record's attempt stays in
// flight, and the next collection resolves it with the same key and charges
// once. Before, a single collection's lock stayed held for ever (409
// locked, skipped_locked in every run).
func TestPanicLeavesNoLock(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"manual", "run", "collect-user"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			p := &panicOnce{}
			p.left.Store(1)
			e := newCollectorEnv(t, func(c *billing.Config) { p.next = c.Provider; c.Provider = p })
			due := e.add("u1", jan31, billing.StatusScheduled)
			other := e.add("u2", jan31, billing.StatusScheduled)
			ctx := t.Context()
			var err error
			switch via {
			case "manual":
				_, err = e.c.Periods().Repay(ctx, due.SubscriptionID)
			case "collect-user":
				_, err = e.c.CollectUser(ctx, "u1", billing.ProcessWebhook)
			case "run":
				// The run goes on with the other user after the panic.
				rep, rerr := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
				require.NoError(t, rerr)
				require.Len(t, rep.Failed, 1, "%+v", rep)
				assert.Contains(t, rep.Failed[0].Reason, "panic")
				assert.Equal(t, 1, rep.Collected, "the other user is collected: %+v", rep)
			}
			if via != "run" {
				var pe *billing.PanicError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "processor SDK: nil map", pe.Value)
				assert.NotEmpty(t, pe.Stack)
			}
			assert.False(t, e.locker.Locked("u1"), "u1's lock is released")
			assert.False(t, e.locker.Locked("u2"), "u2's lock is released")

			// The record is in flight; the next collection resolves it once.
			var panicked billing.Period
			for _, r := range append(e.records("u1"), e.records("u2")...) {
				if r.InFlight() {
					panicked = r
				}
			}
			require.NotEmpty(t, panicked.SubscriptionID, "the attempt made before the panic is durable")
			_, err = e.c.Periods().Repay(ctx, panicked.SubscriptionID)
			require.NoError(t, err)
			charged := []billing.Period{due}
			if via == "run" {
				charged = append(charged, other)
			}
			for _, s := range charged {
				recs := e.records(s.UserID)
				require.Equal(t, billing.StatusCompleted, recs[0].Status, "%+v", recs)
			}
			assert.Equal(t, len(charged), e.pay.CallCount(), "one charge per collected user reached the processor")
			billingtest.RequireNoDoubleCharge(t, e.pay)
		})
	}
}

// panickyRepo panics in ListByUser while armed.
type panickyRepo struct {
	billing.Repository
	armed atomic.Bool
}

func (r *panickyRepo) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	if r.armed.Load() {
		panic("store adapter bug")
	}
	return r.Repository.ListByUser(ctx, userID)
}

// TestPanicInAnAdminChangeLeavesNoLock: an event sink that panics after a
// manual repayment's write, and a store that panics inside a waive, leave
// the lock free; the repayment is recorded, the waive is not made.
func TestPanicInAnAdminChangeLeavesNoLock(t *testing.T) {
	t.Parallel()
	var sinkPanics atomic.Bool
	sinkPanics.Store(true)
	var repo *panickyRepo
	e := newCollectorEnv(t, func(c *billing.Config) {
		c.Events = billing.EventSinkFunc(func(context.Context, billing.Event) error {
			if sinkPanics.Load() {
				panic("sink")
			}
			return nil
		})
		repo = &panickyRepo{Repository: c.Repository}
		c.Repository = repo
	})
	s := e.add("u1", jan31, billing.StatusScheduled)
	_, err := e.c.Periods().Repay(t.Context(), s.SubscriptionID)
	var pe *billing.PanicError
	require.ErrorAs(t, err, &pe)
	assert.False(t, e.locker.Locked("u1"))
	recs := e.records("u1")
	require.Len(t, recs, 2, "collected and next period opened before the sink ran: %+v", recs)
	assert.Equal(t, billing.StatusCompleted, recs[0].Status)

	sinkPanics.Store(false)
	repo.armed.Store(true)
	_, err = e.c.Periods().WaiveByID(t.Context(), recs[1].SubscriptionID)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "store adapter bug", pe.Value)
	assert.False(t, e.locker.Locked("u1"))
	repo.armed.Store(false)
	assert.Equal(t, recs, e.records("u1"), "the waive was not made")
}

// blockingRelease is a lease whose Release waits for its context.
type blockingRelease struct {
	billing.Lease
	hadDeadline atomic.Bool
}

func (l *blockingRelease) Release(ctx context.Context) error {
	_, ok := ctx.Deadline()
	l.hadDeadline.Store(ok)
	if ok {
		return nil // a bounded release: the test need not wait for it
	}
	<-ctx.Done() // never, before: the release had no deadline
	return ctx.Err()
}

type blockingLocker struct {
	billing.Locker
	last *blockingRelease
}

func (l *blockingLocker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	lease, err := l.Locker.Lock(ctx, userID)
	if err != nil {
		return nil, err
	}
	l.last = &blockingRelease{Lease: lease}
	return l.last, nil
}

// TestReleaseHasADeadline: the release after a collection is not cancelled
// with the caller's context, but it is bounded.
func TestReleaseHasADeadline(t *testing.T) {
	t.Parallel()
	bl := &blockingLocker{}
	e := newCollectorEnv(t, func(c *billing.Config) { bl.Locker = c.Locker; c.Locker = bl })
	s := e.add("u1", jan31, billing.StatusScheduled)
	done := make(chan error, 1)
	go func() { _, err := e.c.Periods().Repay(context.Background(), s.SubscriptionID); done <- err }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the release never returned")
	}
	assert.True(t, bl.last.hadDeadline.Load())
}

// ctxKey marks the caller's context.
type ctxKey struct{}

// ctxCheckingRepo fails every read whose context lost the caller's values.
type ctxCheckingRepo struct {
	billing.Repository
	lost atomic.Int32
}

func (r *ctxCheckingRepo) check(ctx context.Context) {
	if ctx.Value(ctxKey{}) == nil {
		r.lost.Add(1)
	}
}

func (r *ctxCheckingRepo) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	r.check(ctx)
	return r.Repository.ListByUser(ctx, userID)
}

func (r *ctxCheckingRepo) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	r.check(ctx)
	return r.Repository.Recent(ctx, userID, limit)
}

// TestAdminChangesReadWithTheCallersContext: a waive's next-period read
// runs on the caller's context (its deadline, its values), not on
// context.Background().
func TestAdminChangesReadWithTheCallersContext(t *testing.T) {
	t.Parallel()
	var repo *ctxCheckingRepo
	e := newCollectorEnv(t, func(c *billing.Config) { repo = &ctxCheckingRepo{Repository: c.Repository}; c.Repository = repo })
	s := e.add("u1", jan31, billing.StatusScheduled)
	ctx := context.WithValue(t.Context(), ctxKey{}, true)
	ch, err := e.c.Periods().WaiveByID(ctx, s.SubscriptionID)
	require.NoError(t, err)
	require.Len(t, ch.Created, 1)
	assert.Zero(t, repo.lost.Load(), "reads that dropped the caller's context")
}

// TestDatesAreValidatedWhereTheyEnter: a billing-date move or a
// reactivation to a date that would leave the user unbilled (year 0, 1990,
// 1969, year 10000, far ahead) is refused with a *FieldError wrapping
// ErrInvalidDate, and nothing changes; a date with an offset keeps its
// written day. Before, every one of them was accepted (or failed later,
// in every run).
func TestDatesAreValidatedWhereTheyEnter(t *testing.T) {
	t.Parallel()
	now := jan31.Add(time.Hour)
	refused := map[string]time.Time{
		"year 0":             time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		"1990":               time.Date(1990, 4, 16, 0, 0, 0, 0, time.UTC),
		"1969-12-31":         time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
		"year 10000":         time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		"past the window":    now.AddDate(0, 0, -31),
		"four years ahead":   now.AddDate(4, 0, 0),
		"zero":               {},
		"2205 for 2025 typo": time.Date(2205, 3, 1, 0, 0, 0, 0, time.UTC),
	}
	for name, date := range refused {
		t.Run("move/"+name, func(t *testing.T) {
			t.Parallel()
			e := newCollectorEnv(t)
			s := e.add("u1", jan31.AddDate(0, 0, 5), billing.StatusScheduled)
			before := e.records("u1")
			_, err := e.c.Periods().Move(t.Context(), s.SubscriptionID, date)
			require.ErrorIs(t, err, billing.ErrInvalidDate)
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "billing_date", fe.Field)
			assert.False(t, errors.Is(err, billing.ErrConflict))
			assert.Equal(t, before, e.records("u1"), "nothing changed")
			assert.False(t, e.locker.Locked("u1"))
		})
		t.Run("reactivate/"+name, func(t *testing.T) {
			t.Parallel()
			e := newCollectorEnv(t)
			e.add("u1", jan31.AddDate(0, 0, -40), billing.StatusCancelled)
			before := e.records("u1")
			_, err := e.c.Reactivate(t.Context(), "u1", date)
			require.ErrorIs(t, err, billing.ErrInvalidDate)
			assert.Equal(t, before, e.records("u1"), "nothing changed")
		})
	}
	t.Run("offset keeps the written day", func(t *testing.T) {
		t.Parallel()
		e := newCollectorEnv(t)
		s := e.add("u1", jan31.AddDate(0, 0, 5), billing.StatusScheduled)
		ch, err := e.c.Periods().Move(t.Context(), s.SubscriptionID, time.Date(2024, 2, 16, 9, 30, 0, 0, time.FixedZone("+14", 14*3600)))
		require.NoError(t, err)
		assert.Equal(t, time.Date(2024, 2, 16, 9, 30, 0, 0, time.UTC), ch.After.BillingDate)
		assert.Equal(t, 16, ch.After.AnchorDay)
	})
	t.Run("reactivate before the last paid period", func(t *testing.T) {
		t.Parallel()
		e := newCollectorEnv(t)
		e.add("u1", jan31.AddDate(0, 0, -40), billing.StatusCompleted) // Dec 22, paid until Jan 22
		e.add("u1", jan31.AddDate(0, 0, 10), billing.StatusCancelled)
		_, err := e.c.Reactivate(t.Context(), "u1", jan31.AddDate(0, 0, -25))
		require.ErrorIs(t, err, billing.ErrInvalidDate)
		r, err := e.c.Reactivate(t.Context(), "u1", jan31.AddDate(0, 0, 2)) // before the cancelled one: allowed
		require.NoError(t, err)
		assert.Equal(t, jan31.AddDate(0, 0, 2), r.BillingDate)
	})
}

// TestTooOldRecordReopensInOneStep: a SCHEDULED record years old (written
// by another program, or moved there before dates were checked) is marked
// stale and the subscription reopens at its first billing date that is not
// too old to collect, in one run. Before, each daily run marked one month
// stale and opened the next: about 411 runs before billing resumed.
func TestTooOldRecordReopensInOneStep(t *testing.T) {
	t.Parallel()
	e := newCollectorEnv(t)
	old := time.Date(1990, 4, 16, 15, 0, 0, 0, time.UTC)
	e.add("u1", old, billing.StatusScheduled)
	rep := e.run(billing.RunScheduled)
	recs := e.records("u1")
	require.Len(t, recs, 2, "%+v", recs)
	assert.Equal(t, billing.StatusStale, recs[0].Status)
	next := recs[1]
	assert.Equal(t, billing.StatusScheduled, next.Status)
	assert.Equal(t, time.Date(2024, 1, 16, 15, 0, 0, 0, time.UTC), next.BillingDate, "the first billing date not too old to collect")
	assert.Equal(t, 16, next.AnchorDay)
	assert.Equal(t, 1, rep.Stale)
	// It is due: the next day's run collects it.
	e.clock.Advance(24 * time.Hour)
	rep = e.run(billing.RunScheduled)
	assert.Equal(t, 1, rep.Collected)
	assert.Equal(t, billing.StatusCompleted, e.records("u1")[1].Status)
}

// TestTierPriceIsTheHosts: a tier change's amount comes from the host's
// price list, or is bounded; a caller's zero or huge price is refused and
// nothing changes. Before, any non-negative amount was taken.
func TestTierPriceIsTheHosts(t *testing.T) {
	t.Parallel()
	huge, err := billing.ParseAmount("92233720368547758.07")
	require.NoError(t, err)
	prices := billing.PriceListMap{"Plus:v2": billing.MustParseAmount("4.99"), "Max:v1": billing.MustParseAmount("19.99")}
	cases := []struct {
		name   string
		cfg    func(*billing.Config)
		tier   string
		amount billing.Amount
		want   billing.Amount
		err    error
		field  string
	}{
		{name: "zero", tier: "Free:v1", amount: 0, err: billing.ErrInvalidAmount, field: "amount"},
		{name: "huge", tier: "Plus:v2", amount: huge, err: billing.ErrInvalidAmount, field: "amount"},
		{name: "over max charge", tier: "Plus:v2", amount: billing.DefaultMaxCharge + 1, err: billing.ErrInvalidAmount, field: "amount"},
		{name: "negative", tier: "Plus:v2", amount: -1, err: billing.ErrInvalidAmount, field: "amount"},
		{name: "empty tier", tier: "", amount: 100, err: billing.ErrUnknownTier, field: "tier"},
		{name: "tier too long", tier: strings.Repeat("T", 257), amount: 100, err: billing.ErrUnknownTier, field: "tier"},
		{name: "tier with a NUL", tier: "Plus\x00:v2", amount: 100, err: billing.ErrUnknownTier, field: "tier"},
		{name: "tier with a newline", tier: "Plus:v2\nPAID IN FULL", amount: 100, err: billing.ErrUnknownTier, field: "tier"},
		{name: "tier with a tab", tier: "Plus\t:v2", amount: 100, err: billing.ErrUnknownTier, field: "tier"},
		{name: "tier with DEL", tier: "Plus\x7f:v2", amount: 100, err: billing.ErrUnknownTier, field: "tier"},
		{name: "tier with a C1 control", tier: "Plus\u0085:v2", amount: 100, err: billing.ErrUnknownTier, field: "tier"},
		{name: "tier not UTF-8", tier: "Plus\xff:v2", amount: 100, err: billing.ErrUnknownTier, field: "tier"},
		{name: "tier of 256 bytes, non-ASCII", tier: strings.Repeat("é", 128), amount: 100, want: 100},
		{name: "control character even in the price list", cfg: func(c *billing.Config) { c.Prices = billing.PriceListMap{"Bad\n:v1": 100} },
			tier: "Bad\n:v1", amount: billing.ListPrice, err: billing.ErrUnknownTier, field: "tier"},
		{name: "bounded amount", tier: "Plus:v9", amount: 999, want: 999},
		{name: "free allowed", cfg: func(c *billing.Config) { c.AllowFreeTiers = true }, tier: "Free:v1", amount: 0, want: 0},
		{name: "own max charge", cfg: func(c *billing.Config) { c.MaxCharge = 500 }, tier: "Plus:v2", amount: 501, err: billing.ErrInvalidAmount, field: "amount"},
		{name: "from the price list", cfg: func(c *billing.Config) { c.Prices = prices }, tier: "Max:v1", amount: billing.ListPrice, want: billing.MustParseAmount("19.99")},
		{name: "zero is zero, not the list's price", cfg: func(c *billing.Config) { c.Prices = prices }, tier: "Max:v1", amount: 0, err: billing.ErrInvalidAmount, field: "amount"},
		{name: "list price without a price list", tier: "Max:v1", amount: billing.ListPrice, err: billing.ErrInvalidAmount, field: "amount"},
		{name: "same as the price list", cfg: func(c *billing.Config) { c.Prices = prices }, tier: "Max:v1", amount: billing.MustParseAmount("19.99"), want: billing.MustParseAmount("19.99")},
		{name: "not the price list's", cfg: func(c *billing.Config) { c.Prices = prices }, tier: "Max:v1", amount: 1, err: billing.ErrInvalidAmount, field: "amount"},
		{name: "not in the price list", cfg: func(c *billing.Config) { c.Prices = prices }, tier: "Gold:v1", amount: 100, err: billing.ErrUnknownTier, field: "tier"},
		{name: "free in the price list refused", cfg: func(c *billing.Config) { c.Prices = billing.PriceListMap{"Free:v1": 0} }, tier: "Free:v1", amount: billing.ListPrice, err: billing.ErrInvalidAmount, field: "amount"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var muts []func(*billing.Config)
			if tc.cfg != nil {
				muts = append(muts, tc.cfg)
			}
			e := newCollectorEnv(t, muts...)
			s := e.add("u1", jan31.AddDate(0, 0, 5), billing.StatusScheduled)
			before := e.records("u1")
			ch, err := e.c.Periods().ChangeTier(t.Context(), s.SubscriptionID, tc.tier, tc.amount, false)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				var fe *billing.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tc.field, fe.Field)
				assert.Equal(t, before, e.records("u1"), "nothing changed")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, ch.After.Amount)
			assert.Equal(t, tc.tier, ch.After.ReceiptTierName)
			assert.Equal(t, tc.want, e.records("u1")[0].Amount)
		})
	}
}

// cancelOnCollect cancels the run's context from inside its first charge.
type cancelOnCollect struct {
	next   billing.PaymentProvider
	cancel atomic.Pointer[context.CancelFunc]
}

func (p *cancelOnCollect) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	if c := p.cancel.Swap(nil); c != nil {
		(*c)()
	}
	return p.next.Collect(ctx, req)
}

// TestCancelledRunKeepsItsCursor: a run whose context is cancelled while
// it handles its last page returns a cursor, and the continuation collects
// the records that page had left. Before, Next was empty and a shard run
// started again from the top (or, on the last chain, lost the records).
func TestCancelledRunKeepsItsCursor(t *testing.T) {
	t.Parallel()
	p := &cancelOnCollect{}
	e := newCollectorEnv(t, func(c *billing.Config) { p.next = c.Provider; c.Provider = p; c.Concurrency = 1 })
	users := []string{"u1", "u2", "u3", "u4", "u5"} // one page of 7
	for _, u := range users {
		e.add(u, jan31, billing.StatusScheduled)
	}
	ctx, cancel := context.WithCancel(t.Context())
	p.cancel.Store(&cancel)
	rep, err := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	require.ErrorIs(t, err, context.Canceled)
	require.NotEmpty(t, rep.Next, "the cancelled run can be continued")
	first := rep.Collected
	require.Less(t, first, len(users))
	e.clock.Advance(time.Hour) // the continuation comes an hour later
	rep, err = e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled, Cursor: rep.Next})
	require.NoError(t, err)
	assert.Equal(t, len(users), first+rep.Collected, "every due record collected once")
	billingtest.RequireNoDoubleCharge(t, e.pay)
}

// TestPanicReleasesTheDynamoDBLock: on the DynamoDB locker (moto, with
// heartbeats), a provider that panics inside a manual repayment leaves the
// lock item released at once and its heartbeat stopped: another instance
// takes the lock immediately, not after the lease, and the record's
// attempt is resolved once. Before, the lease stayed held and renewed.
func TestPanicReleasesTheDynamoDBLock(t *testing.T) {
	t.Parallel()
	e := newLockCrashEnv(t)
	p := &panicOnce{next: e.pay}
	p.left.Store(1)
	l, err := dynamostore.NewLocker(e.w, dynamostore.WithLockTable(e.locks), dynamostore.WithLeaseDuration(time.Minute),
		dynamostore.WithHeartbeatPeriod(200*time.Millisecond), dynamostore.WithLockOwner("panicking"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	c, err := billing.NewCollector(billing.Config{Repository: e.repo, History: e.hist, Locker: l, Provider: p,
		Clock: e.clock, NewID: func() string { return "lock-crash-feb" }})
	require.NoError(t, err)
	_, err = c.Periods().Repay(t.Context(), e.sub.SubscriptionID)
	var pe *billing.PanicError
	require.ErrorAs(t, err, &pe)

	other, err := dynamostore.NewLocker(e.w, dynamostore.WithLockTable(e.locks), dynamostore.WithLeaseDuration(time.Minute),
		dynamostore.WithLockOwner("other"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	lease, err := other.Lock(t.Context(), e.user)
	require.NoError(t, err, "the lock is free right after the panic")
	require.NoError(t, lease.Release(t.Context()))

	before := e.w.Calls("UpdateItem")
	time.Sleep(600 * time.Millisecond) // three heartbeat periods
	assert.Equal(t, before, e.w.Calls("UpdateItem"), "no heartbeat after the release")

	_, err = c.Periods().Repay(t.Context(), e.sub.SubscriptionID)
	require.NoError(t, err)
	recs, err := e.repo.ListByUser(t.Context(), e.user)
	require.NoError(t, err)
	assert.Equal(t, billing.StatusCompleted, recs[0].Status)
	billingtest.RequireNoDoubleCharge(t, e.pay)
}

// TestInvalidItemNeverBlocksAUser: a user whose records include one item
// that does not decode (an old COMPLETED record whose billing_amount
// another program wrote as "4,99") is collected by the scheduled run, by
// CollectUser, changed and reactivated as usual; the item is counted in
// Report.Invalid and reported as an EventInvalidRecord naming its key.
// Before, Recent and ListByUser failed, and so did every run, CollectUser
// and Reactivate for that user — on memory and on DynamoDB alike.
// rawStores opens a repository and a way to write raw items beside it,
// in memory and on the local DynamoDB-compatible server.
var rawStores = map[string]func(t *testing.T) (billing.Repository, billingtest.PutRawFunc){
	"memory": func(t *testing.T) (billing.Repository, billingtest.PutRawFunc) {
		st := billingtest.NewMemoryStore(t, memory.Options{})
		return st.Repository(), func(_ context.Context, table string, item map[string]av.AttributeValue) error {
			return st.PutRawItem(table, item)
		}
	},
	"dynamodb": func(t *testing.T) (billing.Repository, billingtest.PutRawFunc) {
		repo, _, put := storetest.DynamoRawStores(t)
		return repo, put
	},
}

// putUnreadable writes, as another program would, a record of user that
// does not decode (its amount is "4,99"); date "" leaves its billing date
// unreadable too.
func putUnreadable(t *testing.T, put billingtest.PutRawFunc, user string, date time.Time, st billing.Status, badDate string) {
	t.Helper()
	r := envRecord(user, date, st)
	r.SubscriptionID = "foreign-" + date.Format("20060102")
	item, err := layout.EncodeItem(&r)
	require.NoError(t, err)
	item[layout.AttrBillingAmount] = layout.StringAV("4,99")
	if badDate != "" {
		item[layout.AttrBillingDate] = layout.StringAV(badDate)
	}
	require.NoError(t, put(t.Context(), memory.SubscriptionsTable, item))
}

// TestUnreadableRecordGuardsNewPeriods: a record of the user that cannot
// be read is never taken as absent by a check that decides whether a new
// period may be written. Where what of it decodes (billing date, status)
// may make it the period the check looks for, the change is refused with
// ErrInvalidItem and nothing is charged or written; where it rules the
// record out, the change goes on. Once the record is repaired, the next
// run an hour later charges once and opens nothing twice.
func TestUnreadableRecordGuardsNewPeriods(t *testing.T) {
	t.Parallel()
	feb29 := jan31.AddDate(0, 0, 29) // the next billing date of jan31
	for name, open := range rawStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			setup := func(t *testing.T) (*collectorEnv, billingtest.PutRawFunc) {
				repo, put := open(t)
				e := newCollectorEnv(t, func(c *billing.Config) { c.Repository = repo })
				e.repo = repo
				return e, put
			}
			t.Run("run", func(t *testing.T) {
				for _, c := range []struct {
					name    string
					date    time.Time
					badDate string
					refused bool
				}{
					{"next period at another hour", feb29.Add(3 * time.Hour), "", true},
					{"a later period", feb29.AddDate(0, 1, 0), "", true},
					{"billing date unreadable", feb29, "31/01/2024", true},
					{"between, before the next period's day", jan31.AddDate(0, 0, 10), "", false},
				} {
					t.Run(c.name, func(t *testing.T) {
						e, put := setup(t)
						ctx := t.Context()
						due := e.add("u1", jan31, billing.StatusScheduled)
						putUnreadable(t, put, "u1", c.date, billing.StatusScheduled, c.badDate)
						rep, err := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
						require.NoError(t, err)
						assert.Positive(t, rep.Invalid, "%+v", rep)
						if !c.refused {
							assert.Equal(t, 1, rep.Collected, "%+v", rep)
							require.Len(t, e.pay.ChargesFor(due.SubscriptionID), 1)
							require.Len(t, e.records("u1"), 2, "the collected record and its next period")
							return
						}
						assert.Zero(t, rep.Attempted, "%+v", rep)
						assert.Zero(t, e.pay.CallCount(), "charged while its next period could not be told")
						require.Len(t, rep.Failed, 1, "%+v", rep)
						assert.Contains(t, rep.Failed[0].Reason, "cannot be read may be its next period", "%+v", rep.Failed)
						got, err := e.repo.Get(ctx, "u1", jan31)
						require.NoError(t, err)
						assert.Equal(t, billing.StatusScheduled, got.Status)
						assert.False(t, got.InFlight(), "an attempt was recorded")
						require.Len(t, e.records("u1"), 1, "only the readable record")
					})
				}
			})
			t.Run("repaired, the next run charges once and opens nothing", func(t *testing.T) {
				e, put := setup(t)
				ctx := t.Context()
				due := e.add("u1", jan31, billing.StatusScheduled)
				next := feb29.Add(3 * time.Hour)
				putUnreadable(t, put, "u1", next, billing.StatusScheduled, "")
				rep := e.run(billing.RunScheduled)
				require.Zero(t, rep.Attempted, "%+v", rep)
				// The other program repairs its record; the next run, an hour later.
				fixed := envRecord("u1", next, billing.StatusScheduled)
				fixed.SubscriptionID = "foreign-" + next.Format("20060102")
				item, err := layout.EncodeItem(&fixed)
				require.NoError(t, err)
				require.NoError(t, put(ctx, memory.SubscriptionsTable, item))
				e.clock.Advance(time.Hour)
				rep = e.run(billing.RunScheduled)
				assert.Equal(t, 1, rep.Collected, "%+v", rep)
				require.Len(t, e.pay.ChargesFor(due.SubscriptionID), 1)
				recs := e.records("u1")
				require.Len(t, recs, 2, "the repaired record is the next period: %+v", recs)
				assert.Equal(t, billing.StatusCompleted, recs[0].Status)
				assert.Equal(t, fixed.SubscriptionID, recs[1].SubscriptionID)
				billingtest.RequireNoDoubleCharge(t, e.pay)
			})
			t.Run("subscribe", func(t *testing.T) {
				for _, c := range []struct {
					status  billing.Status
					refused bool
				}{{billing.StatusError, true}, {billing.StatusACHSent, true}, {billing.StatusCancelled, false}} {
					t.Run(string(c.status), func(t *testing.T) {
						e, put := setup(t)
						putUnreadable(t, put, "u1", jan31.AddDate(0, -1, 0), c.status, "")
						_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "k1", UserID: "u1",
							Amount: billing.MustParseAmount("4.99"), Tier: "Plus:v2", FirstBillingDate: jan31.AddDate(0, 0, 5)})
						if !c.refused {
							require.NoError(t, err)
							require.Len(t, e.records("u1"), 1)
							return
						}
						require.ErrorIs(t, err, billing.ErrInvalidItem)
						var fe *billing.FieldError
						require.ErrorAs(t, err, &fe)
						assert.Equal(t, c.status, fe.Status, "%v", err)
						assert.Empty(t, e.records("u1"), "written beside a record that may be open")
					})
				}
			})
			t.Run("reactivate", func(t *testing.T) {
				e, put := setup(t)
				ctx := t.Context()
				e.add("u1", jan31.AddDate(0, -1, 0), billing.StatusCancelled)
				paid := jan31.AddDate(0, 0, 1) // Feb 1, COMPLETED, unreadable
				putUnreadable(t, put, "u1", paid, billing.StatusCompleted, "")
				e.clock.Set(paid.Add(time.Hour))
				_, err := e.c.Reactivate(ctx, "u1", paid.AddDate(0, 0, -5))
				require.ErrorIs(t, err, billing.ErrInvalidItem, "a paid period billed again")
				require.Len(t, e.records("u1"), 1)
				e.clock.Advance(time.Hour)
				back, err := e.c.Reactivate(ctx, "u1", paid.AddDate(0, 0, 9))
				require.NoError(t, err, "after the unreadable paid period")
				assert.Equal(t, billing.StatusScheduled, back.Status)
				require.Len(t, e.records("u1"), 2)
			})
			t.Run("change billing date", func(t *testing.T) {
				e, put := setup(t)
				ctx := t.Context()
				cur := e.add("u1", jan31, billing.StatusScheduled)
				open := jan31.AddDate(0, 1, 15)
				putUnreadable(t, put, "u1", open, billing.StatusScheduled, "")
				_, err := e.c.Periods().Move(ctx, cur.SubscriptionID, open.AddDate(0, 0, 5))
				require.ErrorIs(t, err, billing.ErrInvalidItem, "moved past a record that may be open")
				got, err := e.repo.Get(ctx, "u1", jan31)
				require.NoError(t, err)
				assert.Equal(t, cur.LastRunDate, got.LastRunDate, "the record changed")
				e.clock.Advance(time.Hour)
				_, err = e.c.Periods().Move(ctx, cur.SubscriptionID, jan31.AddDate(0, 0, 10))
				require.NoError(t, err, "a move that stays before it")
			})
		})
	}
}

func TestInvalidItemNeverBlocksAUser(t *testing.T) {
	t.Parallel()
	for name, open := range rawStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			repo, put := open(t)
			e := newCollectorEnv(t, func(c *billing.Config) { c.Repository = repo })
			e.repo = repo
			old := envRecord("u1", jan31.AddDate(0, -1, 0), billing.StatusCompleted)
			item, err := layout.EncodeItem(&old)
			require.NoError(t, err)
			item[layout.AttrBillingAmount] = layout.StringAV("4,99")
			require.NoError(t, put(ctx, memory.SubscriptionsTable, item))
			due := e.add("u1", jan31, billing.StatusScheduled)

			rep, err := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
			require.NoError(t, err)
			assert.Equal(t, 1, rep.Collected, "%+v", rep)
			assert.Equal(t, 1, rep.Invalid, "%+v", rep)
			assert.Empty(t, rep.Failed)
			var invalid []billing.Event
			for _, ev := range e.events.Events() {
				if ev.Type == billing.EventInvalidRecord {
					invalid = append(invalid, ev)
				}
			}
			require.NotEmpty(t, invalid)
			assert.Equal(t, "u1", invalid[0].UserID)
			assert.Contains(t, invalid[0].Reason, "billing_amount")
			assert.Contains(t, invalid[0].Reason, old.BillingDate.Format("2006-01-02"), "the event names the item's key")

			recs := e.records("u1")
			require.Len(t, recs, 2, "the good records: the collected one and the next period")
			assert.Equal(t, due.SubscriptionID, recs[0].SubscriptionID)
			assert.Equal(t, billing.StatusCompleted, recs[0].Status)

			// The user's other calls work too.
			_, err = e.c.Periods().Cancel(ctx, recs[1].SubscriptionID)
			require.NoError(t, err)
			e.clock.Advance(time.Hour)
			back, err := e.c.Reactivate(ctx, "u1", recs[1].BillingDate.AddDate(0, 0, 1))
			require.NoError(t, err)
			e.clock.Set(back.BillingDate.Add(time.Hour))
			cu, err := e.c.CollectUser(ctx, "u1", billing.ProcessWebhook)
			require.NoError(t, err)
			assert.Equal(t, 1, cu.Collected)
			assert.Positive(t, cu.Invalid)
			billingtest.RequireNoDoubleCharge(t, e.pay)
		})
	}
}
