package pacing

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Cycle is how long a worker takes over one collection on average, in
// each model: in the call model the attempt's write (15 ms), the
// processor's answer (300 ms) and the outcome's two writes (30 ms); in
// the one-second model 320 ms (40 workers make 125 calls a second).
func (c Config) Cycle() time.Duration {
	if c.Calls {
		return 345 * time.Millisecond
	}
	return 320 * time.Millisecond
}

// Bound is the best a fleet's shape lets the shared budget do, faults
// aside: each process makes at most Workers/Cycle calls a second, the
// budget shares the limit evenly among the processes with records left
// (as first come, first served does among equal processes), and a
// process whose shard is done adds nothing.
type Bound struct {
	// Efficiency is the best pacing efficiency, in percent.
	Efficiency float64
	// From is when the processes with records left can no longer make
	// the limit's calls (the whole span when they never can); Left is
	// how many they are then, PerProcess the calls a second each can
	// make.
	From       time.Duration
	Left       int
	PerProcess float64
	// Workers is the fewest workers a process that would pace the fleet
	// at 99 % or more by this bound.
	Workers int
	cfg     Config
}

// Bounded reports whether the fleet's shape keeps the shared budget under
// 99 %.
func (b Bound) Bounded() bool { return b.Efficiency < 99 }

// BoundOf returns the bound of c (its defaults filled in).
func BoundOf(c Config) Bound {
	c = c.WithDefaults()
	b := fluid(c, c.Workers)
	b.cfg = c
	lo, hi := 1, max(c.Workers, 1)
	for fluid(c, hi).Efficiency < 99 && hi < 1<<20 {
		hi *= 2
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fluid(c, mid).Efficiency >= 99 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	b.Workers = hi
	return b
}

// fluid runs the fleet of c with w workers a process as a fluid: every
// process with records left gets an even share of the limit, at most
// what its workers make, the rest going to the others.
func fluid(c Config, w int) Bound {
	weights, sum := c.weights()
	per := float64(w) / c.Cycle().Seconds()
	left := make([]float64, len(weights))
	for i, wt := range weights {
		left[i] = float64(c.Charges) * float64(wt) / float64(sum)
	}
	sort.Float64s(left)
	limit := float64(c.Limit)
	b := Bound{From: -1, PerProcess: per}
	var t, done float64
	for i := range left {
		n := len(left) - i
		if left[i]-done <= 0 {
			continue
		}
		rate := min(per, limit/float64(n)) // each of the n left
		if rate*float64(n) < limit && b.From < 0 {
			b.From, b.Left = time.Duration(t*float64(time.Second)), n
		}
		dt := (left[i] - done) / rate
		t += dt
		done = left[i]
	}
	b.Efficiency = 100 * float64(c.Charges) / (limit * math.Max(t, 1))
	if b.From < 0 {
		b.From = time.Duration(t * float64(time.Second))
	}
	return b
}

// String says what binds the fleet:
//
//	bound K=8: at most 38.6 %: from 0h00m 8 processes have records left, 40 workers each at 345 ms a collection make 116 calls a second: 928 of the limit's 1000 (--workers 329: 99 % but for faults)
func (b Bound) String() string {
	procs := "processes have"
	if b.Left == 1 {
		procs = "process has"
	}
	return fmt.Sprintf("bound K=%d: at most %.1f %%: from %s %d %s records left, %d workers each at %d ms a collection make %.0f calls a second: %.0f of the limit's %d (--workers %d: 99 %% but for faults)",
		b.cfg.Processes, b.Efficiency, FormatSpan(b.From), b.Left, procs, b.cfg.Workers, b.cfg.Cycle().Milliseconds(),
		b.PerProcess, b.PerProcess*float64(b.Left), b.cfg.Limit, b.Workers)
}
