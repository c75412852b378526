// Package memlock is the in-memory billing lock behind memory.Locker and
// billingtest.Locker, with the hook tests use to stall a holder.
package memlock

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/storeconf"
	"sync"
	"time"

	"github.com/dynabill/billing"
)

// lostPoll is how often a stopped lease reads the clock to see whether it
// ran out: nobody tells it when an injected clock moves.
const lostPoll = time.Millisecond

// Options configures [New]. The zero value is a locker on the
// system clock with the DynamoDB locker's lease duration.
type Options struct {
	// Clock times the leases. Defaults to [billing.SystemClock]; give a fake
	// clock when the collector runs on one, so that leases expire in the
	// same time as everything else.
	Clock billing.Clock
	// LeaseDuration is how long a lease outlives its last renewal.
	// Defaults to dynamostore.DefaultLeaseDuration.
	LeaseDuration time.Duration
}

// Locker is a [billing.Locker] for a single process: the billing locks of
// the collector, the admin API and anything else that shares the Locker
// (and, usually, a store). It keeps the contract of the DynamoDB locker:
// one holder per user, [billing.ErrAlreadyLocked] at once for anyone else,
// and leases that run out once nobody renews them.
//
// A lease is renewed for as long as its holder keeps it, with no
// heartbeat traffic: holder and lock live in the same process, so the
// holder cannot pause without the lock pausing too. It stops being renewed
// at its first Release that fails (the context was done, as for the
// DynamoDB locker) or after [Locker.StopHeartbeat]; it is then lost once
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
	clock billing.Clock
	lease time.Duration

	mu   sync.Mutex
	held map[string]*lease // the current holder of each locked user
}

var _ billing.Locker = (*Locker)(nil)

// New returns an empty in-memory locker.
func New(opts Options) *Locker {
	if opts.Clock == nil {
		opts.Clock = billing.SystemClock{}
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = storeconf.DefaultLeaseDuration
	}
	return &Locker{clock: opts.Clock, lease: opts.LeaseDuration, held: make(map[string]*lease)}
}

// Lock implements [billing.Locker]. A lease that ran out is taken over:
// its Lost closes.
func (l *Locker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("billing: locking user %q: %w", userID, err)
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.held[userID]; cur != nil {
		if !cur.expired(now) {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, billing.ErrAlreadyLocked)
		}
		cur.markLost()
	}
	s := &lease{locker: l, userID: userID, lost: make(chan struct{})}
	l.held[userID] = s
	return s, nil
}

// Locked reports whether userID's lock is held by a lease that has not run
// out.
func (l *Locker) Locked(userID string) bool {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.held[userID]
	return cur != nil && !cur.expired(now)
}

// StopHeartbeat stops renewing a lease this Locker handed out, as if its
// holder had frozen: the lease is lost once LeaseDuration has passed on the
// clock from now. Tests and demonstrations use it to show what happens to
// a holder that stalls; it panics on a lease from elsewhere, and does
// nothing to a lease already stopped, released or lost.
func (l *Locker) StopHeartbeat(bl billing.Lease) {
	s, ok := bl.(*lease)
	if !ok || s.locker != l {
		panic(fmt.Sprintf("billing: StopHeartbeat of a %T that this Locker did not hand out", bl))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.released || s.isLost() || !s.stoppedAt.IsZero() {
		return
	}
	s.stop(l.clock.Now())
}

// lease is a lease of a Locker. Its fields other than the channel are
// guarded by locker.mu.
type lease struct {
	locker *Locker
	userID string

	lost      chan struct{}
	stoppedAt time.Time // zero while renewed; on the Locker's clock
	released  bool
	endedAt   time.Time // when lost or released, on the process's clock
}

var _ billing.Lease = (*lease)(nil)

// UserID implements [billing.Lease].
func (s *lease) UserID() string { return s.userID }

// Lost implements [billing.Lease].
func (s *lease) Lost() <-chan struct{} { return s.lost }

// Deadline implements [billing.Lease]; see [Locker] for its value.
func (s *lease) Deadline() time.Time {
	now := s.locker.clock.Now()
	s.locker.mu.Lock()
	defer s.locker.mu.Unlock()
	switch {
	case !s.endedAt.IsZero():
		return s.endedAt
	case s.stoppedAt.IsZero():
		return time.Now().Add(s.locker.lease)
	default:
		return time.Now().Add(s.stoppedAt.Add(s.locker.lease).Sub(now))
	}
}

// Release implements [billing.Lease]. With a done ctx it releases nothing
// and stops the renewal; the lease then runs out unless a later Release
// succeeds first.
func (s *lease) Release(ctx context.Context) error {
	now := s.locker.clock.Now()
	s.locker.mu.Lock()
	defer s.locker.mu.Unlock()
	if !s.released {
		if err := ctx.Err(); err != nil {
			if s.stoppedAt.IsZero() && !s.isLost() {
				s.stop(now)
			}
			return fmt.Errorf("billing: releasing lock of user %q: %w", s.userID, err)
		}
		if s.expired(now) {
			s.markLost()
		}
		if s.locker.held[s.userID] == s {
			delete(s.locker.held, s.userID)
		}
		s.end()
		s.released = true
	}
	if s.isLost() {
		return fmt.Errorf("billing: releasing lock of user %q: %w", s.userID, billing.ErrLeaseLost)
	}
	return nil
}

// stop ends the renewal at now (on the Locker's clock) and starts watching
// for the expiry; locker.mu is held.
func (s *lease) stop(now time.Time) {
	s.stoppedAt = now
	go s.watch()
}

// end records when the lease was lost or released; locker.mu is held.
func (s *lease) end() {
	if s.endedAt.IsZero() {
		s.endedAt = time.Now()
	}
}

func (s *lease) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// markLost closes lost and frees the user; locker.mu is held.
func (s *lease) markLost() {
	if !s.isLost() {
		s.end()
		close(s.lost)
	}
	if s.locker.held[s.userID] == s {
		delete(s.locker.held, s.userID)
	}
}

// expired reports whether the lease is no longer renewed and LeaseDuration
// has passed since at now; locker.mu is held.
func (s *lease) expired(now time.Time) bool {
	return !s.stoppedAt.IsZero() && !now.Before(s.stoppedAt.Add(s.locker.lease))
}

// watch reads the clock after the renewal stopped until the lease is lost
// or released.
func (s *lease) watch() {
	t := time.NewTicker(lostPoll)
	defer t.Stop()
	for range t.C {
		now := s.locker.clock.Now()
		s.locker.mu.Lock()
		done := s.released || s.isLost()
		if !done && s.expired(now) {
			s.markLost()
			done = true
		}
		s.locker.mu.Unlock()
		if done {
			return
		}
	}
}
