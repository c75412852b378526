package pacing

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	billing "github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// runSeconds is the one-second model: it steps through modelled seconds,
// each process in turn (starting from a different one every second)
// making up to 125 calls (25 while slow). Shared: a process draws batches
// of c.Batch from one memory.Tokens; what is left of a grant when
// its process has made its calls for the second is lost, and a 429 slows
// the fleet. Static: a process earns Limit/K calls a second, keeps at most
// one second's worth and one call more, and a 429 pauses it for the next
// second.
func runSeconds(ctx context.Context, c Config) (Result, error) {
	k, limit, total, shared := c.Processes, c.Limit, c.Charges, !c.Static
	rng := rand.New(rand.NewSource(c.Seed))
	type proc struct {
		left, start, dieAt, slowFrom, pausedTo int
		pending                                billing.TokenGrant
		credit                                 float64
	}
	weights, sum := c.weights()
	fl := c.faults()
	ps, given := make([]*proc, k), 0
	for i := range ps {
		p := &proc{left: total * weights[i] / sum, dieAt: -1, slowFrom: -1}
		if i == k-1 {
			p.left = total - given
		}
		given += p.left
		if rng.Intn(10) == 0 {
			p.start = rng.Intn(fl.late)
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
		for s := b; s < b+fl.burst; s++ {
			bursts[s] = true
		}
	}
	now := time.Unix(0, 0)
	tokens, err := memory.NewTokens(limit, func() time.Time { return now })
	if err != nil {
		return Result{}, fmt.Errorf("pacing: %w", err)
	}
	r := Result{Limit: limit}
	span := 0
	remaining := total
	for sec := 0; remaining > 0; sec++ {
		if sec >= 10*total/limit {
			return r, fmt.Errorf("%w: %d charges left after %d s", ErrStalled, remaining, sec)
		}
		if err := ctx.Err(); err != nil {
			return r, err
		}
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
				r.Deaths++
				p.pending, p.start, p.dieAt = billing.TokenGrant{}, sec+fl.takeover, -1
				continue
			}
			capacity := c.Workers * 25 / 8
			if p.slowFrom >= 0 && sec >= p.slowFrom && sec < p.slowFrom+fl.slow {
				capacity = max(1, c.Workers*5/8)
			}
			want := min(capacity, p.left)
			n := 0
			if shared {
				for n < want {
					g := p.pending
					p.pending = billing.TokenGrant{}
					if g.N == 0 || g.Start.Unix() < int64(sec) {
						if g, err = tokens.Take(ctx, c.Batch); err != nil {
							return r, fmt.Errorf("pacing: take: %w", err)
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
				r.RateLimited += n - ok
				if shared {
					if err := tokens.Slow(ctx, 0); err != nil {
						return r, fmt.Errorf("pacing: slow: %w", err)
					}
				} else {
					p.pausedTo = sec + 2
				}
			}
			p.left -= ok
			remaining -= ok
			r.Charges += ok
		}
		r.Busiest = max(r.Busiest, calls)
		if calls > 0 {
			span = sec + 1
		}
	}
	r.Span = time.Duration(span) * time.Second
	return r, nil
}
