package billing

import "time"

// Clock tells the time. Everything in the library that needs "now" takes a
// Clock, so tests can drive time (billingtest.Clock) and runs are
// reproducible.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock in UTC. The zero value is ready to use and is
// the default wherever a Clock is optional.
type SystemClock struct{}

// Now returns time.Now in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// ClockFunc adapts a function to [Clock].
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }
