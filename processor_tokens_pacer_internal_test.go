package billing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing/internal/tokens"
)

// TestPacerSharedBudgetCapsEverySecond: two processes' pacers on one
// shared budget start no more than its limit's calls in any second, and a
// rate-limited answer in one slows the other.
func TestPacerSharedBudgetCapsEverySecond(t *testing.T) {
	tokens, err := newMemTokens(20, nil)
	require.NoError(t, err)
	a, _ := fakePacer(t, ProcessorBudget{Shared: tokens, SharedBatch: 5})
	b, _ := fakePacer(t, ProcessorBudget{Shared: tokens, SharedBatch: 5})
	b.now = a.now // one clock, as the fleet's hosts
	b.sleep = a.sleep
	tokens.now = a.now
	perSecond := map[int64]int{}
	for i := range 200 {
		p := a
		if i%3 == 0 {
			p = b
		}
		done, err := p.acquire(context.Background())
		require.NoError(t, err)
		perSecond[p.now().Unix()]++
		done()
	}
	worst := 0
	for _, n := range perSecond {
		worst = max(worst, n)
	}
	require.LessOrEqual(t, worst, 20, "no second passes the shared limit")
	require.Greater(t, worst, 10, "the shared budget lets calls through")
	a.slowShared(context.Background(), a.limited(3*time.Second)) // as Collector.paced does
	start := a.now()
	for range 6 { // past what b already holds (a batch of 5)
		done, err := b.acquire(context.Background())
		require.NoError(t, err)
		done()
	}
	require.GreaterOrEqual(t, b.now().Sub(start), 2*time.Second, "b waits for the pause a saw")
}

// modelClock is a machine clock a test moves by hand; sleeping moves it.
type modelClock struct {
	mu  sync.Mutex
	now time.Time
}

func (m *modelClock) Now() time.Time  { m.mu.Lock(); defer m.mu.Unlock(); return m.now }
func (m *modelClock) Set(t time.Time) { m.mu.Lock(); defer m.mu.Unlock(); m.now = t }
func (m *modelClock) Sleep(_ context.Context, d time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	return nil
}

// countingProcessor counts the calls it receives in each second of the
// model clock, answering each with answer.
type countingProcessor struct {
	clock     *modelClock
	mu        sync.Mutex
	perSecond map[int64]int
	answer    func() error
}

func (p *countingProcessor) Collect(context.Context, PaymentRequest) (PaymentResult, error) {
	p.mu.Lock()
	p.perSecond[p.clock.Now().Unix()]++
	p.mu.Unlock()
	return PaymentResult{}, p.answer()
}

// sharedProcess is one process of a fleet: a collector whose processor
// budget is shared, on the model clock. Only charge runs on it: the
// processor's answers here are never outcomes to record.
func sharedProcess(t *testing.T, tokens ProcessorTokens, batch int, clock *modelClock, prov PaymentProvider) *Collector {
	t.Helper()
	b, err := ProcessorBudget{Shared: tokens, SharedBatch: batch}.withDefaults()
	require.NoError(t, err)
	p := newPacer(b)
	p.now, p.sleep = clock.Now, clock.Sleep
	return &Collector{cfg: Config{Provider: prov}, tel: newTelemetry(nil, nil), pace: p}
}

// markAs is a mark step for charge: it runs meanwhile (what happens while
// the attempt is recorded; nil for nothing) and returns the record as
// stored with attempt 1 of id.
func markAs(id string, meanwhile func()) func() (*Period, error) {
	return func() (*Period, error) {
		if meanwhile != nil {
			meanwhile()
		}
		return &Period{SubscriptionID: id, UserID: "u-" + id, LastAttempt: Attempt{Number: 1, Key: "key-" + id}}, nil
	}
}

// TestSharedBudgetCallStartsInsideItsWindow: a call is recorded (mark)
// between taking its token and reaching the processor. When recording it
// outlasts the token's one-second window, the call is not sent: sent, it
// would land in the next second, whose tokens the rest of the fleet has
// already spent, and the processor would count more than its limit. It is
// refused as rate-limited (nothing sent; the collector withdraws it and
// tries again with a fresh token), and its retry lands in a later second.
func TestSharedBudgetCallStartsInsideItsWindow(t *testing.T) {
	const limit = 10
	base := time.Unix(1_800_000_000, 0)
	clock := &modelClock{now: base.Add(990 * time.Millisecond)}
	tokens, err := newMemTokens(limit, clock.Now)
	require.NoError(t, err)
	errAnswered := errors.New("answered") // any answer: the call was sent
	proc := &countingProcessor{clock: clock, perSecond: map[int64]int{}, answer: func() error { return errAnswered }}
	a := sharedProcess(t, tokens, 5, clock, proc)
	b := sharedProcess(t, tokens, 5, clock, proc)
	ctx := context.Background()

	_, err = a.charge(ctx, &Report{}, markAs("a", func() {
		// Recording a's attempt takes 30 ms; meanwhile the second turns and
		// b spends the whole of its budget.
		clock.Set(base.Add(time.Second))
		for i := range limit {
			_, err := b.charge(ctx, &Report{}, markAs(fmt.Sprint("b", i), nil))
			require.ErrorIs(t, err, errAnswered, "b's call %d was sent", i)
		}
		clock.Set(base.Add(1020 * time.Millisecond))
	}))
	require.ErrorIs(t, err, ErrRateLimited, "a's token's window closed while a recorded its attempt: not sent")
	require.NotErrorIs(t, err, errAnswered)
	require.Equal(t, limit, proc.perSecond[base.Unix()+1], "the second a's call would have landed in holds b's calls only")

	_, err = a.charge(ctx, &Report{}, markAs("a", nil))
	require.ErrorIs(t, err, errAnswered, "a's retry is sent")
	require.Equal(t, 1, proc.perSecond[base.Unix()+2], "with a token of a later window")
	for sec, n := range proc.perSecond {
		require.LessOrEqual(t, n, limit, "second %d", sec)
	}
}

// slowBlocked is a shared budget whose Slow blocks until released or its
// context ends, like a shared store that does not answer.
type slowBlocked struct {
	clock   *modelClock
	entered chan struct{}
	release chan struct{}
}

func (s *slowBlocked) Take(_ context.Context, n int) (TokenGrant, error) {
	w := s.clock.Now().Truncate(time.Second)
	return TokenGrant{N: n, Start: w, End: w.Add(time.Second)}, nil
}

func (s *slowBlocked) Slow(ctx context.Context, _ time.Duration) error {
	close(s.entered)
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestSharedSlowHoldsNoPacerLock: telling the fleet of a rate-limited
// answer is a call to the shared store. While it is under way, the
// process's other calls still get their turns (after the local pause),
// and it ends with the context of the collection that saw the answer.
func TestSharedSlowHoldsNoPacerLock(t *testing.T) {
	clock := &modelClock{now: time.Unix(1_800_000_000, 0)}
	shared := &slowBlocked{clock: clock, entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(shared.release) })
	proc := &countingProcessor{clock: clock, perSecond: map[int64]int{}, answer: func() error {
		return &RateLimitedError{RetryAfter: 2 * time.Second}
	}}
	c := sharedProcess(t, shared, 5, clock, proc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	charged := make(chan error, 1)
	go func() {
		_, err := c.charge(ctx, &Report{}, markAs("a", nil))
		charged <- err
	}()
	<-shared.entered
	start := clock.Now()
	acquired := make(chan error, 1)
	go func() {
		done, err := c.pace.acquire(context.Background())
		if err == nil {
			done()
		}
		acquired <- err
	}()
	select {
	case err := <-acquired:
		require.NoError(t, err)
		require.GreaterOrEqual(t, clock.Now().Sub(start), 2*time.Second, "after the local pause")
	case <-time.After(5 * time.Second):
		require.Fail(t, "another call waits for the shared store's Slow")
	}
	cancel()
	select {
	case err := <-charged:
		require.ErrorIs(t, err, ErrRateLimited)
	case <-time.After(5 * time.Second):
		require.Fail(t, "Slow does not end with the collection's context")
	}
}

// memTokens is memory.Tokens for this package's own tests (which cannot
// import memory): the same arithmetic, from internal/tokens.
type memTokens struct {
	limit int64
	now   func() time.Time
	mu    sync.Mutex
	state tokens.State
}

func newMemTokens(limit int, now func() time.Time) (*memTokens, error) {
	if now == nil {
		now = time.Now
	}
	return &memTokens{limit: int64(limit), now: now}, nil
}

func (m *memTokens) Take(_ context.Context, n int) (TokenGrant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var g tokens.Grant
	m.state, g = tokens.Take(m.state, m.now(), int64(n), m.limit)
	return TokenGrant(g), nil
}

func (m *memTokens) Slow(_ context.Context, retryAfter time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = tokens.Slow(m.state, m.now(), retryAfter, m.limit)
	return nil
}
