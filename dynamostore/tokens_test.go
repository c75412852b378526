package dynamostore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/require"
)

// TestTokensNeverOverLimitAcrossProcesses has several "processes" (each
// its own Tokens on the same item) draw at once; no window may be granted
// more than the limit, and they match MemoryTokens on a scripted sequence.
func TestTokensNeverOverLimitAcrossProcesses(t *testing.T) {
	c := dynamotest.Client(t)
	table := dynamotest.TableName(t, "tokens")
	dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
	const limit = 7
	var mu sync.Mutex
	perWindow := map[int64]int{}
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		tok, err := dynamostore.NewTokens(c, table, "", limit, nil)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 6; i++ {
				g, err := tok.Take(context.Background(), 3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				perWindow[g.Start.Unix()] += g.N
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for w, n := range perWindow {
		require.LessOrEqual(t, n, limit, "window %d", w)
		total += n
	}
	require.Positive(t, total)

	// Same decisions as MemoryTokens on a scripted clock.
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	d, err := dynamostore.NewTokens(c, table, "scripted", limit, clock)
	require.NoError(t, err)
	m, err := billing.NewMemoryTokens(limit, clock)
	require.NoError(t, err)
	steps := []struct {
		n    int
		slow bool
		adv  time.Duration
	}{{n: 5}, {n: 5}, {n: 5}, {slow: true}, {n: 3}, {adv: 2 * time.Second, n: 4}, {n: 9}, {adv: time.Second, n: 2}}
	for i, st := range steps {
		now = now.Add(st.adv)
		if st.slow {
			require.NoError(t, d.Slow(context.Background(), 0))
			require.NoError(t, m.Slow(context.Background(), 0))
			continue
		}
		gd, err := d.Take(context.Background(), st.n)
		require.NoError(t, err)
		gm, err := m.Take(context.Background(), st.n)
		require.NoError(t, err)
		require.Equal(t, gm, gd, "step %d", i)
	}
}

// TestTokensSlowSeenByAnotherClient: a Slow from one process pauses and
// halves the budget another process draws from.
func TestTokensSlowSeenByAnotherClient(t *testing.T) {
	c := dynamotest.Client(t)
	table := dynamotest.TableName(t, "tokslow")
	dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	a, err := dynamostore.NewTokens(c, table, "", 10, clock)
	require.NoError(t, err)
	b, err := dynamostore.NewTokens(c, table, "", 10, clock)
	require.NoError(t, err)
	g, err := b.Take(context.Background(), 4)
	require.NoError(t, err)
	require.Equal(t, 4, g.N)
	require.NoError(t, a.Slow(context.Background(), 2*time.Second))
	g, err = b.Take(context.Background(), 10)
	require.NoError(t, err)
	require.Equal(t, now.Add(2*time.Second), g.Start, "paused until retryAfter")
	require.Equal(t, 7, g.N, "rate halved to 5, grown back by 1 a window over the 2 paused windows")
}
