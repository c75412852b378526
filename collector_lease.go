package billing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// leaseKey carries the lease a collection runs under in its context.
type leaseKey struct{}

func withLease(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// checkLease fails when the lease the collection runs under is lost or
// past its local deadline. It reads nothing: the lease's own signal and
// its local expiry are enough to stop before a charge or a write; the
// conditional writes remain the fence for a holder that paused after it.
func checkLease(ctx context.Context) error {
	l, _ := ctx.Value(leaseKey{}).(Lease)
	if l == nil {
		return nil
	}
	select {
	case <-l.Lost():
		return fmt.Errorf("billing: lock of %s: %w", l.UserID(), ErrLeaseLost)
	default:
	}
	if dl := l.Deadline(); !dl.IsZero() && time.Now().After(dl) {
		return fmt.Errorf("billing: lock of %s: past its local deadline %v: %w", l.UserID(), dl.Format(time.RFC3339Nano), ErrLeaseLost)
	}
	return nil
}

// release gives a lease back, retrying a failed release a few times. A
// lease lost meanwhile is not an error of the caller's (its writes were
// fenced); any other failure is returned: the lock then expires by itself,
// within two lease durations, since nothing renews it any more.
func (c *Collector) release(ctx context.Context, l Lease) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	for i := range releaseTries {
		if err = l.Release(ctx); err == nil {
			return nil
		}
		if errors.Is(err, ErrLeaseLost) {
			c.cfg.Logger.WarnContext(ctx, "billing: lease lost before release", "user_id", l.UserID(), "error", err)
			return nil
		}
		time.Sleep(time.Duration(i+1) * 20 * time.Millisecond)
	}
	c.cfg.Logger.ErrorContext(ctx, "billing: releasing lock failed", "user_id", l.UserID(), "error", err)
	return fmt.Errorf("billing: release lock of %s: %w", l.UserID(), err)
}

// releaseTries bounds the tries of a failed release.
const releaseTries = 3
