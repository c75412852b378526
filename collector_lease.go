package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
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
	// Not cancelled with the work (a cancelled request still gives its lock
	// back), but bounded: a store that does not answer cannot hold the
	// caller for ever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
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

// releaseTries bounds the tries of a failed release, and releaseTimeout
// the time all of them take.
const (
	releaseTries   = 3
	releaseTimeout = 10 * time.Second
)

// PanicError reports a panic during a collection or a change: of the
// host's code (a payment provider, an event sink, a store) or of the
// library's. The collector does not let it unwind past the user's lock:
// it releases the lock, turns the panic into this error for the record at
// hand (a run goes on with the other records) and logs it with its stack.
// A payment attempt made durable before the panic stays in flight and is
// resolved by the next collection of the record, as after a crash.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string {
	return fmt.Sprintf("billing: panic during a collection: %v", e.Value)
}

// Unwrap returns Value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// recoverPanic, deferred, turns a panic into a [*PanicError] in *err.
func recoverPanic(ctx context.Context, log *slog.Logger, userID string, err *error) {
	v := recover()
	if v == nil {
		return
	}
	pe := &PanicError{Value: v, Stack: debug.Stack()}
	log.ErrorContext(ctx, "billing: panic during a collection", "user_id", userID, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
	*err = errors.Join(*err, pe)
}
