package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/tokens"
)

// Tokens is [billing.ProcessorTokens] in memory: for one process, and for
// tests and simulations of a fleet in one process.
type Tokens struct {
	limit int64
	now   func() time.Time
	mu    sync.Mutex
	state tokens.State
}

// NewTokens returns a budget of limit calls a second on the clock
// now (time.Now when nil). A Collector drawing on it compares its grants
// with the machine's clock: give it another clock only in tests that
// drive the collector's pacing on that clock too.
func NewTokens(limit int, now func() time.Time) (*Tokens, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memory: NewTokens: limit %d, want > 0", limit)
	}
	if now == nil {
		now = time.Now
	}
	return &Tokens{limit: int64(limit), now: now}, nil
}

// Take implements [billing.ProcessorTokens].
func (m *Tokens) Take(ctx context.Context, n int) (billing.TokenGrant, error) {
	if err := ctx.Err(); err != nil {
		return billing.TokenGrant{}, err
	}
	if n <= 0 {
		return billing.TokenGrant{}, fmt.Errorf("memory: Tokens.Take: n %d, want > 0", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var g tokens.Grant
	m.state, g = tokens.Take(m.state, m.now(), int64(n), m.limit)
	return billing.TokenGrant(g), nil
}

// Slow implements [billing.ProcessorTokens].
func (m *Tokens) Slow(ctx context.Context, retryAfter time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = tokens.Slow(m.state, m.now(), retryAfter, m.limit)
	return nil
}
