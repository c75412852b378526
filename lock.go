package billing

import (
	"context"
	"time"
)

// Locker hands out per-user billing locks, so that only one process at a
// time collects a user's subscriptions (a scheduled run and a webhook may
// fire together). [dynamostore.NewLocker] is the DynamoDB implementation;
// memory.NewLocker is an in-memory one for a single process.
//
// # Recovery
//
// A lock is never held for ever by a holder that is gone. Its lease lasts one
// lease duration past its holder's last heartbeat; a holder that crashed, was
// frozen, lost its network or failed to release stops heartbeating, and any
// process (a fresh one included: a new Lambda invocation, a restarted server)
// can take the lock over within two lease durations of the last heartbeat.
// See [dynamostore.Locker] for how, and for the clock assumption it makes.
//
// # What a lease lock cannot promise
//
// A lock held as a lease is only as good as the holder's sense of time. A
// process can pause (a GC pause, a frozen Lambda, a slow network call) for
// longer than the lease after it last checked that it still holds the lock;
// meanwhile the lease expires, another process takes the lock, and when the
// first one wakes up it carries on as if it were still the holder. No lock
// client can prevent that: [Lease.Lost], [Lease.Deadline] and the
// [ErrLeaseLost] returned by [Lease.Release] only narrow the window. A holder
// checks Lost and Deadline right before each step that must not run twice
// (a charge, the write that records it).
//
// So the lock is an optimisation, not the guarantee. It keeps two processes
// from doing the same work at the same time, and the library fences every
// billing write instead: each write is conditional on the state the writer
// read (the record's status and last_run_date or version), so a writer whose
// lease was lost, or who read a stale index, gets a failed condition instead
// of overwriting newer state. A charge carries an idempotency key that stays
// the same across reruns, so a second holder replays the first one's charge
// instead of charging again.
type Locker interface {
	// Lock takes the billing lock of userID. When another holder has it,
	// Lock returns an error wrapping [ErrAlreadyLocked] at once, without
	// waiting: the caller skips the user and leaves its records untouched.
	// Other errors (a cancelled ctx, a storage failure) are returned as they
	// are, wrapped with the user ID; the caller does not hold the lock then
	// either, and a failed Lock leaves the user lockable again within two
	// lease durations at most.
	Lock(ctx context.Context, userID string) (Lease, error)
}

// Lease is a held billing lock. The implementation keeps it alive (by
// heartbeats) until Release; the holder watches Lost and Deadline while it
// works.
type Lease interface {
	// UserID returns the user whose billing is locked.
	UserID() string

	// Lost is closed when the lease is lost while held: its Deadline passed
	// without a heartbeat renewing it, another holder took it, or the Locker
	// was closed. The holder should stop as soon as it can; its conditional
	// writes fail anyway once someone else has changed the records. Lost is
	// never closed by a successful Release.
	Lost() <-chan struct{}

	// Deadline returns the local instant (on this process's clock, to be
	// compared with time.Now) after which the holder must assume the lease
	// lost unless a heartbeat renews it first. It moves forward on each
	// successful heartbeat; another holder takes the lock only some time
	// after it (see [dynamostore.Locker] for the margin and the clock assumption
	// behind it). Once Lost is closed, Deadline is
	// not after the moment it closed. Deadline is cheap: it reads no storage,
	// so a holder can call it right before every step that must be done under
	// the lock, together with a non-blocking look at Lost.
	Deadline() time.Time

	// Release gives the lock back. It returns an error wrapping
	// [ErrLeaseLost] when the lease was lost before it was released (Lost is
	// closed then): the holder must assume that someone else may have acted
	// on the user meanwhile. Release is idempotent: calling it again returns
	// nil, or again ErrLeaseLost.
	//
	// Other errors (ctx, storage) leave the lease unreleased, and Release may
	// be retried; but the lease is no longer renewed from the first Release
	// call on, whatever its outcome. A lease whose release failed therefore
	// runs out: Lost is closed at its Deadline, and another holder can take
	// the lock within two lease durations, even if Release is never retried.
	Release(ctx context.Context) error
}
