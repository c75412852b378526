package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"cirello.io/dynamolock/v2"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
)

// leaseLife is how long after the start of its last successful heartbeat
// (or of its acquisition) a lease of the given duration is held: nine
// tenths of it. The tenth kept back covers the holder's own clock rate and
// the time between its last look at [billing.Lease.Deadline] and its next write.
func leaseLife(lease time.Duration) time.Duration { return lease - lease/10 }

// dynamoLease is a lease of a Locker.
type dynamoLease struct {
	locker *Locker
	lock   *dynamolock.Lock
	userID string

	lost     chan struct{}
	lostOnce sync.Once
	lostAt   time.Time     // written before lost is closed
	stop     chan struct{} // closed to end the heartbeat goroutine
	stopOnce sync.Once
	done     chan struct{} // closed when the heartbeat goroutine has ended

	dmu      sync.Mutex // guards deadline, expiry and settled
	deadline time.Time
	expiry   *time.Timer // closes lost at deadline
	settled  bool        // released: the deadline no longer matters

	mu       sync.Mutex // serialises Release and Close
	tried    bool       // a release was attempted: dynamolock now calls the lock expired
	released bool
}

var _ billing.Lease = (*dynamoLease)(nil)

func (s *dynamoLease) UserID() string { return s.userID }

func (s *dynamoLease) Lost() <-chan struct{} { return s.lost }

// Deadline implements [billing.Lease]: the start of the last successful heartbeat,
// or of the acquisition, plus nine tenths of the lease duration.
func (s *dynamoLease) Deadline() time.Time {
	s.dmu.Lock()
	d := s.deadline
	s.dmu.Unlock()
	if s.isLost() && s.lostAt.Before(d) {
		return s.lostAt
	}
	return d
}

func (s *dynamoLease) markLost(reason string, err error) {
	s.lostOnce.Do(func() {
		s.lostAt = time.Now()
		close(s.lost)
		attrs := []slog.Attr{slog.String("reason", reason)}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		s.locker.log(slog.LevelWarn, "billing: billing lock lease lost", s.userID, attrs...)
	})
}

func (s *dynamoLease) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// startExpiry sets the first deadline, from the start of the acquisition,
// and the timer that closes lost when it passes.
func (s *dynamoLease) startExpiry(start time.Time) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.deadline = start.Add(leaseLife(s.locker.cfg.lease))
	s.expiry = time.AfterFunc(time.Until(s.deadline), s.expire)
}

// renew moves the deadline after a heartbeat that started at start
// succeeded, unless the lease is already lost or released.
func (s *dynamoLease) renew(start time.Time) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.settled || s.isLost() {
		return
	}
	s.deadline = start.Add(leaseLife(s.locker.cfg.lease))
	s.expiry.Reset(time.Until(s.deadline))
}

// expire runs on the expiry timer: the lease is lost if its deadline has
// passed.
func (s *dynamoLease) expire() {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.settled {
		return
	}
	if d := time.Until(s.deadline); d > 0 {
		s.expiry.Reset(d) // renewed as the timer fired
		return
	}
	s.markLost("lease expired: no heartbeat renewed it before its deadline", nil)
}

// settle stops the expiry timer of a released lease.
func (s *dynamoLease) settle() {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.settled = true
	s.expiry.Stop()
}

// heartbeat renews the lease every heartbeat period until it is stopped or
// lost, and closes lost when a heartbeat finds the lock taken over. A failed
// heartbeat is logged; if none succeeds before the deadline, the expiry
// timer closes lost.
func (s *dynamoLease) heartbeat() {
	defer close(s.done)
	period, lease := s.locker.cfg.heartbeat, s.locker.cfg.lease
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.lost:
			return
		case <-tick.C:
		}
		// Not cancelled by Release: a heartbeat aborted after DynamoDB applied
		// it would leave a stale record version here and make Release fail.
		// Release waits for it instead.
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), lease/2)
		err := s.locker.dl.SendHeartbeatWithContext(ctx, s.lock)
		cancel()
		switch {
		case err == nil:
			s.renew(start)
		case errors.As(err, new(*dynamolock.LockNotGrantedError)):
			s.markLost("lock taken over or expired", err)
			return
		default:
			s.locker.log(slog.LevelWarn, "billing: billing lock heartbeat failed", s.userID, slog.String("error", err.Error()))
		}
	}
}

// stopHeartbeat ends the heartbeat goroutine and waits for it (and for a
// heartbeat in flight) or for ctx. The goroutine ends even when ctx is done
// first: no heartbeat is sent after stopHeartbeat was called.
func (s *dynamoLease) stopHeartbeat(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release implements [billing.Lease].
func (s *dynamoLease) Release(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		s.stopOnce.Do(func() { close(s.stop) }) // renewal ends here, whatever the outcome
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("billing: releasing lock of user %q: %w", s.userID, err)
		}
		if err := s.release(ctx); err != nil {
			return fmt.Errorf("billing: releasing lock of user %q: %w", s.userID, err)
		}
	}
	if s.isLost() {
		return fmt.Errorf("billing: releasing lock of user %q: %w", s.userID, billing.ErrLeaseLost)
	}
	return nil
}

// release gives the lock item back; s.mu is held. Heartbeats stop first, for
// good: when the release fails, the lease runs out at its deadline. A lease
// whose deadline has passed is marked lost, but its item is still released
// if nobody took it.
func (s *dynamoLease) release(ctx context.Context) error {
	if err := s.stopHeartbeat(ctx); err != nil {
		return err
	}
	if !s.tried && !time.Now().Before(s.Deadline()) {
		s.markLost("lease expired before release", nil)
	}
	s.tried = true
	_, err := s.locker.dl.ReleaseLockWithContext(ctx, s.lock)
	switch {
	case err == nil:
	case errors.As(err, new(*types.ConditionalCheckFailedException)):
		s.markLost("lock taken over before release", nil)
	case errors.Is(err, dynamolock.ErrClientClosed):
		s.markLost("locker closed", nil)
	default:
		return err
	}
	s.settle()
	s.released = true
	s.locker.mu.Lock()
	delete(s.locker.leases, s)
	s.locker.mu.Unlock()
	return nil
}

// closeLease is Close's part: the lease is lost to its holder, and released.
func (s *dynamoLease) closeLease(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil
	}
	s.markLost("locker closed", nil)
	if err := s.release(ctx); err != nil {
		return fmt.Errorf("releasing lock of user %q: %w", s.userID, err)
	}
	return nil
}
