package billing

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPacerSharedBudgetCapsEverySecond: two processes' pacers on one
// shared budget start no more than its limit's calls in any second, and a
// rate-limited answer in one slows the other.
func TestPacerSharedBudgetCapsEverySecond(t *testing.T) {
	tokens, err := NewMemoryTokens(20, nil)
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
	a.limited(3 * time.Second)
	start := a.now()
	for range 6 { // past what b already holds (a batch of 5)
		done, err := b.acquire(context.Background())
		require.NoError(t, err)
		done()
	}
	require.GreaterOrEqual(t, b.now().Sub(start), 2*time.Second, "b waits for the pause a saw")
}
