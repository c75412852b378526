package billing_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file reproduce, through the public API, what broke at
// the seams between single collections: another holder, another writer,
// another invocation of the same run, a record that ages, a processor call
// not finished yet.

// slowProvider is a processor at which the first request with the key
// hold keeps running until release is closed: meanwhile a request with
// the same key is answered "key in use" (as Stripe answers 409) and a
// lookup finds nothing, since the payment is not made yet. Every other
// request goes to inner at once.
type slowProvider struct {
	inner   *billingtest.Provider
	hold    string
	entered chan struct{} // closed once the held request is running
	release chan struct{} // closing it lets the held request finish

	mu      sync.Mutex
	running bool
	done    bool
}

func (p *slowProvider) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	p.mu.Lock()
	switch {
	case req.IdempotencyKey == p.hold && p.running:
		p.mu.Unlock()
		return billing.PaymentResult{}, fmt.Errorf("processor: 409: %w", billing.ErrKeyInUse)
	case req.IdempotencyKey == p.hold && !p.done:
		p.running = true
		p.mu.Unlock()
		close(p.entered)
		<-p.release
		res, err := p.inner.Collect(context.WithoutCancel(ctx), req)
		p.mu.Lock()
		p.running, p.done = false, true
		p.mu.Unlock()
		return res, err
	}
	p.mu.Unlock()
	return p.inner.Collect(ctx, req)
}

func (p *slowProvider) LookupPayment(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, bool, error) {
	return p.inner.LookupPayment(ctx, req)
}

func (p *slowProvider) RequestTimeout() time.Duration { return 10 * time.Minute }

// leaseRecorder is a Locker that hands out the leases it grants.
type leaseRecorder struct {
	*billingtest.Locker
	leases chan billing.Lease
}

func (l *leaseRecorder) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	lease, err := l.Locker.Lock(ctx, userID)
	if err == nil {
		select {
		case l.leases <- lease:
		default:
		}
	}
	return lease, err
}

// TestLookupNotFoundWhileTheFirstCallRuns: holder A's lease is lost while
// its processor call is still running. Holder B replays the key, the
// processor answers "key in use" and its lookup does not see the payment
// yet: the attempt stays in flight (before, B counted it as never made and
// charged a fresh key, and A's call then charged too). Once A's call
// completes, the next replay records its outcome: one charge, on the
// record, with the first key.
func TestLookupNotFoundWhileTheFirstCallRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	store := billingtest.NewMemoryStore(t, memory.Options{})
	repo := store.Repository()
	s := addDue(t, repo, "u1", jan31)

	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock, Lookup: true})
	key := billing.IdempotencyKey(s.SubscriptionID, 1)
	slow := &slowProvider{inner: pay, hold: key, entered: make(chan struct{}), release: make(chan struct{})}
	locker := &leaseRecorder{Locker: billingtest.NewLocker(clock, time.Minute), leases: make(chan billing.Lease, 1)}
	events := &billingtest.EventRecorder{}
	newCollector := func() *billing.Collector {
		c, err := billing.NewCollector(billing.Config{Repository: repo, History: store.History(), Locker: locker,
			Provider: slow, Clock: clock, Events: events})
		require.NoError(t, err)
		return c
	}
	a, b := newCollector(), newCollector()

	// A charges; its call hangs at the processor.
	aDone := make(chan error, 1)
	go func() {
		_, err := a.Periods().Collect(ctx, s.SubscriptionID)
		aDone <- err
	}()
	<-slow.entered
	leaseA := <-locker.leases
	locker.StopHeartbeat(leaseA) // A is partitioned: its lease runs out
	clock.Advance(2 * time.Minute)
	<-leaseA.Lost()

	// B takes the lock over and finds the attempt in flight.
	_, err := b.Periods().Collect(ctx, s.SubscriptionID)
	require.ErrorIs(t, err, billing.ErrAttemptInFlight, "a lookup that finds nothing while a request may still run proves nothing")
	require.ErrorContains(t, err, "may still be running")
	cur, err := repo.GetByID(ctx, s.SubscriptionID)
	require.NoError(t, err)
	assert.True(t, cur.InFlight(), "the attempt stays in flight")
	assert.Equal(t, key, cur.LastAttempt.Key)
	assert.Equal(t, clock.Now(), cur.LastAttempt.Presented, "B's replay was recorded before it was sent")
	assert.Empty(t, pay.Charges(), "B charged no fresh key")
	assert.Equal(t, 1, events.Count(billing.EventAttemptUnresolved), "B reports the attempt")

	// A's call completes at the processor; A cannot record it.
	close(slow.release)
	require.ErrorIs(t, <-aDone, billing.ErrLeaseLost)
	require.Len(t, pay.Charges(), 1)

	// The next collection replays the key and records A's charge.
	clock.Advance(time.Hour)
	rep, err := b.Periods().Collect(ctx, s.SubscriptionID)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Collected)
	got, err := repo.GetByID(ctx, s.SubscriptionID)
	require.NoError(t, err)
	charges := pay.Charges()
	require.Len(t, charges, 1, "one charge for the period")
	assert.Equal(t, key, charges[0].Key)
	assert.Equal(t, billing.StatusCompleted, got.Status)
	assert.Equal(t, charges[0].TransactionID, got.TransactionID)
	assert.Equal(t, s.Amount, got.Amount)
	billingtest.RequireNoDoubleCharge(t, pay)
}

// TestLookupNotFoundBelievedOnceNoRequestCanRun: a lookup that finds
// nothing counts the attempt as never made once the processor's request
// timeout has passed since the key was last presented, and the next
// attempt takes a fresh key.
func TestLookupNotFoundBelievedOnceNoRequestCanRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	store := billingtest.NewMemoryStore(t, memory.Options{})
	repo := store.Repository()
	s := addDue(t, repo, "u1", jan31)
	// The processor never sees attempt 1 (the call fails before it is
	// sent), answers nothing to replays for a while, then is back.
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock, ReplayWindow: 24 * time.Hour, Lookup: true})
	pay.SetAttempt(s.SubscriptionID, 1, billingtest.Step{Err: billingtest.ErrTimeout})
	c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock})
	require.NoError(t, err)

	_, err = c.Periods().Collect(ctx, s.SubscriptionID)
	require.ErrorIs(t, err, billing.ErrAttemptInFlight)
	pay.SetUnreachable(true)
	clock.Advance(30 * time.Minute) // replays still within the window fail
	_, err = c.Periods().Collect(ctx, s.SubscriptionID)
	require.ErrorIs(t, err, billing.ErrAttemptInFlight)
	pay.SetUnreachable(false)
	clock.Advance(25 * time.Hour) // past the replay window: lookup only, and past every request's end
	_, err = c.Periods().Collect(ctx, s.SubscriptionID)
	require.NoError(t, err, "attempt 1 is settled as never made")
	cur, err := repo.GetByID(ctx, s.SubscriptionID)
	require.NoError(t, err)
	assert.False(t, cur.InFlight())
	assert.Equal(t, 1, cur.Attempt)
	rep, err := c.Periods().Collect(ctx, s.SubscriptionID)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Collected, "attempt 2 takes a fresh key")
	charges := pay.Charges()
	require.Len(t, charges, 1)
	assert.Equal(t, billing.IdempotencyKey(s.SubscriptionID, 2), charges[0].Key)
}

// runStore is a store the run tests use, with its user IDs.
type runStore struct {
	name string
	open func(t *testing.T, clock billing.Clock) billing.Repository
	user func(i int) string
}

func legacyUser(i int) string { return fmt.Sprintf("u%03d", i) }

func singleUser(i int) string {
	return layout.SubscriptionRef{AccountID: fmt.Sprintf("acct-%03d", i), SubscriptionID: "S1", SKU: "PLUS"}.UserID()
}

// runStores are every layout and index mode, in memory and on the local
// DynamoDB server.
func runStores() []runStore {
	legacy := func(mode dynamostore.StatusIndexMode, k int) func(t *testing.T, _ billing.Clock) billing.Repository {
		return func(t *testing.T, _ billing.Clock) billing.Repository {
			return billingtest.NewMemoryStore(t, memory.Options{PageSize: 4, StatusIndexMode: mode, DueShards: k}).Repository()
		}
	}
	dynamoLegacy := func(mode dynamostore.StatusIndexMode, k int) func(t *testing.T, _ billing.Clock) billing.Repository {
		return func(t *testing.T, _ billing.Clock) billing.Repository {
			repo, _ := storetest.DynamoStores(t, memory.Options{PageSize: 4, StatusIndexMode: mode, DueShards: k})
			return repo
		}
	}
	single := func(k int) func(t *testing.T, clock billing.Clock) billing.Repository {
		return func(t *testing.T, clock billing.Clock) billing.Repository {
			return billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock, PageSize: 4, Table: dynamostore.SingleTableConfig{DueShards: k}}).Repository()
		}
	}
	dynamoSingle := func(k int) func(t *testing.T, clock billing.Clock) billing.Repository {
		return func(t *testing.T, clock billing.Clock) billing.Repository {
			return singleTableOnServer(t, clock, memory.Options{PageSize: 4, DueShards: k})
		}
	}
	return []runStore{
		{"memory-legacy-index", legacy(dynamostore.StatusIndexLegacy, 0), legacyUser},
		{"memory-sorted-index", legacy(dynamostore.StatusIndexSorted, 0), legacyUser},
		{"memory-due-32", legacy(dynamostore.StatusIndexDue, 32), legacyUser},
		{"memory-single-walk", single(0), singleUser},
		{"memory-single-due-8", single(8), singleUser},
		{"dynamodb-legacy-index", dynamoLegacy(dynamostore.StatusIndexLegacy, 0), legacyUser},
		{"dynamodb-sorted-index", dynamoLegacy(dynamostore.StatusIndexSorted, 0), legacyUser},
		{"dynamodb-due-32", dynamoLegacy(dynamostore.StatusIndexDue, 32), legacyUser},
		{"dynamodb-single-walk", dynamoSingle(0), singleUser},
		{"dynamodb-single-due-8", dynamoSingle(8), singleUser},
	}
}

// addDue stores a SCHEDULED monthly record of user billed on date.
func addDue(t *testing.T, repo billing.Repository, user string, date time.Time) billing.Period {
	t.Helper()
	s := billing.Period{UserID: user, SubscriptionID: user + "-" + date.Format("0102"), BillingDate: date, Amount: billing.MustParseAmount("4.99"),
		Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(date), Term: billing.TermMonthly, AnchorDay: date.Day(),
		ReceiptTierName: "Plus:v2", CreatedDate: date.AddDate(0, -1, 0), LastRunDate: date.AddDate(0, -1, 0)}
	require.NoError(t, repo.Add(t.Context(), &s))
	return s
}

// TestRunContinuesAfterTheClockMoved: a run that stops after its page
// budget is continued on Report.Next by later invocations, an hour apart,
// and collects every record due at its start exactly once — on every
// layout and index mode, its shards in turn or at once. Before, the
// continuation was refused (ErrInvalidCursor) once the clock had moved on
// the due index, the single table's walk and the in-memory single table,
// and the rest of the run was lost.
func TestRunContinuesAfterTheClockMoved(t *testing.T) {
	t.Parallel()
	for _, st := range runStores() {
		for _, at := range []int{1, 4} {
			if at > 1 && strings.HasPrefix(st.name, "dynamodb-") && !dynamotest.LongTests() {
				continue // on the server, shards at once in CI's long step (BILLING_LONG_TESTS=1); in memory here
			}
			t.Run(fmt.Sprintf("%s/shards-at-once-%d", st.name, at), func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				clock := billingtest.NewClock(jan31.Add(time.Hour))
				repo := st.open(t, clock)
				const users = 40
				var subs []billing.Period
				for i := range users {
					subs = append(subs, addDue(t, repo, st.user(i), jan31.Add(-time.Duration(i)*time.Minute)))
				}
				pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
				c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock,
					PagesPerInvocation: 2, ShardConcurrency: at})
				require.NoError(t, err)
				req := billing.RunRequest{Kind: billing.RunScheduled}
				invocations, collected := 0, 0
				for {
					rep, err := c.Run(ctx, req)
					require.NoError(t, err, "invocation %d", invocations+1)
					require.Empty(t, rep.Failed)
					invocations++
					collected += rep.Collected
					if rep.Next == "" {
						break
					}
					require.Less(t, invocations, 200)
					// The next invocation comes an hour later; by then the
					// next periods of some users are due as well (they are
					// not the run's: it owns its instant).
					clock.Advance(time.Hour)
					req.Cursor = rep.Next
				}
				if at == 1 {
					assert.Greater(t, invocations, 1, "the run took several invocations")
				}
				assert.Equal(t, users, collected, "every record due at the run's start, once")
				for _, s := range subs {
					got, err := repo.GetByID(ctx, s.SubscriptionID)
					require.NoError(t, err)
					assert.Equal(t, billing.StatusCompleted, got.Status, s.UserID)
					assert.Len(t, pay.ChargesFor(s.SubscriptionID), 1, s.UserID)
				}
				billingtest.RequireNoDoubleCharge(t, pay)
			})
		}
	}
}

// TestRunCursorOfAnotherRunRefused: a cursor continues only the run that
// made it (its kind, store and shards); handed to another it is
// ErrInvalidCursor, never a partial run that ends quietly. Before, a
// cursor of a run over shards {0,1} given to a run over every shard
// worked those two shards only and ended with Next "".
func TestRunCursorOfAnotherRunRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	mem := billingtest.NewMemoryStore(t, memory.Options{PageSize: 2, StatusIndexMode: dynamostore.StatusIndexDue, DueShards: 4})
	repo := mem.Repository()
	for i := range 40 {
		addDue(t, repo, legacyUser(i), jan31)
	}
	newCollector := func(r billing.Repository) *billing.Collector {
		c, err := billing.NewCollector(billing.Config{Repository: r, Locker: billingtest.NewLocker(clock, time.Minute),
			Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}), Clock: clock, PagesPerInvocation: 1, ShardConcurrency: 2})
		require.NoError(t, err)
		return c
	}
	c := newCollector(repo)
	rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled, Shards: []int{0, 1}})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Next)

	for name, req := range map[string]billing.RunRequest{
		"every shard":   {Kind: billing.RunScheduled, Cursor: rep.Next},
		"other shards":  {Kind: billing.RunScheduled, Cursor: rep.Next, Shards: []int{2, 3}},
		"one of them":   {Kind: billing.RunScheduled, Cursor: rep.Next, Shards: []int{0}},
		"another kind":  {Kind: billing.RunRetry, Cursor: rep.Next, Shards: []int{0, 1}},
		"edited":        {Kind: billing.RunScheduled, Cursor: rep.Next[:len(rep.Next)-2] + "xx", Shards: []int{0, 1}},
		"a store's own": {Kind: billing.RunScheduled, Cursor: "c29tZXRoaW5n", Shards: []int{0, 1}},
	} {
		_, err := c.Run(ctx, req)
		require.ErrorIs(t, err, billing.ErrInvalidCursor, name)
	}
	other := newCollector(billingtest.NewMemoryStore(t, memory.Options{PageSize: 2, StatusIndexMode: dynamostore.StatusIndexDue, DueShards: 8}).Repository())
	_, err = other.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled, Cursor: rep.Next, Shards: []int{0, 1}})
	require.ErrorIs(t, err, billing.ErrInvalidCursor, "a store with other shards")

	// Only older: a week later the same run goes on from where it stopped.
	clock.Advance(7 * 24 * time.Hour)
	req := billing.RunRequest{Kind: billing.RunScheduled, Cursor: rep.Next, Shards: []int{0, 1}}
	for req.Cursor != "" {
		rep, err = c.Run(ctx, req)
		require.NoError(t, err)
		req.Cursor = rep.Next
	}
}

// TestAbandonedRunsStarveNoShard: a host that never continues a run (one
// invocation a day, PagesPerInvocation 2, 32 shards) still reaches every
// shard within a day more than it takes to read them all once, since each
// day's run starts at another shard; before, every day's run read the same
// first shards and the users of the others were never billed. (Not within
// exactly k/budget days: a rotation that starts on every shard in any k
// days cannot also tile the shards budget at a time.)
func TestAbandonedRunsStarveNoShard(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const k, budget = 32, 2
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	repo := billingtest.NewMemoryStore(t, memory.Options{PageSize: 10, StatusIndexMode: dynamostore.StatusIndexDue, DueShards: k}).Repository()
	// One user in each shard.
	var subs []billing.Period
	for i, seen := 0, map[int]bool{}; len(seen) < k; i++ {
		if u := legacyUser(i); !seen[layout.DueShard(u, k)] {
			seen[layout.DueShard(u, k)] = true
			subs = append(subs, addDue(t, repo, u, jan31))
		}
	}
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock,
		PagesPerInvocation: budget})
	require.NoError(t, err)
	for range k/budget + 1 {
		_, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
		require.NoError(t, err)
		clock.Advance(24 * time.Hour)
	}
	for _, s := range subs {
		assert.Len(t, pay.ChargesFor(s.SubscriptionID), 1, "user %s in shard %d", s.UserID, layout.DueShard(s.UserID, k))
	}
}

// TestInFlightRetryOutlivesTheRetryWindow: an ERROR record whose retry
// attempt is in flight is revisited by every daily retry run, reported each
// day while unresolved, however old it gets; once the processor answers
// again its charge is recorded. Before, the retry run stopped finding it
// once its billing date left the run's window (about 37 days), and the
// charge the processor took was never recorded.
func TestInFlightRetryOutlivesTheRetryWindow(t *testing.T) {
	t.Parallel()
	for _, st := range runStores() {
		if strings.HasSuffix(st.name, "single-walk") || st.name == "dynamodb-legacy-index" || st.name == "dynamodb-sorted-index" || st.name == "dynamodb-single-due-8" {
			continue // the walk covers CatchUpDays before the window (see below); the DynamoDB runs of the other modes cover the store code
		}
		t.Run(st.name, func(t *testing.T) {
			if strings.HasPrefix(st.name, "dynamodb-") {
				dynamotest.Long(t) // 40 days of retry runs over 32 shards: 30 s of CPU; the in-memory stores run here
			}
			t.Parallel()
			inFlightOutage(t, st, 40)
		})
	}
	// The single table's walk finds a subscription at the day of its
	// earliest open period from CatchUpDays (45) before the retry window's
	// start: an in-flight ERROR period is revisited up to 37 + 45 days.
	t.Run("memory-single-walk", func(t *testing.T) {
		t.Parallel()
		for _, st := range runStores() {
			if st.name == "memory-single-walk" {
				inFlightOutage(t, st, 70)
			}
		}
	})
}

func inFlightOutage(t *testing.T, st runStore, outageDays int) {
	ctx := t.Context()
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	repo := st.open(t, clock)
	s := addDue(t, repo, st.user(0), jan31)
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock, Lookup: true})
	pay.SetAttempt(s.SubscriptionID, 1, billingtest.Declined("insufficient funds", true))
	pay.SetAttempt(s.SubscriptionID, 2, billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil))
	events := &billingtest.EventRecorder{}
	c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock,
		Events: events, PagesPerInvocation: 50})
	require.NoError(t, err)
	runAll := func(kind billing.RunKind) {
		req := billing.RunRequest{Kind: kind}
		for {
			rep, err := c.Run(ctx, req)
			require.NoError(t, err)
			if req.Cursor = rep.Next; req.Cursor == "" {
				return
			}
		}
	}
	runAll(billing.RunScheduled) // declined: ERROR, next period opened
	clock.Advance(24 * time.Hour)
	runAll(billing.RunRetry) // attempt 2 charged, the answer lost
	cur, err := repo.GetByID(ctx, s.SubscriptionID)
	require.NoError(t, err)
	require.True(t, cur.InFlight())
	require.Equal(t, billing.StatusError, cur.Status)
	require.Len(t, pay.ChargesFor(s.SubscriptionID), 1)

	pay.SetUnreachable(true)
	for day := 1; day <= outageDays; day++ {
		clock.Advance(24 * time.Hour)
		before := len(events.ForSubscription(s.SubscriptionID))
		runAll(billing.RunRetry)
		assert.Len(t, events.ForSubscription(s.SubscriptionID), before+1, "day %d of the outage: the attempt is reported", day)
	}
	require.Greater(t, clock.Now().Sub(jan31), 37*24*time.Hour)
	pay.SetUnreachable(false)
	clock.Advance(24 * time.Hour)
	runAll(billing.RunRetry)
	got, err := repo.GetByID(ctx, s.SubscriptionID)
	require.NoError(t, err)
	charges := pay.ChargesFor(s.SubscriptionID)
	require.Len(t, charges, 1)
	assert.Equal(t, billing.StatusCompleted, got.Status, "the charge the processor took is recorded")
	assert.Equal(t, charges[0].TransactionID, got.TransactionID)
	assert.False(t, got.InFlight())
	assert.Equal(t, billing.IdempotencyKey(s.SubscriptionID, 2), charges[0].Key)
}

// TestSecondOpenSubscriptionDoesNotStopTheFirst: a second open plan of a
// legacy user written by another service (billed on the 20th beside one
// on the 5th) is no next period of the first: every run that opens a
// period reports it (EventUnexpectedRecord, Report.Unexpected) and both
// plans are billed every month. Before, the collector took the later
// record for the first plan's next period, and the first plan was
// charged once and never again, silently.
func TestSecondOpenSubscriptionDoesNotStopTheFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	jan5 := time.Date(2024, 1, 5, 15, 0, 0, 0, time.UTC)
	clock := billingtest.NewClock(jan5.Add(-24 * time.Hour))
	store := billingtest.NewMemoryStore(t, memory.Options{})
	repo := store.Repository()
	addDue(t, repo, "u1", jan5)
	// The other service writes its plan with a batch write.
	other := billing.Period{UserID: "u1", SubscriptionID: "other-plan", BillingDate: jan5.AddDate(0, 0, 15), Amount: billing.MustParseAmount("9.99"),
		Status: billing.StatusScheduled, BillingPeriod: "01/2024", Term: billing.TermMonthly, AnchorDay: 20,
		ReceiptTierName: "Pro:v1", CreatedDate: jan5.AddDate(0, -1, 0), LastRunDate: jan5.AddDate(0, -1, 0).Add(time.Second)}
	_, err := repo.AddAll(ctx, []billing.Period{other})
	require.NoError(t, err)

	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	events := &billingtest.EventRecorder{}
	c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock, Events: events})
	require.NoError(t, err)
	unexpected := 0
	for range 90 {
		clock.Advance(24 * time.Hour)
		rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
		require.NoError(t, err)
		require.Empty(t, rep.Next)
		unexpected += rep.Unexpected
	}
	recs, err := repo.ListByUser(ctx, "u1")
	require.NoError(t, err)
	var completed []string
	for _, r := range recs {
		if r.Status == billing.StatusCompleted {
			completed = append(completed, r.BillingDate.Format("01-02")+" "+r.Amount.String())
		}
	}
	assert.Equal(t, []string{"01-05 4.99", "01-20 9.99", "02-05 4.99", "02-20 9.99", "03-05 4.99", "03-20 9.99"}, completed, "both plans billed every month")
	assert.Equal(t, 6, unexpected, "each period opened beside the other plan reports it")
	assert.Equal(t, unexpected, events.Count(billing.EventUnexpectedRecord))
	billingtest.RequireNoDoubleCharge(t, pay)
}

// TestReactivatedBeforeOldPeriodsGoesOn: a subscription reactivated on a
// date before periods of its earlier life (Feb 29 waived, Mar 31
// cancelled) goes
// on: its collection opens the next period. Before, the old later records
// were taken for periods it had gone on to, and it was billed once and
// never again (found by the fault simulation, seed 1).
func TestReactivatedBeforeOldPeriodsGoesOn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	repo := billingtest.NewMemoryStore(t, memory.Options{}).Repository()
	s := addDue(t, repo, "u1", jan31)
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock})
	require.NoError(t, err)
	_, err = c.Periods().WaiveByID(ctx, s.SubscriptionID) // opens Feb 29
	require.NoError(t, err)
	latest := func() billing.Period {
		recs, err := repo.ListByUser(ctx, "u1")
		require.NoError(t, err)
		return recs[len(recs)-1]
	}
	clock.Advance(time.Hour)
	_, err = c.Periods().WaiveByID(ctx, latest().SubscriptionID) // Feb 29 waived, opens Mar 31
	require.NoError(t, err)
	clock.Advance(time.Hour)
	_, err = c.Periods().Cancel(ctx, latest().SubscriptionID) // Mar 31: the subscription ends
	require.NoError(t, err)

	clock.Advance(24 * time.Hour)
	back, err := c.Reactivate(ctx, "u1", jan31.AddDate(0, 0, 5)) // Feb 5, before the old Feb 29
	require.NoError(t, err)
	clock.Set(back.BillingDate.Add(time.Hour))
	rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Collected)
	recs, err := repo.ListByUser(ctx, "u1")
	require.NoError(t, err)
	var open []string
	for _, r := range recs {
		if r.Status == billing.StatusScheduled {
			open = append(open, r.BillingDate.Format("2006-01-02"))
		}
	}
	assert.Equal(t, []string{"2024-03-05"}, open, "the reactivated subscription's next period is open")
}
