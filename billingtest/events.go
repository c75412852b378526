package billingtest

import (
	"context"
	"slices"
	"sync"

	"github.com/dynabill/billing"
)

// EventRecorder is a [billing.EventSink] that keeps the events it accepts,
// in order. It can be told to fail ([EventRecorder.FailWith]) to check that
// the code under test treats events as best effort. The zero value accepts
// every event. Safe for concurrent use.
type EventRecorder struct {
	mu       sync.Mutex
	err      error
	emits    int
	events   []billing.Event
	rejected []billing.Event
}

var _ billing.EventSink = (*EventRecorder)(nil)

// Emit implements [billing.EventSink]. With a done context it returns the
// context's error; with a failure set by FailWith it returns that error.
// Either way the event is kept by Rejected, not Events.
func (r *EventRecorder) Emit(ctx context.Context, e billing.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emits++
	err := ctx.Err()
	if err == nil {
		err = r.err
	}
	if err != nil {
		r.rejected = append(r.rejected, e)
		return err
	}
	r.events = append(r.events, e)
	return nil
}

// FailWith makes every later Emit return err; nil makes Emit accept events
// again.
func (r *EventRecorder) FailWith(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// Events returns the accepted events, in order.
func (r *EventRecorder) Events() []billing.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// OfType returns the accepted events of type t, in order.
func (r *EventRecorder) OfType(t billing.EventType) []billing.Event {
	return r.filter(func(e *billing.Event) bool { return e.Type == t })
}

// ForSubscription returns the accepted events of subscriptionID, in order.
func (r *EventRecorder) ForSubscription(subscriptionID string) []billing.Event {
	return r.filter(func(e *billing.Event) bool { return e.SubscriptionID == subscriptionID })
}

// Count returns the number of accepted events of type t.
func (r *EventRecorder) Count(t billing.EventType) int { return len(r.OfType(t)) }

// Rejected returns the events Emit refused with an error, in order.
func (r *EventRecorder) Rejected() []billing.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rejected)
}

// Emits returns the number of Emit calls, rejected ones included.
func (r *EventRecorder) Emits() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.emits
}

// Reset returns the recorder to its zero state: no events, no calls, no
// failure.
func (r *EventRecorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err, r.emits, r.events, r.rejected = nil, 0, nil, nil
}

func (r *EventRecorder) filter(keep func(*billing.Event) bool) []billing.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []billing.Event
	for i := range r.events {
		if keep(&r.events[i]) {
			out = append(out, r.events[i])
		}
	}
	return out
}
