package billing

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePacer is a pacer on a fake machine clock: sleeping advances it and
// records the wait.
func fakePacer(t *testing.T, b ProcessorBudget) (*pacer, *[]time.Duration) {
	t.Helper()
	b, err := b.withDefaults()
	require.NoError(t, err)
	p := newPacer(b)
	var mu sync.Mutex
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	p.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p.sleep = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		now = now.Add(d)
		return nil
	}
	return p, &waits
}

func TestPacerSpacesCallsEvenly(t *testing.T) {
	p, waits := fakePacer(t, ProcessorBudget{RequestsPerSecond: 4})
	for range 5 {
		done, err := p.acquire(context.Background())
		require.NoError(t, err)
		done()
	}
	// The first call starts at once; each later one a quarter second
	// after the one before.
	assert.Equal(t, []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond}, *waits)
}

func TestPacerBacksOffOnRateLimit(t *testing.T) {
	p, waits := fakePacer(t, ProcessorBudget{Backoff: time.Second, MaxBackoff: 5 * time.Second})
	// Unsaid waits double per refusal in a row, capped; a said one is
	// honoured (capped too); an answer ends the streak.
	assert.Equal(t, time.Second, p.limited(0))
	assert.Equal(t, 2*time.Second, p.limited(0))
	assert.Equal(t, 4*time.Second, p.limited(0))
	assert.Equal(t, 5*time.Second, p.limited(0))
	assert.Equal(t, 3*time.Second, p.limited(3*time.Second))
	assert.Equal(t, 5*time.Second, p.limited(time.Hour))
	p.answered()
	assert.Equal(t, time.Second, p.limited(0))

	// Every call waits out the longest pause asked for.
	done, err := p.acquire(context.Background())
	require.NoError(t, err)
	done()
	assert.Equal(t, []time.Duration{5 * time.Second}, *waits)
}

func TestPacerBoundsCallsInProgress(t *testing.T) {
	p, _ := fakePacer(t, ProcessorBudget{Concurrency: 2})
	d1, err := p.acquire(context.Background())
	require.NoError(t, err)
	d2, err := p.acquire(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.acquire(ctx)
	require.ErrorIs(t, err, context.Canceled, "a third call waits for a slot")
	d1()
	d3, err := p.acquire(context.Background())
	require.NoError(t, err)
	d2()
	d3()
}

func TestRateLimitedErrorMatches(t *testing.T) {
	err := error(&RateLimitedError{RetryAfter: 2 * time.Second})
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.Equal(t, 2*time.Second, retryAfter(err))
	assert.Zero(t, retryAfter(ErrRateLimited))
	assert.Contains(t, err.Error(), "retry after 2s")
}

func TestStoreBudgetPacesRecordsAndBacksOffOnThrottling(t *testing.T) {
	b, err := StoreBudget{WriteUnitsPerSecond: 44}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 11.0, b.WriteUnitsPerCollection, "default cost of a record")
	p, waits := fakePacer(t, ProcessorBudget{RequestsPerSecond: b.WriteUnitsPerSecond / b.WriteUnitsPerCollection, Backoff: b.Backoff, MaxBackoff: b.MaxBackoff})
	c := &Collector{store: p}
	for range 3 {
		require.NoError(t, c.storeTurn(context.Background()))
	}
	// 44 write units a second at 11 a record: a record every 250 ms.
	assert.Equal(t, []time.Duration{250 * time.Millisecond, 250 * time.Millisecond}, *waits)

	// A throttled record pauses every later one for the backoff, doubled
	// while throttling goes on; a record that was not ends the streak.
	*waits = nil
	c.storeAnswered(fmt.Errorf("get: %w", ErrThrottled))
	require.NoError(t, c.storeTurn(context.Background()))
	c.storeAnswered(fmt.Errorf("update: %w", ErrThrottled))
	require.NoError(t, c.storeTurn(context.Background()))
	c.storeAnswered(nil)
	c.storeAnswered(fmt.Errorf("put: %w", ErrThrottled))
	require.NoError(t, c.storeTurn(context.Background()))
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, time.Second}, *waits)

	for _, bad := range []StoreBudget{{WriteUnitsPerSecond: -1}, {WriteUnitsPerCollection: -1}, {Backoff: -1}} {
		_, err := bad.withDefaults()
		assert.Error(t, err, "%+v", bad)
	}
}
