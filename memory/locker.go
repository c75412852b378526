package memory

import (
	"context"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/memlock"
)

// LockerOptions configures [NewLocker]. The zero value is a locker on the
// system clock with the DynamoDB locker's lease duration.
type LockerOptions struct {
	// Clock times the leases. Defaults to [billing.SystemClock]; give a fake
	// clock when the collector runs on one, so that leases expire in the
	// same time as everything else.
	Clock billing.Clock
	// LeaseDuration is how long a lease outlives its last renewal.
	// Defaults to [DefaultLeaseDuration].
	LeaseDuration time.Duration
}

// Locker is a [billing.Locker] for a single process: the billing locks of
// the collector, the admin API and anything else that shares the Locker
// (and, usually, a [Store]). It keeps the contract of the DynamoDB locker:
// one holder per user, [billing.ErrAlreadyLocked] at once for anyone else,
// and leases that run out once nobody renews them.
//
// A lease is renewed for as long as its holder keeps it, with no
// heartbeat traffic: holder and lock live in the same process, so the
// holder cannot pause without the lock pausing too. It stops being renewed
// at its first Release that fails (the context was done, as for the
// DynamoDB locker); it is then lost once
// LeaseDuration has passed on the clock (Lost closes within about a
// millisecond of the clock getting there, or at once when another caller
// takes the lock), and anyone may take the lock from then on.
//
// [billing.Lease.Deadline] is on the process's clock, as the interface
// asks, whatever clock the Locker runs on: LeaseDuration from now for a
// renewed lease, now plus what remains of its lease on the Locker's clock
// for a stopped one, and the moment (on the process's clock) it was lost
// or released for a lost or released one.
//
// Safe for concurrent use. Nothing is shared between processes: two
// processes with a Locker each do not exclude each other.
type Locker struct {
	l *memlock.Locker
}

var _ billing.Locker = (*Locker)(nil)

// NewLocker returns an empty in-memory locker.
func NewLocker(opts LockerOptions) *Locker {
	return &Locker{l: memlock.New(memlock.Options{Clock: opts.Clock, LeaseDuration: opts.LeaseDuration})}
}

// Lock implements [billing.Locker]. A lease that ran out is taken over:
// its Lost closes.
func (l *Locker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	return l.l.Lock(ctx, userID)
}

// Locked reports whether userID's lock is held by a lease that has not run
// out.
func (l *Locker) Locked(userID string) bool { return l.l.Locked(userID) }
