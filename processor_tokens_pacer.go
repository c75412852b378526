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

// turn waits until a token of the shared budget lets one call start.
func (s *sharedTurns) turn(ctx context.Context, now func() time.Time, sleep func(context.Context, time.Duration) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		t := now()
		if s.grant.N > 0 && t.Before(s.grant.End) {
			if wait := s.grant.Start.Sub(t); wait > 0 {
				if err := sleep(ctx, wait); err != nil {
					return err
				}
				continue // the window may have passed while asleep
			}
			s.grant.N--
			return nil
		}
		g, err := s.tokens.Take(ctx, s.batch)
		if err != nil {
			return fmt.Errorf("taking %d processor tokens: %w", s.batch, err)
		}
		s.grant = g
		if g.N == 0 {
			if err := sleep(ctx, max(g.Start.Sub(t), time.Millisecond)); err != nil {
				return err
			}
		}
	}
}
