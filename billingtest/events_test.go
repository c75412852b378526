package billingtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testEvent(typ billing.EventType, sub string) billing.Event {
	return billing.Event{Type: typ, UserID: "u1", SubscriptionID: sub, Amount: billing.Cents(499)}
}

func TestEventRecorderQueries(t *testing.T) {
	var r billingtest.EventRecorder
	in := []billing.Event{
		testEvent(billing.EventPaymentPending, "s1"),
		testEvent(billing.EventPaymentDeclined, "s2"),
		testEvent(billing.EventPaymentSucceeded, "s1"),
		testEvent(billing.EventPaymentDeclined, "s3"),
	}
	for _, e := range in {
		require.NoError(t, r.Emit(t.Context(), e))
	}
	subs := func(es []billing.Event) string {
		s := ""
		for _, e := range es {
			s += fmt.Sprintf("%s/%s ", e.Type, e.SubscriptionID)
		}
		return s
	}
	tests := []struct {
		name string
		got  []billing.Event
		want []billing.Event
	}{
		{"Events", r.Events(), in},
		{"OfType declined", r.OfType(billing.EventPaymentDeclined), []billing.Event{in[1], in[3]}},
		{"OfType stale", r.OfType(billing.EventStale), nil},
		{"ForSubscription s1", r.ForSubscription("s1"), []billing.Event{in[0], in[2]}},
	}
	for _, tt := range tests {
		assert.Equal(t, subs(tt.want), subs(tt.got), "%s = %s, want %s", tt.name, subs(tt.got), subs(tt.want))
	}
	for typ, want := range map[billing.EventType]int{billing.EventPaymentDeclined: 2, billing.EventPaymentPending: 1, billing.EventUnrecorded: 0} {
		assert.Equal(t, want, r.Count(typ), "Count(%s)", typ)
	}
	// Returned slices are copies.
	r.Events()[0].Type = billing.EventStale
	assert.Equal(t, 0, r.Count(billing.EventStale), "Events exposed the recorder's slice")
}

func TestEventRecorderFailures(t *testing.T) {
	var r billingtest.EventRecorder
	boom := errors.New("sink down")
	r.FailWith(boom)
	require.ErrorIs(t, r.Emit(t.Context(), testEvent(billing.EventPaymentSucceeded, "s1")), boom, "Emit")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r.FailWith(nil)
	require.ErrorIs(t, r.Emit(ctx, testEvent(billing.EventPaymentSucceeded, "s2")), context.Canceled, "Emit with done context =")
	require.NoError(t, r.Emit(t.Context(), testEvent(billing.EventPaymentSucceeded, "s3")), "Emit after FailWith(nil) =")
	require.Equal(t, 3, r.Emits(), "Emits")
	require.Len(t, r.Rejected(), 2, "Rejected")
	require.Len(t, r.Events(), 1, "Events")
	assert.Equal(t, "s3", r.Events()[0].SubscriptionID, "kept %+v", r.Events()[0])

	r.FailWith(boom)
	r.Reset()
	require.Zero(t, r.Emits(), "Reset left state: %d emits, %v, %v", r.Emits(), r.Events(), r.Rejected())
	require.Empty(t, r.Events(), "Reset left state: %d emits, %v, %v", r.Emits(), r.Events(), r.Rejected())
	require.Empty(t, r.Rejected(), "Reset left state: %d emits, %v, %v", r.Emits(), r.Events(), r.Rejected())
	require.NoError(t, r.Emit(t.Context(), testEvent(billing.EventStale, "s4")), "Reset kept the failure")
}

func TestEventRecorderConcurrent(t *testing.T) {
	var r billingtest.EventRecorder
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			typ := billing.EventPaymentSucceeded
			if i%2 == 1 {
				typ = billing.EventPaymentDeclined
			}
			assert.NoError(t, r.Emit(t.Context(), testEvent(typ, fmt.Sprint("s", i))))
			_ = r.Count(typ)
		})
	}
	wg.Wait()
	require.Equal(t, n/2, r.Count(billing.EventPaymentSucceeded), "succeeded count")
	require.Equal(t, n/2, r.Count(billing.EventPaymentDeclined), "declined count")
	require.Equal(t, n, r.Emits(), "emits")
}
