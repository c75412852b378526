package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testLease = time.Minute

func TestLockerConformance(t *testing.T) {
	billingtest.TestLocker(t, func(t *testing.T) billingtest.LockerHarness {
		clock := billingtest.NewClock(time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC))
		l := memory.NewLocker(memory.LockerOptions{Clock: clock, LeaseDuration: testLease})
		return billingtest.LockerHarness{
			Locker:  l,
			Stalled: stalling{l},
			// Every holder in the process shares the Locker's state.
			Fresh:     func(*testing.T) billing.Locker { return l },
			WaitLease: func() { clock.Advance(testLease) },
		}
	})
}

// stalling takes locks through l and stops renewing each lease at once.
type stalling struct{ l *memory.Locker }

func (s stalling) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	lease, err := s.l.Lock(ctx, userID)
	if err == nil {
		s.l.StopHeartbeat(lease)
	}
	return lease, err
}

// TestLockerDefaults: the zero options run on the system clock with the
// DynamoDB locker's lease, and a held lease outlives any clock jump.
func TestLockerDefaults(t *testing.T) {
	l := memory.NewLocker(memory.LockerOptions{})
	lease, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	ahead := time.Until(lease.Deadline())
	assert.InDelta(t, dynamostore.DefaultLeaseDuration.Seconds(), ahead.Seconds(), 1, "Deadline of a held lease")
	_, err = l.Lock(t.Context(), "u1")
	assert.ErrorIs(t, err, billing.ErrAlreadyLocked)
	assert.True(t, l.Locked("u1"))
	require.NoError(t, lease.Release(t.Context()))
	assert.False(t, l.Locked("u1"))

	clock := billingtest.NewClock(time.Time{})
	l = memory.NewLocker(memory.LockerOptions{Clock: clock, LeaseDuration: testLease})
	lease, err = l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	clock.Advance(100 * testLease)
	assert.True(t, l.Locked("u1"), "a held lease ran out")
	select {
	case <-lease.Lost():
		t.Fatal("a held lease was lost")
	case <-time.After(10 * time.Millisecond):
	}
	require.NoError(t, lease.Release(t.Context()))
}

// TestLockerFailedRelease: a Release with a done context releases nothing
// but ends the renewal, so the lease runs out on the clock.
func TestLockerFailedRelease(t *testing.T) {
	clock := billingtest.NewClock(time.Time{})
	l := memory.NewLocker(memory.LockerOptions{Clock: clock, LeaseDuration: testLease})
	lease, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, lease.Release(done), context.Canceled)
	assert.True(t, l.Locked("u1"), "a failed Release freed the user")
	clock.Advance(testLease)
	select {
	case <-lease.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost not closed after the lease ran out")
	}
	next, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	require.NoError(t, next.Release(t.Context()))
	if err := lease.Release(t.Context()); !errors.Is(err, billing.ErrLeaseLost) {
		t.Errorf("Release of the lost lease = %v, want ErrLeaseLost", err)
	}
}

func TestLockerStopHeartbeatForeignLease(t *testing.T) {
	a, b := memory.NewLocker(memory.LockerOptions{}), memory.NewLocker(memory.LockerOptions{})
	lease, err := a.Lock(t.Context(), "u1")
	require.NoError(t, err)
	assert.Panics(t, func() { b.StopHeartbeat(lease) })
	require.NoError(t, lease.Release(t.Context()))
}
