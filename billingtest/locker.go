package billingtest

import (
	"context"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/memlock"
)

// Locker is an in-memory [billing.Locker] that behaves like the DynamoDB
// one: one holder per user, [billing.ErrAlreadyLocked] at once for the
// others, leases that are lost when they stop being renewed. It is
// [memory.Locker] under the name tests have always used; see there for
// the leases and their Deadline.
//
// Leases renew themselves implicitly, so they never expire on their own,
// however far the clock moves. [Locker.StopHeartbeat] makes one behave like
// a paused or partitioned holder: it is lost once the lease duration has
// passed on the injected clock (Lost is closed within about a millisecond of
// the clock reaching that point, or at once when a contender takes the lock).
// Any contender may take an expired lease on its first try. A Release that
// fails (its context is done) stops the renewal as StopHeartbeat does.
//
// Safe for concurrent use.
type Locker struct {
	m *memlock.Locker
}

var _ billing.Locker = (*Locker)(nil)

// NewLocker returns an in-memory locker whose stopped leases expire after
// leaseDuration on clock. A nil clock means [billing.SystemClock]; a
// non-positive leaseDuration means [dynamostore.DefaultLeaseDuration].
func NewLocker(clock billing.Clock, leaseDuration time.Duration) *Locker {
	return &Locker{m: memlock.New(memlock.Options{Clock: clock, LeaseDuration: leaseDuration})}
}

// Lock implements [billing.Locker].
func (l *Locker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	return l.m.Lock(ctx, userID)
}

// StopHeartbeat stops renewing lease, which must come from l, as if its
// holder had paused: it is lost once the lease duration has passed on the
// clock from now. It does nothing to a lease already stopped, released or
// lost.
func (l *Locker) StopHeartbeat(lease billing.Lease) {
	l.m.StopHeartbeat(lease)
}

// Locked reports whether userID's lock is held by a lease that has not
// expired.
func (l *Locker) Locked(userID string) bool {
	return l.m.Locked(userID)
}
