package billing

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeLease is a lease of one user, for a context that holds it.
type fakeLease struct {
	Lease
	user string
}

func (l fakeLease) UserID() string { return l.user }

// TestEmitHidesHeldLockAndRequest: a sink that calls the collector back
// sees neither the user's lock a change holds nor that change's request.
func TestEmitHidesHeldLockAndRequest(t *testing.T) {
	var seen []any
	c := &Collector{cfg: Config{Events: eventSinkFunc(func(ctx context.Context, e Event) error {
		seen = append(seen, ctx.Value(heldLockKey{}), ctx.Value(requestKey{}), e.UserID)
		return nil
	})}}
	ctx := context.WithValue(context.Background(), heldLockKey{}, Lease(fakeLease{user: "u1"}))
	ctx = context.WithValue(ctx, requestKey{}, "req-1")
	require.Equal(t, "req-1", ctx.Value(requestKey{}))
	require.NotNil(t, ctx.Value(heldLockKey{}))

	c.emit(ctx, Event{Type: EventPaymentSucceeded, UserID: "u1"})
	c.emit(context.Background(), Event{Type: EventPaymentSucceeded, UserID: "u2"})
	assert.Equal(t, []any{nil, nil, "u1", nil, nil, "u2"}, seen)
}

// TestEmitWithoutHeldLockAllocatesNothing: a run's context holds neither
// a lock nor a request, so an event costs no context of its own.
func TestEmitWithoutHeldLockAllocatesNothing(t *testing.T) {
	c := &Collector{cfg: Config{Events: eventSinkFunc(func(context.Context, Event) error { return nil })}}
	ctx := withLease(context.Background(), fakeLease{user: "u1"})
	e := Event{Type: EventPaymentSucceeded, UserID: "u1"}
	allocs := testing.AllocsPerRun(100, func() { c.emit(ctx, e) })
	assert.Zero(t, allocs)
}
