package faultsim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dynabill/billing"
)

// Locker is a deterministic billing lock on the simulated clock, shared by
// every host (the lock table). A lease is renewed by its holder's
// heartbeat until it is released, or until its holder stalls: a stalled
// lease is lost to its holder one lease duration after its last
// heartbeat, and taken over by anyone from 1.25 lease durations after it,
// as with the DynamoDB locker. Faults: a Lock that fails (nothing held), a
// Lock whose write applied although it failed (held by nobody until it
// runs out), a holder that stalls before it releases (it learns its
// lease is lost; others find the user locked for a while), and releases
// that never reach the lock table (the lock stays until taken over).
type Locker struct {
	env   *env
	lease time.Duration
	calls *counter
	// stuck is told of every lock left held by a holder that is gone.
	stuck func(user string)

	mu   sync.Mutex
	held map[string]*lease
}

// NewLocker returns the simulation's lock table with the given lease
// duration.
func newLocker(e *env, leaseDuration time.Duration) *Locker {
	return &Locker{env: e, lease: leaseDuration, calls: newCounter(), held: map[string]*lease{}}
}

// lease is one hold of a user's lock.
type lease struct {
	l        *Locker
	user     string
	host     string
	acquired time.Time
	// stalled leases are not renewed any more: their last heartbeat was
	// lastBeat.
	stalled  bool
	lastBeat time.Time
	// stallAtRelease makes Release stall the lease instead.
	stallAtRelease bool
	// crashAtRelease makes every Release fail: the holder is gone, and
	// the lock stays until it can be taken over.
	crashAtRelease bool
	lost           chan struct{}
	isLost         bool
	released       bool
}

// hostLocker is the Locker as one host uses it.
type hostLocker struct {
	l    *Locker
	host string
}

func (l *Locker) forHost(host string) billing.Locker { return hostLocker{l, host} }

func (h hostLocker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	return h.l.lock(ctx, h.host, userID)
}

// takeoverAt is when others may take a stalled lease.
func (l *Locker) takeoverAt(s *lease) time.Time { return s.lastBeat.Add(l.lease * 5 / 4) }

// free reports whether s no longer keeps others out at now. l.mu is held.
func (l *Locker) free(s *lease, now time.Time) bool {
	return s.released || s.isLost && !s.stalled || s.stalled && !now.Before(l.takeoverAt(s))
}

func (l *Locker) lock(ctx context.Context, host, user string) (billing.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lock %s: %w", user, err)
	}
	now := l.env.clock.Now()
	n := l.calls.next(user)
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.held[user]; cur != nil {
		if !l.free(cur, now) {
			return nil, fmt.Errorf("lock %s (held by %s since %s): %w", user, cur.host, cur.acquired.Format(time.RFC3339), billing.ErrAlreadyLocked)
		}
		cur.loseLocked() // taken over
		delete(l.held, user)
	}
	s := &lease{l: l, user: user, host: host, acquired: now, lastBeat: now, lost: make(chan struct{})}
	if l.env.stormy() {
		switch u := draw(l.env.seed, "lock", user, n); {
		case u < 0.006:
			l.env.faults.add("lock: failed")
			return nil, fmt.Errorf("faultsim: lock %s: lock table unavailable", user)
		case u < 0.010:
			l.env.faults.add("lock: applied, then failed")
			s.host, s.stalled = "(nobody: ambiguous lock write)", true
			l.held[user] = s
			return nil, fmt.Errorf("faultsim: lock %s: timeout after the lock write applied", user)
		case u < 0.020:
			l.env.faults.add("lock: holder stalls before release")
			s.stallAtRelease = true
		case u < 0.023:
			l.env.faults.add("lock: release never reaches the lock table")
			s.crashAtRelease = true
		}
	}
	l.held[user] = s
	return s, nil
}

// stall makes the current holder of user's lock stall past its lease now,
// as a holder blocked in a processor call longer than its lease: it loses
// the lease and anyone may take the lock over.
func (l *Locker) stall(user string) {
	now := l.env.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.held[user]; s != nil && !s.released && !s.stalled {
		s.stalled, s.lastBeat = true, now.Add(-2*l.lease)
		s.loseLocked()
	}
}

// loseLocked closes Lost; l.mu is held.
func (s *lease) loseLocked() {
	if !s.isLost {
		s.isLost = true
		close(s.lost)
	}
}

func (s *lease) UserID() string { return s.user }

func (s *lease) Lost() <-chan struct{} {
	now := s.l.env.clock.Now()
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if s.stalled && !now.Before(s.lastBeat.Add(s.l.lease)) {
		s.loseLocked()
	}
	return s.lost
}

func (s *lease) Deadline() time.Time {
	now := s.l.env.clock.Now()
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	switch {
	case s.isLost || s.released:
		return time.Now().Add(-time.Second)
	case s.stalled:
		left := s.lastBeat.Add(s.l.lease).Sub(now)
		if left <= 0 {
			s.loseLocked()
			return time.Now().Add(-time.Second)
		}
		return time.Now().Add(left)
	}
	return time.Now().Add(s.l.lease)
}

func (s *lease) Release(ctx context.Context) error {
	now := s.l.env.clock.Now()
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if s.stallAtRelease && !s.stalled {
		// The holder paused for longer than its lease before releasing:
		// its local deadline passed, but the lock table still shows it
		// held until it can be taken over.
		s.stalled, s.lastBeat = true, now.Add(-s.l.lease*21/20)
		s.loseLocked()
	}
	if s.released {
		return nil
	}
	if s.crashAtRelease && !s.isLost {
		if !s.stalled {
			s.stalled, s.lastBeat = true, now
			if s.l.stuck != nil {
				s.l.stuck(s.user)
			}
		}
		return fmt.Errorf("faultsim: release %s: lock table unreachable", s.user)
	}
	if s.isLost || s.stalled && !now.Before(s.lastBeat.Add(s.l.lease)) {
		s.loseLocked()
		return fmt.Errorf("release %s: %w", s.user, billing.ErrLeaseLost)
	}
	s.released = true
	if s.l.held[s.user] == s {
		delete(s.l.held, s.user)
	}
	return nil
}

// check returns the users locked in a way the Locker contract forbids at
// now: a lease still renewed although its holder returned (checked
// between steps, when no operation runs), or a lock nobody can take over
// within two lease durations of its last heartbeat.
func (l *Locker) check(now time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var bad []string
	for u, s := range l.held {
		switch {
		case l.free(s, now):
			continue
		case !s.stalled && now.Sub(s.acquired) > 2*l.lease:
			bad = append(bad, fmt.Sprintf("user %s locked by %s since %s and never released (%v)", u, s.host, s.acquired.Format(time.RFC3339), now.Sub(s.acquired)))
		case s.stalled && l.takeoverAt(s).Sub(s.lastBeat) > 2*l.lease:
			bad = append(bad, fmt.Sprintf("user %s locked by %s past two lease durations after its last heartbeat %s", u, s.host, s.lastBeat.Format(time.RFC3339)))
		}
	}
	slices.Sort(bad)
	return bad
}
