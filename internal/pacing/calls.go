package pacing

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	billing "github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// The call model's events.
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

// runCalls is the call model: it runs the fleet's events in modelled time
// until every shard is charged. Latencies: a store write 5-25 ms, a
// processor answer 150-450 ms (5x for a slow process), a 429 answer 50 ms.
// Shards, late starts, deaths and 429 bursts are the one-second model's,
// drawn the same way (not the same draws: this model draws instants, not
// seconds); with fewer than 20 processes, the second always dies once.
func runCalls(ctx context.Context, c Config) (Result, error) {
	f := struct {
		k, limit, total, workers, batch int
		shared, windowCheck             bool
	}{c.Processes, c.Limit, c.Charges, c.Workers, c.Batch, !c.Static, !c.SendLate}
	rng := rand.New(rand.NewSource(c.Seed))
	day := time.Duration(f.total/f.limit) * time.Second
	weights, sum := c.weights()
	fl := c.faults()
	ps := make([]*callProc, f.k)
	for i := range ps {
		ps[i] = &callProc{left: weights[i], dieAt: -1, slowFrom: -1, turnAt: -1}
	}
	given := 0
	for i, p := range ps {
		p.left = f.total * p.left / sum
		if i == f.k-1 {
			p.left = f.total - given
		}
		given += p.left
		if rng.Intn(10) == 0 {
			p.start = time.Duration(rng.Intn(fl.late)) * time.Second
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
		for s := b; s < b+fl.burst; s++ {
			burst[s] = true
		}
	}
	var now time.Duration
	tokens, err := memory.NewTokens(f.limit, func() time.Time { return time.Unix(0, 0).Add(now) })
	if err != nil {
		return Result{}, fmt.Errorf("pacing: %w", err)
	}
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
	r := Result{Limit: f.limit}
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
	for events := 0; remaining > 0; events++ {
		if len(*q) == 0 {
			return r, fmt.Errorf("%w: it stopped with %d charges left", ErrStalled, remaining)
		}
		if events%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return r, err
			}
		}
		e := q.pop()
		now = e.at
		if now >= 10*day {
			return r, fmt.Errorf("%w: %d charges left after %v", ErrStalled, remaining, now)
		}
		p := ps[e.p]
		if e.kind != evDie && e.kind != evRevive && e.kind != evReady && e.epoch != p.epoch {
			continue // the process died meanwhile
		}
		switch e.kind {
		case evDie:
			r.Deaths++
			p.epoch++
			p.waiting, p.claimed, p.turnAt, p.grant = 0, p.done, -1, billing.TokenGrant{}
			push(callEvent{at: now + time.Duration(fl.takeover)*time.Second, kind: evRevive, p: e.p})
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
							return r, fmt.Errorf("pacing: take: %w", err)
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
				r.MissedWindows++ // not sent; withdrawn (a write) and tried again
				p.claimed--
				push(callEvent{at: now + write(), kind: evReady, p: e.p, epoch: p.epoch})
				continue
			}
			sec := int(now / time.Second)
			calls[sec]++
			r.Busiest = max(r.Busiest, calls[sec])
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
			r.Charges++
			answer := time.Duration(150+rng.Intn(301)) * time.Millisecond
			if p.slowFrom >= 0 && now >= p.slowFrom && now < p.slowFrom+time.Duration(fl.slow)*time.Second {
				answer *= 5
			}
			push(callEvent{at: now + answer, kind: evAnswer, p: e.p, epoch: p.epoch, ok: true})
		case evAnswer:
			next := now + 2*write() // the outcome and the next period
			if e.limited {
				r.RateLimited++
				p.claimed-- // withdrawn, tried again after the pause
				p.pausedTo = max(p.pausedTo, now+time.Second)
				if f.shared {
					if err := tokens.Slow(ctx, time.Second); err != nil {
						return r, fmt.Errorf("pacing: slow: %w", err)
					}
				}
				next = max(now+write(), p.pausedTo)
			}
			push(callEvent{at: next, kind: evReady, p: e.p, epoch: p.epoch})
		}
	}
	r.Span = ((last-first)/time.Second + 1) * time.Second
	return r, nil
}
