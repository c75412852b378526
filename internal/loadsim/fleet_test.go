package loadsim

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	billing "github.com/dynabill/billing"
	"github.com/stretchr/testify/require"
)

// fleetResult is one pacing run of the fleet model.
type fleetResult struct {
	charges, span, worst int // charges made, seconds from first start to last call, busiest second
}

func (r fleetResult) efficiency(limit int) float64 {
	return 100 * float64(r.charges) / float64(limit*r.span)
}

// runFleet models, one modelled second at a time, K processes charging
// total charges at a processor of limit calls a second: shards skewed (every
// 8th 3x the others), 10 % of processes starting up to 10 min late, 5 %
// dying once (their shard resumed 5 min later, tokens they held lost), slow
// answers (a process at a fifth of its 125 calls a second for 10 min) and
// 429 bursts (the processor allowing 60 % of its limit for 20 s, 6 times a
// day). Shared: the processes draw batches of 10 from one
// billing.MemoryTokens and a 429 slows the fleet; static: each process has
// limit/K and a 429 pauses only itself for a second. Declines are calls the
// processor answered and count as charges made.
func runFleet(t testing.TB, k, limit, total int, shared bool, seed int64) fleetResult {
	rng := rand.New(rand.NewSource(seed))
	type proc struct {
		left, start, dieAt, slowFrom, pausedTo int
		pending                                billing.TokenGrant
		credit                                 float64
	}
	weights, sum := make([]int, k), 0
	for i := range weights {
		weights[i] = 1
		if i%8 == 0 {
			weights[i] = 3
		}
		sum += weights[i]
	}
	ps, given := make([]*proc, k), 0
	for i := range ps {
		p := &proc{left: total * weights[i] / sum, dieAt: -1, slowFrom: -1}
		if i == k-1 {
			p.left = total - given
		}
		given += p.left
		if rng.Intn(10) == 0 {
			p.start = rng.Intn(600)
		}
		if rng.Intn(20) == 0 {
			p.dieAt = rng.Intn(total / limit)
		}
		if rng.Intn(4) == 0 {
			p.slowFrom = rng.Intn(total / limit)
		}
		ps[i] = p
	}
	bursts := map[int]bool{}
	for range 6 {
		b := rng.Intn(total / limit)
		for s := b; s < b+20; s++ {
			bursts[s] = true
		}
	}
	now := time.Unix(0, 0)
	tokens, err := billing.NewMemoryTokens(limit, func() time.Time { return now })
	require.NoError(t, err)
	ctx := context.Background()
	var r fleetResult
	remaining := total
	for sec := 0; remaining > 0; sec++ {
		require.Less(t, sec, 10*total/limit, "the fleet does not finish")
		now = time.Unix(int64(sec), 0)
		allowed := limit
		if bursts[sec] {
			allowed = limit * 6 / 10
		}
		calls := 0
		for j := range k {
			p := ps[(j+sec)%k]
			if p.left == 0 || sec < p.start || sec < p.pausedTo {
				continue
			}
			if sec == p.dieAt { // dies holding its grant; resumed later
				p.pending, p.start, p.dieAt = billing.TokenGrant{}, sec+300, -1
				continue
			}
			capacity := 125
			if p.slowFrom >= 0 && sec >= p.slowFrom && sec < p.slowFrom+600 {
				capacity = 25
			}
			want := min(capacity, p.left)
			n := 0
			if shared {
				for n < want {
					g := p.pending
					p.pending = billing.TokenGrant{}
					if g.N == 0 || g.Start.Unix() < int64(sec) {
						if g, err = tokens.Take(ctx, 10); err != nil {
							t.Fatal(err)
						}
					}
					if g.N == 0 || g.Start.Unix() > int64(sec) {
						p.pending = g
						break
					}
					n += min(g.N, want-n) // the rest of the grant is lost
				}
			} else {
				p.credit = min(p.credit+float64(limit)/float64(k), float64(limit)/float64(k)+1)
				n = min(want, int(p.credit))
				p.credit -= float64(n)
			}
			ok := max(0, min(n, allowed-calls))
			calls += n
			if ok < n { // rate-limited answers
				if shared {
					require.NoError(t, tokens.Slow(ctx, 0))
				} else {
					p.pausedTo = sec + 2
				}
			}
			p.left -= ok
			remaining -= ok
			r.charges += ok
		}
		r.worst = max(r.worst, calls)
		if calls > 0 {
			r.span = sec + 1
		}
	}
	return r
}

// TestFleetPacing prints the pacing of the shared budget and the static
// split for 4M charges at 100/s at K = 8, 32 and 128 (docs/capacity.md).
// The shared budget never lets a second exceed the limit.
func TestFleetPacing(t *testing.T) {
	const limit, total = 100, 4_000_000
	for _, k := range []int{8, 32, 128} {
		sh := runFleet(t, k, limit, total, true, 1)
		st := runFleet(t, k, limit, total, false, 1)
		require.LessOrEqual(t, sh.worst, limit, "K=%d: a second over the limit", k)
		span := func(s int) string {
			d := time.Duration(s) * time.Second
			return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
		}
		t.Logf("pacing K=%d shared %.1f %% span %s static %.1f %% span %s", k,
			sh.efficiency(limit), span(sh.span), st.efficiency(limit), span(st.span))
		require.Greater(t, sh.efficiency(limit), st.efficiency(limit), "K=%d", k)
	}
}
