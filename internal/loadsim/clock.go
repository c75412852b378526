package loadsim

import (
	"fmt"
	"math"
	"sync"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/capacity"
)

// bucket is one throughput limit of the modelled store (an index
// partition, a table's write or read quota): clock is the modelled time it
// has been busy, the units it accepted divided by its rate. It starts at 0
// and never jumps to the global time, so capacity left unused while the
// run had no work for it is kept (see the package doc).
type bucket struct {
	rate  float64 // units a second
	clock float64 // seconds
	units float64
}

// charge is units to spend on a bucket.
type charge struct {
	b     *bucket
	units float64
}

// shardClock is the modelled time of one shard's run: its pages one
// after the other, the records of a page handled by min(W, users)
// workers at once.
type shardClock struct {
	closed float64 // the pages read and finished
	work   float64 // latency of the calls of the page in progress
	users  int     // users of the page in progress (one lock each)
	now    float64 // closed plus the page in progress so far
}

// world is the modelled time of a simulation: the clocks of its shard
// runs, of the processor and of the store's limits, under one mutex.
type world struct {
	cfg Config
	mu  sync.Mutex
	pmu sync.Mutex // guards the partition maps

	shards []shardClock
	sumNow float64 // Σ shards[i].now
	proc   float64 // the processor's clock: requests / limit
	floor  float64 // modelled backoff: no request before it

	parts     map[string]*bucket // index partitions' WCU, by partition key
	partReads map[string]*bucket // index partitions' RCU
	table     *bucket            // data tables' WCU
	tableRead *bucket            // data tables' RCU (index reads included)
	lockTable *bucket            // lock table's WCU

	itemSizes, historySizes sizer

	dataCalls, lockCalls     int
	lockRCU                  float64
	indexRead                float64 // index RCU
	itemsRead                int     // index items read
	throttled                int     // writes refused
	throttledUpdates         int     // of them, outcome writes (Update)
	providerCalls, lookups   int
	maxItem, maxHistory      int // largest item sizes seen, bytes
	collectedKeys            map[string]bool
	charges, replays         int
	conflictingReplayAmounts int
}

func newWorld(cfg Config) *world {
	return &world{
		cfg: cfg, shards: make([]shardClock, cfg.Shards),
		parts: map[string]*bucket{}, partReads: map[string]*bucket{},
		table: &bucket{rate: cfg.TableWCU}, tableRead: &bucket{rate: cfg.TableRCU}, lockTable: &bucket{rate: cfg.TableWCU},
		collectedKeys: make(map[string]bool, cfg.Due),
	}
}

// now is the global modelled time, mu held: the mean of the shard runs'
// clocks, the processor's clock or the backoff floor, the latest.
func (w *world) now() float64 {
	return max(w.sumNow/float64(len(w.shards)), w.proc, w.floor)
}

// setShard recomputes shard s's clock after a change, mu held.
func (w *world) setShard(s int) {
	sc := &w.shards[s]
	w.sumNow -= sc.now
	sc.now = sc.closed + sc.work/float64(max(1, min(w.cfg.Workers, sc.users)))
	w.sumNow += sc.now
}

// call adds one store call's latency to shard s's page, mu held.
func (w *world) call(s int, lock bool) {
	if lock {
		w.lockCalls++
	} else {
		w.dataCalls++
	}
	w.shards[s].work += w.cfg.CallLatency.Seconds()
	w.setShard(s)
}

// page closes shard s's page in progress and adds the page read that
// starts the next one: the collector handles a page's records before it
// reads the next page.
func (w *world) page(s int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closePage(s)
	w.dataCalls++
	w.shards[s].closed += w.cfg.CallLatency.Seconds()
	w.setShard(s)
}

func (w *world) closePage(s int) {
	sc := &w.shards[s]
	sc.closed += sc.work / float64(max(1, min(w.cfg.Workers, sc.users)))
	sc.work, sc.users = 0, 0
	w.setShard(s)
}

// partition returns the index partition of key, made on first use. The
// maps have a lock of their own (pmu): writes look their partitions up
// before they take mu, reads while they hold it.
func (w *world) partition(m map[string]*bucket, key string, rate float64) *bucket {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	b := m[key]
	if b == nil {
		b = &bucket{rate: rate}
		m[key] = b
	}
	return b
}

// write is one store call of shard s spending charges. With throttle, a
// call that would take a limit further than Burst seconds ahead of the
// global modelled time is refused whole (nothing spent, nothing applied by
// the caller) with an error wrapping billing.ErrThrottled, and the
// modelled time is moved on to where that limit has room for half its
// burst again: the backoff the collector's StoreBudget takes, in modelled
// time. mu is taken.
func (w *world) write(s int, lock, throttle bool, charges []charge) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.call(s, lock)
	if throttle {
		t := w.now()
		for i, c := range charges {
			need := c.b.clock
			for _, d := range charges[:i+1] {
				if d.b == c.b {
					need += d.units / d.b.rate
				}
			}
			if need > t+w.cfg.Burst {
				w.throttled++
				w.floor = max(w.floor, need-w.cfg.Burst/2)
				return fmt.Errorf("loadsim: %.0f units over a limit's burst at %.3fs: %w", c.units, t, billing.ErrThrottled)
			}
		}
	}
	for _, c := range charges {
		c.b.clock += c.units / c.b.rate
		c.b.units += c.units
	}
	return nil
}

// locked counts a user handled on shard s's page (the collector takes one
// lock per user of a page).
func (w *world) locked(s int) {
	w.mu.Lock()
	w.shards[s].users++
	w.setShard(s)
	w.mu.Unlock()
}

// processor is one processor request of shard s: its latency on the
// shard's page, 1/limit on the processor's clock.
func (w *world) processor(s int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.providerCalls++
	w.shards[s].work += w.cfg.ProcessorLatency.Seconds()
	w.setShard(s)
	if w.cfg.ProcessorLimit > 0 {
		w.proc += 1 / w.cfg.ProcessorLimit
	}
}

// clocks closes every page and returns the modelled seconds each limit of
// the model took: the largest shard run, the processor, the busiest index
// partition for writes and for reads, the busier table for writes, the
// data tables for reads.
func (w *world) clocks() map[capacity.Limit]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.shards {
		w.closePage(s)
	}
	busiest := func(m map[string]*bucket) float64 {
		v := 0.0
		for _, b := range m {
			v = max(v, b.clock)
		}
		return v
	}
	conc := 0.0
	for _, sc := range w.shards {
		conc = max(conc, sc.closed)
	}
	return map[capacity.Limit]float64{
		capacity.LimitIndexWCU:    busiest(w.parts),
		capacity.LimitIndexRCU:    busiest(w.partReads),
		capacity.LimitTableWCU:    max(w.table.clock, w.lockTable.clock),
		capacity.LimitTableRCU:    w.tableRead.clock,
		capacity.LimitConcurrency: conc,
		capacity.LimitProcessor:   w.proc,
	}
}

// limitOrder is the model's order of limits, the first binding a tie.
var limitOrder = []capacity.Limit{capacity.LimitIndexWCU, capacity.LimitIndexRCU, capacity.LimitTableWCU,
	capacity.LimitTableRCU, capacity.LimitConcurrency, capacity.LimitProcessor}

// binding returns the limit that took longest and its seconds.
func binding(clocks map[capacity.Limit]float64) (capacity.Limit, float64) {
	best, secs := limitOrder[0], math.Inf(-1)
	for _, l := range limitOrder {
		if v := clocks[l]; v > secs+1e-12 {
			best, secs = l, v
		}
	}
	return best, secs
}
