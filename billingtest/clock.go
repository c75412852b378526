package billingtest

import (
	"sync"
	"time"

	"github.com/dynabill/billing"
)

// Clock is a [billing.Clock] that moves only when told to ([Clock.Set],
// [Clock.Advance]) and runs nothing: the clock of unit tests that call the
// collector themselves. [TestClock] is the one that also runs the host's
// daily jobs on every simulated day it passes. The zero value reads
// 2024-01-01T00:00:00Z. Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ billing.Clock = (*Clock)(nil)

// NewClock returns a Clock reading t (in UTC).
func NewClock(t time.Time) *Clock { return &Clock{now: t.UTC()} }

// Now returns the current fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return c.now
}

// Set moves the clock to t (in UTC).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.UTC()
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now.Add(d)
	return c.now
}
