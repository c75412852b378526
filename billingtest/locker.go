package billingtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
)

// lostPoll is how often a stopped lease looks at the clock to notice that it
// expired: the clock may be a fake one that nobody announces changes of.
const lostPoll = time.Millisecond

// Locker is an in-memory [billing.Locker] that behaves like the DynamoDB
// one: one holder per user, [billing.ErrAlreadyLocked] at once for the
// others, leases that are lost when they stop being renewed.
//
// Leases renew themselves implicitly, so they never expire on their own,
// however far the clock moves. [Locker.StopHeartbeat] makes one behave like
// a paused or partitioned holder: it is lost once the lease duration has
// passed on the injected clock (Lost is closed within about a millisecond of
// the clock reaching that point, or at once when a contender takes the lock).
// Any contender may take an expired lease on its first try. A Release that
// fails (its context is done) stops the renewal as StopHeartbeat does.
//
// [billing.Lease.Deadline] is on the process's clock, as the interface
// requires, whatever clock the Locker was given: a renewed lease's deadline
// is one lease duration from now (as if it had just been renewed), a stopped
// lease's is now plus what is left of its lease on the injected clock, and a
// lost or released lease's is the moment (on the process's clock) it was
// lost or released.
//
// Safe for concurrent use.
type Locker struct {
	clock billing.Clock
	lease time.Duration

	mu   sync.Mutex
	held map[string]*memLease // current holder of each locked user
}

var _ billing.Locker = (*Locker)(nil)

// NewLocker returns an in-memory locker whose stopped leases expire after
// leaseDuration on clock. A nil clock means [billing.SystemClock]; a
// non-positive leaseDuration means [dynamostore.DefaultLeaseDuration].
func NewLocker(clock billing.Clock, leaseDuration time.Duration) *Locker {
	if clock == nil {
		clock = billing.SystemClock{}
	}
	if leaseDuration <= 0 {
		leaseDuration = dynamostore.DefaultLeaseDuration
	}
	return &Locker{clock: clock, lease: leaseDuration, held: make(map[string]*memLease)}
}

// Lock implements [billing.Locker].
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
	s := &memLease{locker: l, userID: userID, lost: make(chan struct{})}
	l.held[userID] = s
	return s, nil
}

// StopHeartbeat stops renewing lease, which must come from l, as if its
// holder had paused: it is lost once the lease duration has passed on the
// clock from now. It does nothing to a lease already stopped, released or
// lost.
func (l *Locker) StopHeartbeat(lease billing.Lease) {
	s, ok := lease.(*memLease)
	if !ok || s.locker != l {
		panic(fmt.Sprintf("billingtest: StopHeartbeat of a %T that this Locker did not hand out", lease))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.released || s.isLost() || !s.stoppedAt.IsZero() {
		return
	}
	s.stoppedAt = l.clock.Now()
	go s.watch()
}

// Locked reports whether userID's lock is held by a lease that has not
// expired.
func (l *Locker) Locked(userID string) bool {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.held[userID]
	return cur != nil && !cur.expired(now)
}

// memLease is a lease of an in-memory Locker. Its fields other than the
// channels are guarded by locker.mu.
type memLease struct {
	locker *Locker
	userID string

	lost      chan struct{}
	stoppedAt time.Time // zero while heartbeating; on the injected clock
	released  bool
	endedAt   time.Time // when lost or released, on the process's clock
}

var _ billing.Lease = (*memLease)(nil)

func (s *memLease) UserID() string        { return s.userID }
func (s *memLease) Lost() <-chan struct{} { return s.lost }

// Deadline implements [billing.Lease]; see [Locker].
func (s *memLease) Deadline() time.Time {
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

// end records when the lease was lost or released; locker.mu is held.
func (s *memLease) end() {
	if s.endedAt.IsZero() {
		s.endedAt = time.Now()
	}
}

func (s *memLease) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// markLost closes lost and frees the user; locker.mu is held.
func (s *memLease) markLost() {
	if !s.isLost() {
		s.end()
		close(s.lost)
	}
	if s.locker.held[s.userID] == s {
		delete(s.locker.held, s.userID)
	}
}

// expired reports whether the lease is stopped and its lease duration has
// passed at now; locker.mu is held.
func (s *memLease) expired(now time.Time) bool {
	return !s.stoppedAt.IsZero() && !now.Before(s.stoppedAt.Add(s.locker.lease))
}

// watch polls the clock after StopHeartbeat until the lease is lost or
// released.
func (s *memLease) watch() {
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

// Release implements [billing.Lease].
func (s *memLease) Release(ctx context.Context) error {
	now := s.locker.clock.Now()
	s.locker.mu.Lock()
	defer s.locker.mu.Unlock()
	if !s.released {
		if err := ctx.Err(); err != nil {
			// Renewal ends at the first Release, as for the DynamoDB locker.
			if s.stoppedAt.IsZero() && !s.isLost() {
				s.stoppedAt = now
				go s.watch()
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
