package faultsim

import (
	"maps"
	"sync"

	"github.com/dynabill/billing/billingtest"
)

// env is what the models share: the seed, the clock, the weather (whether
// faults may be drawn now) and the log of the faults injected.
type env struct {
	seed   int64
	clock  *billingtest.Clock
	faults *faultLog
	// stormy reports whether faults may be injected at the clock's time;
	// on calm days nothing fails.
	stormy func() bool
	// outage reports whether the processor is unreachable at the
	// clock's time.
	outage func() bool
}

// faultLog counts the faults injected, by kind.
type faultLog struct {
	mu sync.Mutex
	n  map[string]int
}

func newFaultLog() *faultLog { return &faultLog{n: map[string]int{}} }

func (f *faultLog) add(kind string) {
	f.mu.Lock()
	f.n[kind]++
	f.mu.Unlock()
}

func (f *faultLog) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.n)
}

// counter numbers the calls of one identity (a user, a key, a query):
// the n-th call of an identity draws its fault from (seed, identity, n),
// whatever other goroutines do meanwhile.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounter() *counter { return &counter{n: map[string]int{}} }

func (c *counter) next(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[id]++
	return c.n[id]
}
