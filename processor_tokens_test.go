package billing_test

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing/memory"
)

// TestProcessorTokensNeverExceedLimit runs a modelled fleet of processes
// drawing from one memory.Tokens, some dying while they hold tokens, some
// seeing rate-limited answers, and counts the calls the processor sees a
// second: never more than the limit, and the fleet keeps it busy.
func TestProcessorTokensNeverExceedLimit(t *testing.T) {
	const limit, procs, batch = 100, 32, 10
	ctx := context.Background()
	base := time.Unix(1_800_000_000, 0)
	now := base
	tokens, err := memory.NewTokens(limit, func() time.Time { return now })
	require.NoError(t, err)
	rng := rand.New(rand.NewSource(7))
	perSecond := map[int64]int{}
	type proc struct {
		next  time.Time
		alive bool
	}
	ps := make([]proc, procs)
	for i := range ps {
		ps[i] = proc{next: base.Add(time.Duration(rng.Intn(3000)) * time.Millisecond), alive: true}
	}
	end := base.Add(10 * time.Minute)
	dead, late := 0, 0
	for now.Before(end) {
		// the process that asks first goes next
		i := 0
		for j := range ps {
			if ps[j].next.Before(ps[i].next) {
				i = j
			}
		}
		now = ps[i].next
		g, err := tokens.Take(ctx, batch)
		require.NoError(t, err)
		if g.N == 0 {
			ps[i].next = g.Start
			continue
		}
		require.LessOrEqual(t, g.N, batch)
		require.Equal(t, time.Second, g.End.Sub(g.Start))
		start := now
		if g.Start.After(now) {
			start = g.Start
		}
		if rng.Intn(50) == 0 { // dies holding the grant; a new process takes its place
			dead++
			ps[i].next = start.Add(5 * time.Second)
			continue
		}
		used := g.N
		if rng.Intn(4) == 0 { // out of records for part of the grant
			used = rng.Intn(g.N + 1)
		}
		// the calls start evenly over 100 ms; one whose window has closed
		// by then is not sent (as Collector.charge does)
		for c := range used {
			at := start.Add(time.Duration(c) * 100 * time.Millisecond / time.Duration(used))
			if !at.Before(g.End) {
				late++
				continue
			}
			perSecond[at.Unix()]++
		}
		if rng.Intn(200) == 0 {
			require.NoError(t, tokens.Slow(ctx, 0))
		}
		ps[i].next = start.Add(100 * time.Millisecond)
	}
	total, worst := 0, 0
	for _, n := range perSecond {
		total += n
		worst = max(worst, n)
	}
	require.Positive(t, dead)
	t.Logf("%d calls not sent for a closed window, %d deaths", late, dead)
	require.LessOrEqual(t, worst, limit, "a second saw more calls than the limit")
	require.Equal(t, limit, worst, "the fleet reaches the limit")
	require.Greater(t, total, 600*limit/2, "the fleet keeps the processor busy")
}

// TestProcessorTokensSlowPausesFleet: a rate-limited answer seen by one
// process pauses every process and halves the rate, which grows back.
func TestProcessorTokensSlowPausesFleet(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	tokens, err := memory.NewTokens(100, func() time.Time { return now })
	require.NoError(t, err)
	g, err := tokens.Take(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 100, g.N)
	require.NoError(t, tokens.Slow(ctx, 2*time.Second))
	g, err = tokens.Take(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 10, g.N)
	require.Equal(t, now.Add(2*time.Second), g.Start, "no window before the pause ends")
	now = now.Add(2 * time.Second)
	g, err = tokens.Take(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 60, g.N, "half the rate, grown back a tenth of the limit for each of 2 windows, less the 10 granted")
	now = now.Add(time.Second)
	g, err = tokens.Take(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 80, g.N, "the rate grows back by a tenth of the limit a window")
}
