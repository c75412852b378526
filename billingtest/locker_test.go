package billingtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const memLease = time.Minute

func TestLockerSuite(t *testing.T) {
	billingtest.TestLocker(t, func(t *testing.T) billingtest.LockerHarness {
		clock := billingtest.NewClock(time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC))
		l := billingtest.NewLocker(clock, memLease)
		return billingtest.LockerHarness{
			Locker:    l,
			Stalled:   stallingLocker{l},
			Fresh:     func(*testing.T) billing.Locker { return l }, // the store is the Locker
			WaitLease: func() { clock.Advance(memLease) },
		}
	})
}

// stallingLocker locks through an in-memory Locker and stops each lease's
// heartbeat at once.
type stallingLocker struct{ l *billingtest.Locker }

func (s stallingLocker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	lease, err := s.l.Lock(ctx, userID)
	if err == nil {
		s.l.StopHeartbeat(lease)
	}
	return lease, err
}

func TestLockerStopHeartbeat(t *testing.T) {
	clock := billingtest.NewClock(time.Time{})
	l := billingtest.NewLocker(clock, memLease)
	lease, err := l.Lock(t.Context(), "u1")
	require.NoError(t, err)
	clock.Advance(10 * memLease) // heartbeating: never expires
	require.True(t, l.Locked("u1"), "a heartbeating lease expired")
	d := time.Until(lease.Deadline())
	assert.True(t, d > memLease-time.Second && d <= memLease, "Deadline of a heartbeating lease is %v from now, want one lease duration (%v)", d, memLease)
	l.StopHeartbeat(lease)
	clock.Advance(memLease / 2)
	d = time.Until(lease.Deadline())
	assert.True(t, d > memLease/2-time.Second && d <= memLease/2, "Deadline of a stopped lease half expired on the clock is %v from now, want %v", d, memLease/2)
	clock.Advance(memLease/2 - time.Nanosecond)
	require.True(t, l.Locked("u1"), "a stopped lease expired before its lease duration")
	select {
	case <-lease.Lost():
		t.Fatal("Lost closed before the lease duration passed")
	case <-time.After(20 * time.Millisecond):
	}
	clock.Advance(time.Nanosecond)
	select {
	case <-lease.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost not closed after the lease duration passed on the clock")
	}
	assert.False(t, l.Locked("u1"), "Locked reports an expired lease")
	assert.False(t, time.Now().Before(lease.Deadline()), "Deadline %v of a lost lease is ahead", lease.Deadline())
	assert.ErrorIs(t, lease.Release(t.Context()), billing.ErrLeaseLost, "Release")
}

func TestLockerStopHeartbeatForeignLease(t *testing.T) {
	a, b := billingtest.NewLocker(nil, 0), billingtest.NewLocker(nil, 0)
	lease, err := a.Lock(t.Context(), "u1")
	require.NoError(t, err)
	defer func() {
		if recover() == nil {
			t.Error("StopHeartbeat of another Locker's lease did not panic")
		}
	}()
	b.StopHeartbeat(lease)
}
