package faultsim

import (
	"sync"
	"time"

	"github.com/dynabill/billing"
)

// Clock is the simulated clock: it moves only between steps, when the
// driver sets it, so every call inside a step sees the same instant.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ billing.Clock = (*Clock)(nil)

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t.UTC()} }

// Now implements [billing.Clock].
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.UTC()
}
