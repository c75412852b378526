package billingtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dynabill/billing"
)

// LockerHarness is what [TestLocker] needs to exercise one
// [billing.Locker] implementation on a fresh store.
type LockerHarness struct {
	// Locker is the implementation under test. Its leases are renewed until
	// they are released.
	Locker billing.Locker

	// Stalled locks the same store as Locker but never renews its leases:
	// each one behaves like a holder that paused right after taking the
	// lock, and must be lost once the lease duration has passed.
	Stalled billing.Locker

	// Fresh, when set, returns a new Locker on the same store that has seen
	// nothing yet, as a new process (a Lambda invocation, a restarted
	// server) would be. For an implementation whose instances share their
	// state in memory it may return Locker. Without it, TestLocker skips the
	// subtest that needs it.
	Fresh func(t *testing.T) billing.Locker

	// WaitLease lets a little more than one lease duration pass: it advances
	// the fake clock of an in-memory locker, or sleeps for a real one.
	// TestLocker calls it after a contender has seen the stalled lease held
	// once, so an implementation may time the expiry of another holder's
	// lease from its own first sight of it (as the DynamoDB locker does).
	WaitLease func()
}

// Contention parameters of [TestLocker].
const (
	lockContenders = 32
	lockRounds     = 20
)

// lostWait bounds the real time TestLocker waits for Lost to close after
// WaitLease (or for anything else that should be quick).
const lostWait = 10 * time.Second

// TestLocker runs the conformance suite of [billing.Locker] on the
// implementation returned by newLocker, which is called once per subtest and
// should use a fresh store (a unique table, a new in-memory locker). The
// subtests run one after another.
//
// It checks that of 32 goroutines racing for one user exactly one wins and
// the others get [billing.ErrAlreadyLocked] naming the user (20 rounds,
// with a fresh user each, every other one just released); that release lets the next holder in and is
// idempotent; that different users never block each other; that a lease
// that is renewed outlives its lease duration, while a stalled one is lost
// after it (Lost closes, another holder can take the lock, the old Release
// reports [billing.ErrLeaseLost]), also by a fresh Locker that never saw
// it held (within lostWait of real time after WaitLease); that a lease
// whose Release failed is no longer renewed and runs out; that a lease's
// Deadline is ahead while it is held and has passed once it is lost; and
// that a cancelled context fails Lock and Release without side effects.
func TestLocker(t *testing.T, newLocker func(t *testing.T) LockerHarness) {
	t.Helper()
	users := newUserSource()
	setup := func(t *testing.T) LockerHarness {
		t.Helper()
		h := newLocker(t)
		if h.Locker == nil || h.Stalled == nil || h.WaitLease == nil {
			t.Fatal("billingtest.TestLocker: the harness needs Locker, Stalled and WaitLease")
		}
		return h
	}

	t.Run("LockAndRelease", func(t *testing.T) {
		h := setup(t)
		u := users.next()
		lease := mustLock(t, h.Locker, u)
		if got := lease.UserID(); got != u {
			t.Errorf("UserID() = %q, want %q", got, u)
		}
		requireNotLost(t, lease)
		requireDeadlineAhead(t, lease)
		mustRelease(t, lease)
		mustRelease(t, lease) // idempotent
		requireNotLost(t, lease)
		next := mustLock(t, h.Locker, u)
		mustRelease(t, lease) // still nil, and does not free the new holder's lock
		requireLocked(t, h.Locker, u)
		mustRelease(t, next)
	})

	t.Run("Contention", func(t *testing.T) {
		h := setup(t)
		for round := range lockRounds {
			u := users.next()
			what := fmt.Sprintf("round %d (never locked user)", round)
			if round%2 == 1 {
				what = fmt.Sprintf("round %d (user just released)", round)
				mustRelease(t, mustLock(t, h.Locker, u))
			}
			winner := raceFor(t, h.Locker, u, what)
			if winner == nil {
				return
			}
			requireNotLost(t, winner)
			requireLocked(t, h.Locker, u)
			mustRelease(t, winner)
		}
	})

	t.Run("ReleaseLetsNextIn", func(t *testing.T) {
		h := setup(t)
		u := users.next()
		first := mustLock(t, h.Locker, u)
		requireLocked(t, h.Locker, u)
		mustRelease(t, first)
		second := mustLock(t, h.Locker, u)
		requireLocked(t, h.Locker, u)
		mustRelease(t, second)
		requireNotLost(t, first)
	})

	t.Run("UsersDoNotBlockEachOther", func(t *testing.T) {
		h := setup(t)
		leases := make([]billing.Lease, lockContenders)
		errs := make([]error, lockContenders)
		held := users.next()
		blocker := mustLock(t, h.Locker, held)
		var wg sync.WaitGroup
		for i := range lockContenders {
			u := users.next()
			wg.Go(func() { leases[i], errs[i] = h.Locker.Lock(t.Context(), u) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("Lock of user %d of %d while other users are locked: %v", i, lockContenders, err)
			}
		}
		for _, l := range leases {
			if l != nil {
				mustRelease(t, l)
			}
		}
		mustRelease(t, blocker)
	})

	t.Run("HeldLeaseOutlivesLeaseDuration", func(t *testing.T) {
		h := setup(t)
		u := users.next()
		lease := mustLock(t, h.Locker, u)
		requireLocked(t, h.Locker, u)
		first := lease.Deadline()
		h.WaitLease()
		requireLocked(t, h.Locker, u)
		requireLocked(t, h.Stalled, u)
		requireNotLost(t, lease)
		requireDeadlineAhead(t, lease)
		if d := lease.Deadline(); !d.After(first) {
			t.Errorf("Deadline of a renewed lease did not move forward: %v, then %v", first, d)
		}
		mustRelease(t, lease)
	})

	t.Run("StalledLeaseIsTakenOver", func(t *testing.T) {
		h := setup(t)
		u := users.next()
		stalled := mustLock(t, h.Stalled, u)
		requireLocked(t, h.Locker, u) // not yet expired
		requireNotLost(t, stalled)
		h.WaitLease()
		taker, err := h.Locker.Lock(t.Context(), u)
		if err != nil {
			t.Fatalf("Lock after the stalled lease's duration passed: %v", err)
		}
		requireLost(t, stalled)
		requireLocked(t, h.Stalled, u)
		if err := stalled.Release(t.Context()); !errors.Is(err, billing.ErrLeaseLost) {
			t.Errorf("Release of the lost lease = %v, want ErrLeaseLost", err)
		}
		if err := stalled.Release(t.Context()); !errors.Is(err, billing.ErrLeaseLost) {
			t.Errorf("second Release of the lost lease = %v, want ErrLeaseLost again", err)
		}
		requireLocked(t, h.Locker, u) // the old holder's Release freed nothing
		requireNotLost(t, taker)
		mustRelease(t, taker)
		mustRelease(t, mustLock(t, h.Locker, u))
	})

	t.Run("StalledLeaseIsLostWithoutTaker", func(t *testing.T) {
		h := setup(t)
		u := users.next()
		stalled := mustLock(t, h.Stalled, u)
		requireDeadlineAhead(t, stalled)
		h.WaitLease()
		requireLost(t, stalled)
		if d := stalled.Deadline(); time.Now().Before(d) {
			t.Errorf("Deadline %v of a lost lease is still ahead", d)
		}
		if err := stalled.Release(t.Context()); !errors.Is(err, billing.ErrLeaseLost) {
			t.Errorf("Release of the expired lease = %v, want ErrLeaseLost", err)
		}
		mustRelease(t, mustLock(t, h.Locker, u))
	})

	t.Run("StalledLeaseIsTakenOverByFreshLocker", func(t *testing.T) {
		h := setup(t)
		if h.Fresh == nil {
			t.Skip("billingtest.TestLocker: the harness has no Fresh")
		}
		u := users.next()
		stalled := mustLock(t, h.Stalled, u)
		requireLocked(t, h.Fresh(t), u) // not yet expired
		h.WaitLease()
		taker := lockSoon(t, func() billing.Locker { return h.Fresh(t) }, u, "a fresh locker, after the stalled lease's duration passed")
		requireLost(t, stalled)
		if err := stalled.Release(t.Context()); !errors.Is(err, billing.ErrLeaseLost) {
			t.Errorf("Release of the lost lease = %v, want ErrLeaseLost", err)
		}
		requireLocked(t, h.Fresh(t), u)
		mustRelease(t, taker)
	})

	t.Run("FailedReleaseRunsOut", func(t *testing.T) {
		h := setup(t)
		u := users.next()
		held := mustLock(t, h.Locker, u)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := held.Release(ctx); err == nil {
			t.Fatal("Release with a cancelled context succeeded")
		}
		h.WaitLease()
		requireLost(t, held)
		locker := func() billing.Locker { return h.Locker }
		if h.Fresh != nil {
			locker = func() billing.Locker { return h.Fresh(t) }
		}
		next := lockSoon(t, locker, u, "after a failed Release and the lease duration")
		if err := held.Release(t.Context()); !errors.Is(err, billing.ErrLeaseLost) {
			t.Errorf("retried Release of the lease that ran out = %v, want ErrLeaseLost", err)
		}
		requireNotLost(t, next)
		mustRelease(t, next)
	})

	t.Run("CanceledContext", func(t *testing.T) {
		h := setup(t)
		u := users.next()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		lease, err := h.Locker.Lock(ctx, u)
		if !errors.Is(err, context.Canceled) || errors.Is(err, billing.ErrAlreadyLocked) || lease != nil {
			t.Fatalf("Lock with a cancelled context = %v, %v; want nil and an error wrapping context.Canceled", lease, err)
		}
		held := mustLock(t, h.Locker, u) // the failed call left nothing behind
		if err := held.Release(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, billing.ErrLeaseLost) {
			t.Errorf("Release with a cancelled context = %v, want an error wrapping context.Canceled", err)
		}
		requireLocked(t, h.Locker, u) // still held after the failed Release
		mustRelease(t, held)          // and Release can be retried
		mustRelease(t, mustLock(t, h.Locker, u))
	})
}

// raceFor has lockContenders goroutines call Lock for u at once and checks
// that exactly one wins and every other one gets ErrAlreadyLocked naming u.
// It returns the winner's lease, or nil after failing the test.
func raceFor(t *testing.T, l billing.Locker, u, what string) billing.Lease {
	t.Helper()
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		leases = make([]billing.Lease, lockContenders)
		errs   = make([]error, lockContenders)
	)
	for i := range lockContenders {
		wg.Go(func() {
			<-start
			leases[i], errs[i] = l.Lock(t.Context(), u)
		})
	}
	close(start)
	wg.Wait()
	var winners []billing.Lease
	losers := 0
	for i, err := range errs {
		switch {
		case err == nil && leases[i] != nil:
			winners = append(winners, leases[i])
		case errors.Is(err, billing.ErrAlreadyLocked):
			losers++
			if !strings.Contains(err.Error(), u) {
				t.Errorf("%s: ErrAlreadyLocked does not name the user %q: %v", what, u, err)
			}
		default:
			t.Errorf("%s: contender %d: Lock = %v, %v; want a lease or ErrAlreadyLocked", what, i, leases[i], err)
		}
	}
	if len(winners) != 1 || losers != lockContenders-1 {
		t.Errorf("%s: %d winners and %d ErrAlreadyLocked of %d contenders, want exactly 1 and %d",
			what, len(winners), losers, lockContenders, lockContenders-1)
		for _, w := range winners {
			_ = w.Release(context.WithoutCancel(t.Context()))
		}
		return nil
	}
	return winners[0]
}

// lockSoon calls Lock of u on a locker from newLocker until it succeeds,
// failing the test on an error other than ErrAlreadyLocked or when lostWait
// passes first. what says when, for messages.
func lockSoon(t *testing.T, newLocker func() billing.Locker, u, what string) billing.Lease {
	t.Helper()
	for end := time.Now().Add(lostWait); ; {
		lease, err := newLocker().Lock(t.Context(), u)
		switch {
		case err == nil:
			return lease
		case !errors.Is(err, billing.ErrAlreadyLocked):
			t.Fatalf("Lock(%q) by %s: %v", u, what, err)
		case time.Now().After(end):
			t.Fatalf("Lock(%q) by %s: still %v after %v", u, what, err, lostWait)
		}
		time.Sleep(lostWait / 200)
	}
}

func mustLock(t *testing.T, l billing.Locker, u string) billing.Lease {
	t.Helper()
	lease, err := l.Lock(t.Context(), u)
	if err != nil {
		t.Fatalf("Lock(%q): %v", u, err)
	}
	return lease
}

func mustRelease(t *testing.T, lease billing.Lease) {
	t.Helper()
	if err := lease.Release(t.Context()); err != nil {
		t.Fatalf("Release of %q: %v", lease.UserID(), err)
	}
}

// requireLocked checks that l cannot lock u because someone holds it.
func requireLocked(t *testing.T, l billing.Locker, u string) {
	t.Helper()
	lease, err := l.Lock(t.Context(), u)
	if err == nil {
		_ = lease.Release(t.Context())
		t.Fatalf("Lock(%q) succeeded while another lease holds it", u)
	}
	if !errors.Is(err, billing.ErrAlreadyLocked) {
		t.Fatalf("Lock(%q) while held = %v, want ErrAlreadyLocked", u, err)
	}
}

func requireNotLost(t *testing.T, lease billing.Lease) {
	t.Helper()
	select {
	case <-lease.Lost():
		t.Fatalf("lease of %q reports Lost, want held", lease.UserID())
	default:
	}
}

func requireDeadlineAhead(t *testing.T, lease billing.Lease) {
	t.Helper()
	if d := lease.Deadline(); !d.After(time.Now()) {
		t.Fatalf("Deadline %v of the held lease of %q has passed", d, lease.UserID())
	}
}

func requireLost(t *testing.T, lease billing.Lease) {
	t.Helper()
	select {
	case <-lease.Lost():
	case <-time.After(lostWait):
		t.Fatalf("Lost of %q not closed %v after its lease duration passed", lease.UserID(), lostWait)
	}
}

// userSource hands out user IDs unique to one TestLocker run, so that the
// suite also works on a store shared with other tests.
type userSource struct {
	tag string
	seq atomic.Int64
}

func newUserSource() *userSource {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &userSource{tag: hex.EncodeToString(b)}
}

func (s *userSource) next() string { return fmt.Sprintf("user-%s-%d", s.tag, s.seq.Add(1)) }
