package billing

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// ProcessorTokens is a processor budget that several processes draw from
// together, so that a fleet of collectors keeps the processor at its limit
// until the last shard is done instead of each process keeping a fixed
// share that is lost when it finishes, waits or dies.
//
// Tokens are granted for one whole second (a window): a call spent from a
// grant must start inside its window, and tokens not spent in it are lost.
// An implementation never grants more than its limit for one window, so
// no second can see more than the limit's calls from the fleet, even when
// a process dies holding tokens.
type ProcessorTokens interface {
	// Take asks for up to n tokens. A grant with N == 0 means the budget
	// is spent for now: ask again at Start.
	Take(ctx context.Context, n int) (TokenGrant, error)
	// Slow tells the fleet that the processor answered a call with its
	// rate limit: the budget pauses every process for retryAfter (a
	// second when 0) and halves its rate, which grows back by a tenth of
	// the limit a window.
	Slow(ctx context.Context, retryAfter time.Duration) error
}

// TokenGrant is tokens granted by [ProcessorTokens.Take]: N calls that may
// start at or after Start and before End (Start plus one second).
type TokenGrant struct {
	N          int
	Start, End time.Time
}

// TokenState is the shared state of a [ProcessorTokens]: the window
// (a Unix second) tokens were last granted for, how many, the rate of a
// window (at most the limit), the window the rate was last cut in and the
// Unix second before which no window is granted.
type TokenState struct {
	Window, Used, Rate, CutWindow, SlowUntil int64
}

// GrantTokens decides a Take of n tokens at now against the state s for a
// budget of limit calls a second: it returns the state to write and the
// grant. Grants go to the current second, or to the next one when the
// current one is spent, never further ahead. Implementations of
// [ProcessorTokens] share it so they decide alike.
func GrantTokens(s TokenState, now time.Time, n, limit int64) (TokenState, TokenGrant) {
	sec := now.Unix()
	w := max(sec, s.SlowUntil)
	if s.Rate <= 0 || s.Rate > limit {
		s.Rate = limit
	}
	if w < s.Window {
		w = s.Window
	}
	if w > s.Window { // a new window: the rate grows back
		if s.Window != 0 && s.Rate < limit {
			s.Rate = min(limit, s.Rate+max(1, limit/10)*(w-s.Window))
		}
		s.Window, s.Used = w, 0
	}
	if s.Used >= s.Rate {
		if w+1 > sec+1 || w+1 <= s.SlowUntil {
			return s, TokenGrant{Start: time.Unix(w+1, 0)}
		}
		w++
		s.Rate = min(limit, s.Rate+max(1, limit/10))
		s.Window, s.Used = w, 0
	}
	g := min(n, s.Rate-s.Used)
	s.Used += g
	return s, TokenGrant{N: int(g), Start: time.Unix(w, 0), End: time.Unix(w+1, 0)}
}

// SlowTokens decides a Slow at now: it pauses windows until now plus
// retryAfter and halves the rate, at most once a window.
func SlowTokens(s TokenState, now time.Time, retryAfter time.Duration, limit int64) TokenState {
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	until := now.Add(retryAfter)
	u := until.Unix()
	if until.After(time.Unix(u, 0)) {
		u++
	}
	s.SlowUntil = max(s.SlowUntil, u)
	if s.Rate <= 0 || s.Rate > limit {
		s.Rate = limit
	}
	if sec := now.Unix(); s.CutWindow < sec {
		s.Rate = max(1, s.Rate/2)
		s.CutWindow = sec
	}
	return s
}

// MemoryTokens is [ProcessorTokens] in memory: for one process, and for
// tests and simulations of a fleet in one process.
type MemoryTokens struct {
	limit int64
	now   func() time.Time
	mu    sync.Mutex
	state TokenState
}

// NewMemoryTokens returns a budget of limit calls a second on the clock
// now (time.Now when nil). A Collector drawing on it compares its grants
// with the machine's clock: give it another clock only in tests that
// drive the collector's pacing on that clock too.
func NewMemoryTokens(limit int, now func() time.Time) (*MemoryTokens, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("billing: NewMemoryTokens: limit %d, want > 0", limit)
	}
	if now == nil {
		now = time.Now
	}
	return &MemoryTokens{limit: int64(limit), now: now}, nil
}

// Take implements [ProcessorTokens].
func (m *MemoryTokens) Take(ctx context.Context, n int) (TokenGrant, error) {
	if err := ctx.Err(); err != nil {
		return TokenGrant{}, err
	}
	if n <= 0 {
		return TokenGrant{}, fmt.Errorf("billing: MemoryTokens.Take: n %d, want > 0", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var g TokenGrant
	m.state, g = GrantTokens(m.state, m.now(), int64(n), m.limit)
	return g, nil
}

// Slow implements [ProcessorTokens].
func (m *MemoryTokens) Slow(ctx context.Context, retryAfter time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = SlowTokens(m.state, m.now(), retryAfter, m.limit)
	return nil
}
