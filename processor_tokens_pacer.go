package billing

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// sharedTurns spends a ProcessorBudget.Shared budget for one process: it
// takes batches of tokens and hands them to calls one by one, each starting
// inside its grant's window.
type sharedTurns struct {
	tokens ProcessorTokens
	batch  int
	mu     sync.Mutex
	grant  TokenGrant // what is left of the last grant
}

// turn waits until a token of the shared budget lets one call start and
// returns the end of the token's window: the call must start before it.
func (s *sharedTurns) turn(ctx context.Context, now func() time.Time, sleep func(context.Context, time.Duration) error) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		t := now()
		if s.grant.N > 0 && t.Before(s.grant.End) {
			if wait := s.grant.Start.Sub(t); wait > 0 {
				if err := sleep(ctx, wait); err != nil {
					return time.Time{}, err
				}
				continue // the window may have passed while asleep
			}
			s.grant.N--
			return s.grant.End, nil
		}
		g, err := s.tokens.Take(ctx, s.batch)
		if err != nil {
			return time.Time{}, fmt.Errorf("taking %d processor tokens: %w", s.batch, err)
		}
		if g.N > 0 && !g.End.After(t) || g.N == 0 && g.Start.Before(t.Add(-time.Second)) {
			// Asking again would spin: a budget on another clock (a test
			// clock, say) grants only windows this machine has left.
			return time.Time{}, fmt.Errorf("billing: ProcessorBudget.Shared granted %d tokens from %v to %v at %v: its clock must be the machine's",
				g.N, g.Start.Format(time.RFC3339Nano), g.End.Format(time.RFC3339Nano), t.Format(time.RFC3339Nano))
		}
		s.grant = g
		if g.N == 0 {
			if err := sleep(ctx, max(g.Start.Sub(t), time.Millisecond)); err != nil {
				return time.Time{}, err
			}
		}
	}
}

// errWindowClosed is a call not sent because the window of its shared
// budget's token closed while the attempt was being recorded: sent later,
// it would land in a second whose tokens other processes hold. Nothing
// reached the processor, so it is handled as a call refused for the rate
// limit (withdrawn, tried again with a fresh token).
var errWindowClosed = fmt.Errorf("the shared processor budget's one-second window closed before the call was sent: %w", ErrRateLimited)

// acquireCall is acquire for a call that is recorded before it is sent:
// it also returns the end of the shared budget's window the call must
// start in (zero without a shared budget), for [pacer.windowClosed].
func (p *pacer) acquireCall(ctx context.Context) (done func(), end time.Time, err error) {
	done, err = p.acquireLocal(ctx)
	if err != nil || p.shared == nil {
		return done, time.Time{}, err
	}
	if end, err = p.shared.turn(ctx, p.now, p.sleep); err != nil {
		done()
		return nil, time.Time{}, err
	}
	return done, end, nil
}

// windowClosed reports whether a call whose token's window ends at end
// may no longer start.
func (p *pacer) windowClosed(end time.Time) bool {
	return !end.IsZero() && !p.now().Before(end)
}

// slowShared tells the shared budget, if any, that the processor answered
// with its rate limit and asked for a pause of d. It is called outside the
// pacer's lock, on the caller's context: a slow or failing shared store
// delays only the call that saw the answer, and the local pause holds
// whatever becomes of it.
func (p *pacer) slowShared(ctx context.Context, d time.Duration) {
	if p.shared != nil {
		_ = p.shared.tokens.Slow(ctx, d)
	}
}
