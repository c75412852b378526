package billing_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing/memory"
)

// TestProcessorTokensNeverExceedLimit runs a modelled fleet of processes
// drawing from one memory.Tokens, some dying while they hold tokens, some
// seeing rate-limited answers, and counts the calls the processor sees a
// second: never more than the limit, and the fleet keeps it busy; at 100
// and at 1,000 calls a second.
func TestProcessorTokensNeverExceedLimit(t *testing.T) {
	for _, limit := range []int{100, 1000} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) { tokensNeverExceedLimit(t, limit) })
	}
}

func tokensNeverExceedLimit(t *testing.T, limit int) {
	const procs, batch = 32, 10
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
		// At 1,000 a second there are ten times the takes: deaths and
		// short grants as often a second as at 100.
		if rng.Intn(50*limit/100) == 0 { // dies holding the grant; a new process takes its place
			dead++
			ps[i].next = start.Add(5 * time.Second)
			continue
		}
		used := g.N
		if rng.Intn(4*limit/100) == 0 { // out of records for part of the grant
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
		if rng.Intn(2*limit) == 0 { // a Slow every 20 s or so
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
// process pauses every process and halves the rate, which grows back by
// a quarter of the limit a window; at 100 and at 1,000 a second.
func TestProcessorTokensSlowPausesFleet(t *testing.T) {
	for _, limit := range []int{100, 1000} {
		ctx := context.Background()
		now := time.Unix(1_800_000_000, 0)
		tokens, err := memory.NewTokens(limit, func() time.Time { return now })
		require.NoError(t, err)
		g, err := tokens.Take(ctx, limit)
		require.NoError(t, err)
		require.Equal(t, limit, g.N)
		require.NoError(t, tokens.Slow(ctx, 2*time.Second))
		g, err = tokens.Take(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 10, g.N)
		require.Equal(t, now.Add(2*time.Second), g.Start, "limit %d: no window before the pause ends", limit)
		now = now.Add(2 * time.Second)
		g, err = tokens.Take(ctx, limit)
		require.NoError(t, err)
		require.Equal(t, limit-10, g.N, "limit %d: half the rate, grown back a quarter of the limit for each of 2 windows, less the 10 granted", limit)

		// Another answer half a second into this window: the rest of it is
		// paused, the next window (not one more) opens at half the rate
		// grown back a quarter, and the one after is whole.
		now = now.Add(500 * time.Millisecond)
		require.NoError(t, tokens.Slow(ctx, 0))
		g, err = tokens.Take(ctx, limit)
		require.NoError(t, err)
		require.Equal(t, limit*3/4, g.N, "limit %d", limit)
		require.Equal(t, now.Add(500*time.Millisecond), g.Start, "limit %d: the next window, not one more", limit)
		now = g.Start
		g, err = tokens.Take(ctx, limit)
		require.NoError(t, err)
		require.Equal(t, limit, g.N, "limit %d: that window spent, the next is whole again", limit)
		require.Equal(t, now.Add(time.Second), g.Start, "limit %d", limit)
	}
}

// TestProcessorTokensStormSlowsFleet: at 1,000 calls a second, the
// processor allows only 600 a second for 30 seconds (a 429 storm). Each
// rate-limited answer tells the budget (Slow, as Collector.paced does).
// The fleet slows: no second over the limit, most of the storm's seconds
// under it with far fewer 429s than calls, and the limit reached again
// soon after the storm.
func TestProcessorTokensStormSlowsFleet(t *testing.T) {
	const limit, procs, batch = 1000, 8, 50
	ctx := context.Background()
	base := time.Unix(1_800_000_000, 0)
	now := base
	tokens, err := memory.NewTokens(limit, func() time.Time { return now })
	require.NoError(t, err)
	next := make([]time.Time, procs)
	for i := range next {
		next[i] = base.Add(time.Duration(i) * time.Millisecond)
	}
	sent, refused := map[int64]int{}, map[int64]int{}
	const stormFrom, stormTo = 10, 40 // seconds after base
	allowed := func(sec int64) int {
		if s := sec - base.Unix(); s >= stormFrom && s < stormTo {
			return limit * 6 / 10
		}
		return limit
	}
	for now.Before(base.Add(60 * time.Second)) {
		i := 0
		for j := range next {
			if next[j].Before(next[i]) {
				i = j
			}
		}
		now = next[i]
		g, err := tokens.Take(ctx, batch)
		require.NoError(t, err)
		if g.N == 0 || g.Start.After(now) {
			next[i] = g.Start
			if g.N == 0 {
				continue
			}
			now = g.Start // the calls start with their window
		}
		sec := now.Unix()
		limited := false
		for range g.N {
			sent[sec]++
			if sent[sec] > allowed(sec) {
				refused[sec]++
				limited = true
			}
		}
		if limited {
			require.NoError(t, tokens.Slow(ctx, 0))
		}
		next[i] = now.Add(50 * time.Millisecond)
	}
	stormSent, stormRefused, under := 0, 0, 0
	for s := int64(stormFrom); s < stormTo; s++ {
		sec := base.Unix() + s
		stormSent += sent[sec]
		stormRefused += refused[sec]
		if sent[sec] < limit {
			under++
		}
	}
	for sec, n := range sent {
		require.LessOrEqual(t, n, limit, "second %d", sec-base.Unix())
	}
	t.Logf("storm: %d calls, %d refused, %d of %d seconds under the limit", stormSent, stormRefused, under, stormTo-stormFrom)
	require.Greater(t, under, (stormTo-stormFrom)/2, "the fleet slows in the storm")
	require.Less(t, stormRefused, stormSent/5, "most calls in the storm are answered")
	reached := 0
	for s := int64(stormTo + 3); s < 60; s++ {
		if sent[base.Unix()+s] == limit {
			reached++
		}
	}
	require.Greater(t, reached, 10, "the fleet is back at the limit after the storm")
}
