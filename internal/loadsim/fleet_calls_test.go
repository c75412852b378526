package loadsim

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"testing"
	"time"

	billing "github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/require"
)

// callsFleet is the fleet model of runFleet at the grain of single calls,
// in modelled time: each process runs its collections on workers, each
// taking a turn of the budget, recording the attempt (a store write) and
// only then calling the processor, as Collector.charge does. It measures
// what the one-second model cannot: calls whose token's window closed
// while their attempt was being recorded.
type callsFleet struct {
	k, limit, total, workers, batch int
	shared, windowCheck             bool
	seed                            int64
}

// callsResult is one run of callsFleet.
type callsResult struct {
	charges, span, worst int // charges made, seconds from the first call to the last, busiest second
	missed, limited      int // calls not sent for a closed window; 429 answers
	deaths               int // processes that died holding their tokens
}

func (r callsResult) efficiency(limit int) float64 {
	return 100 * float64(r.charges) / float64(limit*r.span)
}

const (
	evReady  = iota // a worker wants to collect a record
	evTurn          // a process hands its waiting workers their turns
	evMarked        // an attempt is recorded: the call goes out
	evAnswer        // the processor's answer reaches the worker
	evDie           // a process dies, holding what it held
	evRevive        // its shard is taken over
)

type callEvent struct {
	at          time.Duration
	seq         int
	kind, p     int
	epoch       int
	end         time.Duration // evMarked: the token's window end (0: none)
	limited, ok bool          // evAnswer
}

// callQueue is a binary heap of events, earliest first (then in the order
// they were pushed).
type callQueue []callEvent

func (q callQueue) less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}

func (q *callQueue) push(e callEvent) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h.less(i, up) {
			break
		}
		h[i], h[up] = h[up], h[i]
		i = up
	}
}

func (q *callQueue) pop() callEvent {
	h := *q
	e := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	*q = h
	return e
}

type callProc struct {
	left, claimed, done int // records of its shard; started; charged
	start               time.Duration
	dieAt               time.Duration // <0: never
	slowFrom            time.Duration // <0: never; answers 5x slower for 10 min
	epoch, waiting      int
	turnAt              time.Duration // a turn event is pending at; <0: none
	grant               billing.TokenGrant
	next, pausedTo      time.Duration // static pacer; local pause after a 429
}

// run models the fleet until every shard is charged. Latencies: a store
// write 5-25 ms, a processor answer 150-450 ms (5x for a slow process),
// a 429 answer 50 ms. Shards, late starts, deaths and 429 bursts are
// runFleet's.
func (f callsFleet) run(t testing.TB) callsResult {
	rng := rand.New(rand.NewSource(f.seed))
	day := time.Duration(f.total/f.limit) * time.Second
	ps, sum := make([]*callProc, f.k), 0
	for i := range ps {
		w := 1
		if i%8 == 0 {
			w = 3
		}
		sum += w
		ps[i] = &callProc{left: w, dieAt: -1, slowFrom: -1, turnAt: -1}
	}
	given := 0
	for i, p := range ps {
		p.left = f.total * p.left / sum
		if i == f.k-1 {
			p.left = f.total - given
		}
		given += p.left
		if rng.Intn(10) == 0 {
			p.start = time.Duration(rng.Intn(600)) * time.Second
		}
		if rng.Intn(20) == 0 || f.k < 20 && i == 1 {
			p.dieAt = time.Duration(rng.Int63n(int64(day)))
		}
		if rng.Intn(4) == 0 {
			p.slowFrom = time.Duration(rng.Int63n(int64(day)))
		}
	}
	burst := map[int]bool{}
	for range 6 {
		b := rng.Intn(f.total / f.limit)
		for s := b; s < b+20; s++ {
			burst[s] = true
		}
	}
	var now time.Duration
	tokens, err := billing.NewMemoryTokens(f.limit, func() time.Time { return time.Unix(0, 0).Add(now) })
	require.NoError(t, err)
	ctx := context.Background()
	interval := time.Duration(f.k) * time.Second / time.Duration(f.limit)
	write := func() time.Duration { return time.Duration(5+rng.Intn(21)) * time.Millisecond }
	q, seq := &callQueue{}, 0
	push := func(e callEvent) { seq++; e.seq = seq; q.push(e) }
	for i, p := range ps {
		for range f.workers {
			push(callEvent{at: p.start, kind: evReady, p: i})
		}
		if p.dieAt >= 0 {
			push(callEvent{at: p.dieAt, kind: evDie, p: i})
		}
	}
	calls := make([]int, 10*day/time.Second+1)
	var r callsResult
	first, last := time.Duration(-1), time.Duration(0)
	remaining := f.total
	turn := func(i int, at time.Duration) {
		p := ps[i]
		if p.turnAt >= 0 && p.turnAt <= at {
			return
		}
		p.turnAt = at
		push(callEvent{at: at, kind: evTurn, p: i, epoch: p.epoch})
	}
	for remaining > 0 {
		if len(*q) == 0 {
			t.Fatalf("the fleet stopped with %d charges left", remaining)
		}
		e := q.pop()
		now = e.at
		if now >= 10*day {
			t.Fatalf("the fleet does not finish")
		}
		p := ps[e.p]
		if e.kind != evDie && e.kind != evRevive && e.kind != evReady && e.epoch != p.epoch {
			continue // the process died meanwhile
		}
		switch e.kind {
		case evDie:
			r.deaths++
			p.epoch++
			p.waiting, p.claimed, p.turnAt, p.grant = 0, p.done, -1, billing.TokenGrant{}
			push(callEvent{at: now + 5*time.Minute, kind: evRevive, p: e.p})
		case evRevive:
			for range f.workers {
				push(callEvent{at: now, kind: evReady, p: e.p, epoch: p.epoch})
			}
		case evReady:
			if e.epoch != p.epoch || p.claimed >= p.left {
				continue // a worker of a dead process, or nothing left to start
			}
			p.waiting++
			turn(e.p, max(now, p.pausedTo))
		case evTurn:
			if e.at != p.turnAt {
				continue // superseded by an earlier turn
			}
			p.turnAt = -1
			for p.waiting > 0 && p.claimed < p.left {
				if now < p.pausedTo {
					turn(e.p, p.pausedTo)
					break
				}
				var end time.Duration
				if f.shared {
					g := p.grant
					if g.N == 0 || now >= g.End.Sub(time.Unix(0, 0)) {
						if g, err = tokens.Take(ctx, f.batch); err != nil {
							t.Fatal(err)
						}
						p.grant = g
					}
					if s := g.Start.Sub(time.Unix(0, 0)); g.N == 0 || s > now {
						turn(e.p, max(s, now+time.Millisecond))
						break
					}
					p.grant.N--
					end = g.End.Sub(time.Unix(0, 0))
				} else {
					if p.next > now {
						turn(e.p, p.next)
						break
					}
					p.next = now + interval
				}
				p.waiting--
				p.claimed++
				push(callEvent{at: now + write(), kind: evMarked, p: e.p, epoch: p.epoch, end: end})
			}
			if p.claimed >= p.left {
				p.waiting = 0 // nothing left to start: these workers are done
			}
		case evMarked:
			if f.windowCheck && e.end > 0 && now >= e.end {
				r.missed++ // not sent; withdrawn (a write) and tried again
				p.claimed--
				push(callEvent{at: now + write(), kind: evReady, p: e.p, epoch: p.epoch})
				continue
			}
			sec := int(now / time.Second)
			calls[sec]++
			r.worst = max(r.worst, calls[sec])
			if first < 0 {
				first = now
			}
			last = now
			allowed := f.limit
			if burst[sec] {
				allowed = f.limit * 6 / 10
			}
			if calls[sec] > allowed {
				push(callEvent{at: now + 50*time.Millisecond, kind: evAnswer, p: e.p, epoch: p.epoch, limited: true})
				continue
			}
			p.done++
			remaining--
			r.charges++
			answer := time.Duration(150+rng.Intn(301)) * time.Millisecond
			if p.slowFrom >= 0 && now >= p.slowFrom && now < p.slowFrom+10*time.Minute {
				answer *= 5
			}
			push(callEvent{at: now + answer, kind: evAnswer, p: e.p, epoch: p.epoch, ok: true})
		case evAnswer:
			next := now + 2*write() // the outcome and the next period
			if e.limited {
				r.limited++
				p.claimed-- // withdrawn, tried again after the pause
				p.pausedTo = max(p.pausedTo, now+time.Second)
				if f.shared {
					if err := tokens.Slow(ctx, time.Second); err != nil {
						t.Fatal(err)
					}
				}
				next = max(now+write(), p.pausedTo)
			}
			push(callEvent{at: next, kind: evReady, p: e.p, epoch: p.epoch})
		}
	}
	r.span = int((last-first)/time.Second) + 1
	return r
}

// TestFleetPacingCalls prints the pacing of the per-call fleet model for
// 4M charges at 100/s at K = 8, 32 and 128 (docs/capacity.md): the shared
// budget (batches of 10, 40 workers a process) and the static split. It
// takes about 30 s, so it runs only with BILLING_LONG_TESTS set.
func TestFleetPacingCalls(t *testing.T) {
	if os.Getenv(dynamotest.LongEnv) == "" || raceBuild {
		t.Skipf("about 30 s: %s=1 runs it (not in -race builds)", dynamotest.LongEnv)
	}
	const limit, total = 100, 4_000_000
	span := func(s int) string {
		d := time.Duration(s) * time.Second
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	for _, k := range []int{8, 32, 128} {
		f := callsFleet{k: k, limit: limit, total: total, workers: 40, batch: 10, seed: 1, shared: true, windowCheck: true}
		sh := f.run(t)
		require.LessOrEqual(t, sh.worst, limit, "K=%d: a second over the limit", k)
		f.shared = false
		st := f.run(t)
		t.Logf("pacing calls K=%d shared %.1f %% span %s busiest second %d (missed windows %d, 429s %d, deaths %d) static %.1f %% span %s busiest second %d",
			k, sh.efficiency(limit), span(sh.span), sh.worst, sh.missed, sh.limited, sh.deaths,
			st.efficiency(limit), span(st.span), st.worst)
		require.Greater(t, sh.efficiency(limit), st.efficiency(limit), "K=%d", k)
	}
}

// TestFleetCallsSentInsideTheirWindow: in a fleet that does not saturate
// the budget (5 workers a process), tokens are handed out late in their
// window too, and some attempts are still being recorded when it closes.
// Sent anyway, those calls make seconds of more than the limit; not sent
// (Collector.charge), no second exceeds it, dying processes and 429
// bursts included.
func TestFleetCallsSentInsideTheirWindow(t *testing.T) {
	const limit = 100
	f := callsFleet{k: 8, limit: limit, total: 400_000, workers: 5, batch: 10, seed: 1, shared: true, windowCheck: true}
	checked := f.run(t)
	f.windowCheck = false
	unchecked := f.run(t)
	t.Logf("5 workers a process, K=8, 400k charges, %d deaths: shared %.1f %%, busiest second %d, missed windows %d; sent anyway: busiest second %d",
		checked.deaths, checked.efficiency(limit), checked.worst, checked.missed, unchecked.worst)
	require.Positive(t, checked.deaths, "processes die holding tokens")
	require.Positive(t, checked.missed, "some attempts outlast their window")
	require.LessOrEqual(t, checked.worst, limit, "no second over the limit")
	require.Greater(t, unchecked.worst, limit, "sent late, calls land in a second whose tokens others spent")
	require.Equal(t, 400_000, checked.charges)
}
