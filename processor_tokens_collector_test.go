package billing_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// shortFirstWindow is a shared budget whose first grant's window closes
// 50 ms after it is granted; later grants last a second. It keeps every
// grant to check the calls against.
type shortFirstWindow struct {
	mu     sync.Mutex
	grants []billing.TokenGrant
}

func (s *shortFirstWindow) Take(_ context.Context, n int) (billing.TokenGrant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	g := billing.TokenGrant{N: n, Start: now.Add(-time.Millisecond), End: now.Add(time.Second)}
	if len(s.grants) == 0 {
		g.N, g.End = 1, now.Add(50*time.Millisecond)
	}
	s.grants = append(s.grants, g)
	return g, nil
}

func (s *shortFirstWindow) Slow(context.Context, time.Duration) error { return nil }

// slowFirstMark records the first attempt slowly (150 ms), as a store
// under load would.
type slowFirstMark struct {
	billing.Repository
	once sync.Once
}

func (r *slowFirstMark) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	r.once.Do(func() { time.Sleep(150 * time.Millisecond) })
	return r.Repository.SetAttempt(ctx, prev, next)
}

// callTimes notes when each call reaches the processor.
type callTimes struct {
	billing.PaymentProvider
	mu    sync.Mutex
	times []time.Time
}

func (p *callTimes) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	p.mu.Lock()
	p.times = append(p.times, time.Now())
	p.mu.Unlock()
	return p.PaymentProvider.Collect(ctx, req)
}

// TestCollectorSharedWindowMissedChargedOnce: the attempt's record is
// written after its token is taken and before the call; when that write
// outlasts the token's window, the collector sends nothing, withdraws the
// attempt and charges the record once, with a token whose window the
// call starts in.
func TestCollectorSharedWindowMissedChargedOnce(t *testing.T) {
	tokens := &shortFirstWindow{}
	var calls *callTimes
	e := newCollectorEnv(t, func(c *billing.Config) {
		c.ProcessorBudget = billing.ProcessorBudget{Shared: tokens, SharedBatch: 5}
		c.Repository = &slowFirstMark{Repository: c.Repository}
		calls = &callTimes{PaymentProvider: c.Provider}
		c.Provider = calls
	})
	s := e.add("u1", jan31, billing.StatusScheduled)

	rep := e.runOnce(billing.RunScheduled)
	assert.Equal(t, 1, rep.Collected)
	assert.Equal(t, 1, rep.RateLimited, "the call not sent is reported")
	assert.Equal(t, 1, rep.Attempted, "one call reached the processor")
	assert.Empty(t, rep.Failed)
	assert.Zero(t, rep.Unknown)
	require.Len(t, e.pay.Charges(), 1)
	assert.Equal(t, []string{billing.IdempotencyKey(s.SubscriptionID, 1)}, e.pay.KeysFor(s.SubscriptionID))
	got := e.records("u1")
	require.Len(t, got, 2, "the period and the next one")
	assert.Equal(t, billing.StatusCompleted, got[0].Status)
	assert.Equal(t, 1, got[0].Attempt, "the withdrawn attempt is not counted")

	require.Len(t, calls.times, 1)
	require.Len(t, tokens.grants, 2, "the call took a second token")
	g := tokens.grants[len(tokens.grants)-1]
	at := calls.times[0]
	assert.True(t, !at.Before(g.Start) && at.Before(g.End), "the call starts inside its token's window")
	assert.True(t, at.After(tokens.grants[0].End), "not on the first token, whose window closed while the attempt was written")
}

// TestSharedBudgetOnAnotherClockRefused: a shared budget on a clock other
// than the machine's (here the collector's test clock, standing in 2025)
// grants only windows the machine has left. The collector refuses it at
// once, saying so, instead of asking again and again until the run's
// context ends; nothing is written or charged.
func TestSharedBudgetOnAnotherClockRefused(t *testing.T) {
	var tokens *memory.Tokens
	e := newCollectorEnv(t, func(c *billing.Config) {
		var err error
		tokens, err = memory.NewTokens(10, c.Clock.Now)
		require.NoError(t, err)
		c.ProcessorBudget = billing.ProcessorBudget{Shared: tokens}
	})
	s := e.add("u1", jan31, billing.StatusScheduled)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	rep, err := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "refused at once")
	require.Len(t, rep.Failed, 1)
	assert.Contains(t, rep.Failed[0].Reason, "its clock must be the machine's")
	assert.Zero(t, rep.Collected+rep.Attempted)
	assert.Empty(t, e.pay.Charges())
	got := e.records("u1")
	require.Len(t, got, 1)
	assert.False(t, got[0].InFlight())
	assert.Equal(t, s.LastRunDate, got[0].LastRunDate)
}
