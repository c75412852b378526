package billingtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dynabill/billing"
)

// TestClock is a [billing.Clock] that a test moves through simulated days,
// months or years, running the host's jobs once on each day it passes
// (a plain [Clock] only moves): the
// collector's runs (see [TestClock.RunCollector]) and anything else
// registered with [TestClock.Daily] (a notifier scheduler, a settlement
// feed). A test then reads "advance 13 months; 13 collected, 1 retried".
//
// It keeps no state outside the test: any interval may be advanced, and
// many clocks may run in parallel. Jobs run on the calling goroutine, in the
// order they were registered, at the start time's time of day on each
// simulated day. Safe for concurrent use of Now while a job runs.
type TestClock struct {
	mu     sync.Mutex
	now    time.Time
	jobs   []clockJob
	totals map[billing.RunKind]*RunTotals
}

type clockJob struct {
	name string
	run  func(ctx context.Context, now time.Time) error
}

// RunTotals sums the reports of one kind of collector run made by a
// [TestClock].
type RunTotals struct {
	Runs        int
	Attempted   int
	Collected   int
	Pending     int
	Declined    int
	Unknown     int
	RateLimited int
	Stale       int
	Advanced    int
	// Failed counts records a run could not handle (Report.Failed).
	Failed int
}

// NewTestClock returns a clock at start (in UTC).
func NewTestClock(start time.Time) *TestClock {
	return &TestClock{now: start.UTC(), totals: map[billing.RunKind]*RunTotals{}}
}

// Now returns the simulated time.
func (c *TestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Daily registers a job run once on each simulated day the clock passes,
// after the jobs registered before it.
func (c *TestClock) Daily(name string, run func(ctx context.Context, now time.Time) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.jobs = append(c.jobs, clockJob{name, run})
}

// RunCollector registers col's daily runs: scheduled, then retry, then
// pause, each read to its last page. Their reports are summed in
// [TestClock.Totals]. col must read this clock (billing.Config.Clock):
// RunCollector panics otherwise, since a collector on wall time would mark
// the test's records stale or charge them at the wrong dates while this
// clock moves.
func (c *TestClock) RunCollector(col *billing.Collector) {
	if col.Clock() != billing.Clock(c) {
		panic(fmt.Sprintf("billingtest: TestClock.RunCollector: the collector reads another clock (%T); build it with Config.Clock set to this TestClock", col.Clock()))
	}
	for _, kind := range []billing.RunKind{billing.RunScheduled, billing.RunRetry, billing.RunPause} {
		c.Daily("collector "+string(kind), func(ctx context.Context, _ time.Time) error {
			req := billing.RunRequest{Kind: kind}
			for {
				rep, err := col.Run(ctx, req)
				if rep != nil {
					c.add(kind, rep)
				}
				if err != nil {
					return err
				}
				if rep.Next == "" {
					return nil
				}
				req.Cursor = rep.Next
			}
		})
	}
}

func (c *TestClock) add(kind billing.RunKind, r *billing.Report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.totals[kind]
	if t == nil {
		t = &RunTotals{}
		c.totals[kind] = t
	}
	t.Runs++
	t.Attempted += r.Attempted
	t.Collected += r.Collected
	t.Pending += r.Pending
	t.Declined += r.Declined
	t.Unknown += r.Unknown
	t.RateLimited += r.RateLimited
	t.Stale += r.Stale
	t.Advanced += r.Advanced
	t.Failed += len(r.Failed)
}

// Totals returns the summed reports of the collector runs of kind so far.
func (c *TestClock) Totals(kind billing.RunKind) RunTotals {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.totals[kind]; t != nil {
		return *t
	}
	return RunTotals{}
}

// AdvanceDays moves the clock n days forward, one day at a time, running
// the jobs on each. It stops at the first job that fails, with an error
// naming the day and the job; the clock stays on that day.
func (c *TestClock) AdvanceDays(ctx context.Context, n int) error {
	return c.AdvanceTo(ctx, c.Now().AddDate(0, 0, n))
}

// AdvanceMonths moves the clock n calendar months forward (as
// [time.Time.AddDate] counts them), day by day, running the jobs on each.
func (c *TestClock) AdvanceMonths(ctx context.Context, n int) error {
	return c.AdvanceTo(ctx, c.Now().AddDate(0, n, 0))
}

// AdvanceYears moves the clock n years forward, day by day, running the
// jobs on each.
func (c *TestClock) AdvanceYears(ctx context.Context, n int) error {
	return c.AdvanceTo(ctx, c.Now().AddDate(n, 0, 0))
}

// AdvanceTo moves the clock day by day up to t, running the jobs on each
// day, the last one at t itself. A t not after Now is an error.
func (c *TestClock) AdvanceTo(ctx context.Context, t time.Time) error {
	t = t.UTC()
	if !t.After(c.Now()) {
		return fmt.Errorf("billingtest: TestClock.AdvanceTo(%s): not after now (%s)", t.Format(time.RFC3339), c.Now().Format(time.RFC3339))
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.mu.Lock()
		next := c.now.AddDate(0, 0, 1)
		if next.After(t) {
			next = t
		}
		c.now = next
		jobs := append([]clockJob(nil), c.jobs...)
		c.mu.Unlock()
		for _, j := range jobs {
			if err := j.run(ctx, next); err != nil {
				return fmt.Errorf("billingtest: TestClock on %s, job %q: %w", next.Format(time.DateOnly), j.name, err)
			}
		}
		if !next.Before(t) {
			return nil
		}
	}
}
