package billing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ProcessorBudget paces a Collector's calls to the payment processor
// (Collect and LookupPayment), which is the real ceiling of a billing
// run: processors cap requests per second per account (Stripe allows 100
// operations a second in live mode, 25 a second per endpoint by default)
// and answer requests over the cap with a rate-limit error.
//
// The budget belongs to one Collector: every run, shard and single
// collection of that Collector draws on it, so the shards a process runs
// in parallel share it. A run fanned out over many Lambdas or servers
// makes up to their number times the budget's calls: either give each
// process its share of the processor's limit (the limit divided by the
// processes that run at once; a share is lost while its process is done,
// backing off or dead), or let them all draw on one budget, Shared.
//
// The zero ProcessorBudget sets no cap; a rate-limited answer is still
// honoured (see [ErrRateLimited]).
type ProcessorBudget struct {
	// RequestsPerSecond caps how many processor calls start per second,
	// spaced evenly. 0 means no cap.
	RequestsPerSecond float64
	// Concurrency caps the processor calls in progress at once. 0 means no
	// cap beyond [Config.Concurrency].
	Concurrency int
	// RateLimitRetries is how many more times the collector tries a record
	// the processor refused for its rate limit in the same collection,
	// after backing off. Past that the record is left as it was, for a
	// later run. Defaults to 3; negative means no retry in the same
	// collection.
	RateLimitRetries int
	// Backoff is how long every call waits after a rate-limited answer
	// that does not say how long to wait ([RateLimitedError.RetryAfter]);
	// it doubles with each rate-limited answer in a row, up to MaxBackoff.
	// Defaults to one second.
	Backoff time.Duration
	// MaxBackoff caps Backoff and RetryAfter. Defaults to 30 seconds.
	MaxBackoff time.Duration
	// Shared, when set, is a budget the processes of a fleet draw from
	// together (see [ProcessorTokens]): every call also waits for one of
	// its tokens and is sent only inside the token's one-second window,
	// and a rate-limited answer slows the whole fleet. Its clock must be
	// the machine's (the processor counts real seconds), not the
	// Collector's Clock. nil means the budget is this process's only.
	Shared ProcessorTokens
	// SharedBatch is how many tokens one Take of Shared asks for.
	// Defaults to 10.
	SharedBatch int
}

func (b ProcessorBudget) withDefaults() (ProcessorBudget, error) {
	switch {
	case b.RequestsPerSecond < 0:
		return b, fmt.Errorf("billing: Config.ProcessorBudget.RequestsPerSecond: negative %v", b.RequestsPerSecond)
	case b.Concurrency < 0:
		return b, fmt.Errorf("billing: Config.ProcessorBudget.Concurrency: negative %d", b.Concurrency)
	case b.Backoff < 0 || b.MaxBackoff < 0:
		return b, fmt.Errorf("billing: Config.ProcessorBudget: negative backoff %v / %v", b.Backoff, b.MaxBackoff)
	}
	if b.SharedBatch <= 0 {
		b.SharedBatch = 10
	}
	if b.RateLimitRetries == 0 {
		b.RateLimitRetries = 3
	}
	if b.Backoff == 0 {
		b.Backoff = time.Second
	}
	if b.MaxBackoff == 0 {
		b.MaxBackoff = 30 * time.Second
	}
	return b, nil
}

// StoreBudget paces the collector's work to the store's write capacity:
// a run of many shards at once can otherwise outrun a table's or an
// index partition's throughput. The zero value sets no cap and backs off
// after throttling with the defaults.
type StoreBudget struct {
	// WriteUnitsPerSecond caps the write capacity the Collector's runs
	// spend per second, across all their shards: records are handled at
	// most WriteUnitsPerSecond / WriteUnitsPerCollection a second,
	// spaced evenly. 0 means no cap.
	WriteUnitsPerSecond float64
	// WriteUnitsPerCollection is what handling one record is taken to
	// cost, lock included. Defaults to 11 (measured on the legacy tables:
	// 9 for the record, its history row and the next period, 2 for the
	// lock).
	WriteUnitsPerCollection float64
	// Backoff is how long every record waits after a store call was
	// throttled ([ErrThrottled]); it doubles with each throttled record in
	// a row, up to MaxBackoff. Defaults to one second; MaxBackoff to 30
	// seconds.
	Backoff, MaxBackoff time.Duration
}

func (b StoreBudget) withDefaults() (StoreBudget, error) {
	if b.WriteUnitsPerSecond < 0 || b.WriteUnitsPerCollection < 0 {
		return b, fmt.Errorf("billing: Config.StoreBudget: negative write units %v / %v", b.WriteUnitsPerSecond, b.WriteUnitsPerCollection)
	}
	if b.WriteUnitsPerCollection == 0 {
		b.WriteUnitsPerCollection = 11
	}
	// The backoff is the processor budget's, with its defaults.
	p, err := ProcessorBudget{Backoff: b.Backoff, MaxBackoff: b.MaxBackoff}.withDefaults()
	if err != nil {
		return b, fmt.Errorf("billing: Config.StoreBudget: negative backoff %v / %v", b.Backoff, b.MaxBackoff)
	}
	b.Backoff, b.MaxBackoff = p.Backoff, p.MaxBackoff
	return b, nil
}

// pacer returns the pacer that spends b: one start per handled record.
func (b StoreBudget) pacer() *pacer {
	return newPacer(ProcessorBudget{RequestsPerSecond: b.WriteUnitsPerSecond / b.WriteUnitsPerCollection, Backoff: b.Backoff, MaxBackoff: b.MaxBackoff})
}

// pacer spends a ProcessorBudget (or a StoreBudget, as records a
// second). Its times are the machine's, not the Collector's Clock (which
// tells business time and may stand still in tests); now and sleep are
// fields so tests can drive it.
type pacer struct {
	interval    time.Duration // between call starts; 0: no rate cap
	slots       chan struct{} // calls in progress; nil: no cap
	backoff     time.Duration
	maxBackoff  time.Duration
	now         func() time.Time
	sleep       func(context.Context, time.Duration) error
	mu          sync.Mutex
	next        time.Time // earliest start of the next call
	pausedUntil time.Time // no call starts before (rate-limited)
	streak      int       // rate-limited answers in a row
	shared      *sharedTurns
}

func newPacer(b ProcessorBudget) *pacer {
	p := &pacer{backoff: b.Backoff, maxBackoff: b.MaxBackoff, now: time.Now, sleep: sleepCtx}
	if b.RequestsPerSecond > 0 {
		p.interval = time.Duration(float64(time.Second) / b.RequestsPerSecond)
	}
	if b.Concurrency > 0 {
		p.slots = make(chan struct{}, b.Concurrency)
	}
	if b.Shared != nil {
		p.shared = &sharedTurns{tokens: b.Shared, batch: max(1, b.SharedBatch)}
	}
	return p
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// acquire waits for the budget to allow a processor call and returns the
// function that ends it.
func (p *pacer) acquire(ctx context.Context) (done func(), err error) {
	done, _, err = p.acquireCall(ctx)
	return done, err
}

// acquireLocal waits for this process's own budget.
func (p *pacer) acquireLocal(ctx context.Context) (done func(), err error) {
	done = func() {}
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
			done = func() { <-p.slots }
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	now := p.now()
	start := now
	if p.next.After(start) {
		start = p.next
	}
	if p.pausedUntil.After(start) {
		start = p.pausedUntil
	}
	if p.interval > 0 {
		p.next = start.Add(p.interval)
	}
	p.mu.Unlock()
	if wait := start.Sub(now); wait > 0 {
		if err := p.sleep(ctx, wait); err != nil {
			done()
			return nil, err
		}
	}
	return done, nil
}

// limited pauses every call after a rate-limited answer: for retryAfter
// when the processor said, else for the backoff doubled per answer in a
// row; both capped at maxBackoff. It returns the pause.
func (p *pacer) limited(retryAfter time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.streak++
	d := retryAfter
	if d <= 0 {
		d = p.backoff
		for i := 1; i < p.streak && d < p.maxBackoff; i++ {
			d *= 2
		}
	}
	d = min(d, p.maxBackoff)
	if until := p.now().Add(d); until.After(p.pausedUntil) {
		p.pausedUntil = until
	}
	return d
}

// answered ends a streak of rate-limited answers.
func (p *pacer) answered() {
	p.mu.Lock()
	p.streak = 0
	p.mu.Unlock()
}

// storeTurn waits until the store budget allows handling one more record.
func (c *Collector) storeTurn(ctx context.Context) error {
	done, err := c.store.acquire(ctx)
	if err != nil {
		return err
	}
	done()
	return nil
}

// storeAnswered pauses every run after a record whose handling was
// throttled, and ends the pause streak after one that was not.
func (c *Collector) storeAnswered(err error) {
	if errors.Is(err, ErrThrottled) {
		c.store.limited(0)
		return
	}
	c.store.answered()
}
