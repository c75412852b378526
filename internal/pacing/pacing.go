// Package pacing models a fleet of K processes charging one day's due
// records at a processor that allows a fixed number of calls a second, and
// measures how well the fleet keeps the processor at that limit: its
// pacing efficiency, the charges made over the charges the limit allowed
// in the run's span.
//
// Two budgets are compared. The shared one is billing.ProcessorTokens as
// the collector uses it (here memory.Tokens): every process takes
// batches of tokens for one-second windows from one budget, and a
// rate-limited answer slows the whole fleet. The static one gives each
// process Limit/K calls a second, and a rate-limited answer pauses only
// the process that saw it.
//
// The fleet is the same in both models: shards skewed (every 8th shard
// has Skew, by default 3, times the records of the others), 1 process in
// 10 starting up to 10 minutes late, 1 in 20 dying once at a random
// instant of the day, losing the tokens it held, its shard taken over 5
// minutes later, 1 in 4 having ten minutes of answers five times slower,
// and 6 bursts of 20 seconds in which the processor allows 60 % of its
// limit. Those are the faults of the default day, 11h06m40s; a shorter
// day (Charges/Limit seconds) has their durations shrunk in proportion,
// none under a second. Declined charges are answers like any other: they
// count as charges made. BoundOf says what the fleet's shape (processes,
// workers, the processor's latency, the skew) allows at best.
//
// The one-second model (Run with Config.Calls false) steps through
// modelled seconds; a process makes at most Workers*25/8 calls a second
// (125 for 40), a fifth of that while slow. It runs 4,000,000 charges in well under a second. The call model
// (Config.Calls) follows every call in modelled time: each process runs
// Workers collections at once, each taking its token, recording the
// attempt (a store write of 5-25 ms) and only then calling the processor
// (150-450 ms, 50 ms for a 429), as Collector.charge does. It sees what
// the one-second model cannot: calls whose token's window closed while
// their attempt was being recorded. It takes a few seconds a run at
// 4,000,000 charges.
//
// Both models read no clock and draw every random choice from Seed: the
// same Config gives the same Result on any machine.
package pacing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Defaults of Config.
const (
	DefaultLimit   = 100
	DefaultCharges = 4_000_000
	DefaultWorkers = 40
	DefaultBatch   = 10
	DefaultSkew    = 3
)

// faultDay is the day the fleet's faults are sized for: the default
// 4,000,000 charges at 100 a second, 11h06m40s. A shorter day (fewer
// charges, or a higher limit) has them shrunk in proportion, so that it
// models the same day at another size rather than eleven hours of faults
// packed into minutes.
const faultDay = DefaultCharges / DefaultLimit // seconds

// MaxDay is the largest Charges/Limit, in seconds, a Config may ask for:
// the call model keeps a counter for every second of ten such days.
const MaxDay = 1_000_000

// ErrConfig reports a Config the models cannot run; the error names the
// field.
var ErrConfig = errors.New("pacing: invalid config")

// ErrStalled reports a fleet that did not charge every record within ten
// times the day the limit allows.
var ErrStalled = errors.New("pacing: the fleet does not finish")

// Config is one run of a model.
type Config struct {
	// Processes is the fleet's size, K: one shard of the day's records
	// each. At least 1.
	Processes int
	// Limit is the calls a second the processor allows. Defaults to 100.
	Limit int
	// Charges is the day's records, split over the shards. Defaults to
	// 4,000,000; at least Limit.
	Charges int
	// Static gives each process Limit/Processes calls a second instead of
	// the shared budget.
	Static bool
	// Seed draws the late starts, deaths, slow answers, 429 bursts and
	// (call model) latencies.
	Seed int64
	// Calls runs the call model instead of the one-second model.
	Calls bool
	// Workers is the collections a process makes at once (the
	// collector's Concurrency). In the one-second model a process makes
	// Workers*25/8 calls a second (125 for 40), a fifth of that while
	// slow. Defaults to 40, or to 2/5 of Limit when that is more: enough
	// for the last process running to keep the processor at its limit
	// alone (a call and its writes take about 345 ms).
	Workers int
	// Batch is the tokens a process takes from the shared budget at once
	// (the collector's SharedBatch). Defaults to 10.
	Batch int
	// Skew is how many times the records of the other shards every 8th
	// shard has. Defaults to 3; 1 is no skew.
	Skew int
	// SendLate sends, in the call model, a call whose token's window
	// closed while its attempt was being recorded. The collector never
	// does (it withdraws the attempt and tries again); this measures what
	// that check prevents.
	SendLate bool
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Limit == 0 {
		c.Limit = DefaultLimit
	}
	if c.Charges == 0 {
		c.Charges = DefaultCharges
	}
	if c.Workers == 0 {
		c.Workers = max(DefaultWorkers, c.Limit*2/5)
	}
	if c.Skew == 0 {
		c.Skew = DefaultSkew
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Processes < 1:
		return fmt.Errorf("%w: Processes %d: want at least 1", ErrConfig, c.Processes)
	case c.Limit < 1:
		return fmt.Errorf("%w: Limit %d: want at least 1", ErrConfig, c.Limit)
	case c.Charges < c.Limit:
		return fmt.Errorf("%w: Charges %d: want at least Limit, %d", ErrConfig, c.Charges, c.Limit)
	case c.Charges/c.Limit > MaxDay:
		return fmt.Errorf("%w: Charges %d at Limit %d: a day of more than %d s", ErrConfig, c.Charges, c.Limit, MaxDay)
	case c.Workers < 1:
		return fmt.Errorf("%w: Workers %d: want at least 1", ErrConfig, c.Workers)
	case c.Batch < 1:
		return fmt.Errorf("%w: Batch %d: want at least 1", ErrConfig, c.Batch)
	case c.Skew < 1 || c.Skew > 100:
		return fmt.Errorf("%w: Skew %d: want 1 to 100", ErrConfig, c.Skew)
	}
	return nil
}

// Result is what one run measured.
type Result struct {
	// Limit is the run's processor limit.
	Limit int
	// Charges is the charges made: every record, when the run succeeds.
	Charges int
	// Span is the run's duration in whole seconds: in the one-second
	// model from the start of the day to the end of the last second with
	// a call, in the call model from the first call to the last.
	Span time.Duration
	// Busiest is the most calls the processor received in one second,
	// rate-limited ones included.
	Busiest int
	// MissedWindows is, in the call model, the calls not sent because
	// their token's window closed while their attempt was being recorded
	// (0 with SendLate, and in the one-second model).
	MissedWindows int
	// RateLimited is the calls the processor answered with a 429.
	RateLimited int
	// Deaths is the processes that died holding their tokens.
	Deaths int
}

// faults is the fleet's fault schedule for c's day, in seconds: late
// starts up to late, a dead process's shard taken over takeover later,
// slow answers for slow, and 429 bursts of burst. For the default day
// (faultDay) and longer ones: 600, 300, 600 and 20; shorter days have
// them in proportion, none under a second.
type faults struct{ late, takeover, slow, burst int }

func (c Config) faults() faults {
	day := min(c.Charges/c.Limit, faultDay)
	scale := func(s int) int { return max(1, s*day/faultDay) }
	return faults{late: scale(600), takeover: scale(300), slow: scale(600), burst: scale(20)}
}

// weights returns the shards' weights: every 8th Skew, the others 1.
func (c Config) weights() (w []int, sum int) {
	w = make([]int, c.Processes)
	for i := range w {
		w[i] = 1
		if i%8 == 0 {
			w[i] = c.Skew
		}
		sum += w[i]
	}
	return w, sum
}

// Efficiency is the charges made over the charges the limit allowed in
// the span, in percent.
func (r Result) Efficiency() float64 {
	if r.Span <= 0 || r.Limit <= 0 {
		return 0
	}
	return 100 * float64(r.Charges) / (float64(r.Limit) * r.Span.Seconds())
}

// Run runs the model c chooses until every record is charged. It returns
// an error wrapping ErrConfig for a Config it cannot run, ErrStalled for a
// fleet that does not finish, or ctx's error if ctx ends first.
func Run(ctx context.Context, c Config) (Result, error) {
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return Result{}, err
	}
	if c.Calls {
		return runCalls(ctx, c)
	}
	return runSeconds(ctx, c)
}

// Comparison is the shared budget beside the static split for one fleet.
type Comparison struct {
	Processes int
	Calls     bool // the call model's
	Shared    Result
	Static    Result
}

// Compare runs c (its Static ignored) with the shared budget, then with
// the static split.
func Compare(ctx context.Context, c Config) (Comparison, error) {
	out := Comparison{Processes: c.Processes, Calls: c.Calls}
	var err error
	c.Static = false
	if out.Shared, err = Run(ctx, c); err != nil {
		return out, fmt.Errorf("K=%d shared: %w", c.Processes, err)
	}
	c.Static = true
	if out.Static, err = Run(ctx, c); err != nil {
		return out, fmt.Errorf("K=%d static: %w", c.Processes, err)
	}
	return out, nil
}

// String is the comparison on one line, as docs/capacity.md shows it:
//
//	pacing K=8 shared 99.8 % span 11h07m static 41.7 % span 26h40m
//
// and for the call model, with the busiest seconds and the shared run's
// missed windows, 429s and deaths:
//
//	pacing calls K=8 shared 99.8 % span 11h07m busiest second 100 (missed windows 0, 429s 557, deaths 2) static 41.6 % span 26h40m busiest second 104
func (c Comparison) String() string {
	sh, st := c.Shared, c.Static
	if !c.Calls {
		return fmt.Sprintf("pacing K=%d shared %.1f %% span %s static %.1f %% span %s", c.Processes,
			sh.Efficiency(), FormatSpan(sh.Span), st.Efficiency(), FormatSpan(st.Span))
	}
	return fmt.Sprintf("pacing calls K=%d shared %.1f %% span %s busiest second %d (missed windows %d, 429s %d, deaths %d) static %.1f %% span %s busiest second %d",
		c.Processes, sh.Efficiency(), FormatSpan(sh.Span), sh.Busiest, sh.MissedWindows, sh.RateLimited, sh.Deaths,
		st.Efficiency(), FormatSpan(st.Span), st.Busiest)
}

// FormatSpan writes a span as hours and minutes, the seconds dropped:
// 11h07m.
func FormatSpan(d time.Duration) string {
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
