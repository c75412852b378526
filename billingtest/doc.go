// Package billingtest helps test code that uses package billing: fakes for
// every port (a controllable [Clock], in-memory storage and locks) and the
// conformance suites every implementation of a port must pass.
//
// # Wiring
//
//	clock := billingtest.NewClock(time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC))
//	// hand clock to anything that takes a billing.Clock, then
//	clock.Advance(24 * time.Hour)
package billingtest
