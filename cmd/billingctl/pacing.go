package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/dynabill/billing/internal/pacing"
)

var pacingCmd = &command{
	name:     "pacing",
	synopsis: "[--processes 8,32,128] [--limit 100] [--charges 4000000] [--seed N] [--calls] [--workers W] [--batch B] [--skew S]",
	doc: `how well a fleet keeps the processor at its limit: a pacing model
Models K processes charging a day's due records (--charges) at a processor
that allows --limit calls a second, with skewed shards (every 8th --skew
times the others), late starts, processes dying while holding tokens, slow
answers and 429 bursts (sized for an 11-hour day, shrunk in proportion for
a shorter one), and prints for each K one line: the pacing efficiency
(charges made over the charges the limit allowed in the run's span) and the
span of the shared budget (billing.ProcessorTokens), then the same for a
static split of limit/K a process. --calls follows every call (attempt
write, then processor call) instead of whole seconds, and adds the busiest
second, the calls held back because their token's window closed, the 429s
and the deaths; it takes some seconds a K at the default size. When the
fleet's shape keeps the shared budget under 99 % (too few processes or
workers for the processor's latency, or a big shard running alone at the
end), a second line, bound K=..., says from when, how many processes are
left, the calls a second their workers make and the --workers that would
pace at 99 %. The model reads no clock: a seed gives the same lines on any machine. It needs no
DynamoDB and ignores --endpoint and the table flags.`,
	run: runPacing,
}

// pacingRun is one budget's result for JSON.
type pacingRun struct {
	EfficiencyPercent float64 `json:"efficiency_percent"`
	Charges           int     `json:"charges"`
	SpanSeconds       int64   `json:"span_seconds"`
	Span              string  `json:"span"`
	BusiestSecond     int     `json:"busiest_second"`
	MissedWindows     int     `json:"missed_windows"`
	RateLimited       int     `json:"rate_limited"`
	Deaths            int     `json:"deaths"`
}

func toPacingRun(r pacing.Result) pacingRun {
	return pacingRun{EfficiencyPercent: r.Efficiency(), Charges: r.Charges, SpanSeconds: int64(r.Span / time.Second),
		Span: pacing.FormatSpan(r.Span), BusiestSecond: r.Busiest, MissedWindows: r.MissedWindows,
		RateLimited: r.RateLimited, Deaths: r.Deaths}
}

// pacingRow is one K for JSON: the shared budget beside the static split,
// and what binds the fleet when its shape keeps it under 99 %.
type pacingRow struct {
	Processes int          `json:"processes"`
	Shared    pacingRun    `json:"shared"`
	Static    pacingRun    `json:"static"`
	Bound     *pacingBound `json:"bound,omitempty"`
}

// pacingBound is pacing.Bound for JSON.
type pacingBound struct {
	EfficiencyPercent float64 `json:"efficiency_percent"`
	FromSeconds       int64   `json:"from_seconds"`
	ProcessesLeft     int     `json:"processes_left"`
	CallsPerProcess   float64 `json:"calls_per_process"`
	CycleMillis       int64   `json:"cycle_ms"`
	WorkersFor99      int     `json:"workers_for_99"`
	Line              string  `json:"line"`
}

func runPacing(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	procs := intList{8, 32, 128}
	fs.Var(&procs, "processes", "fleet sizes `K` to model, comma-separated: processes charging a shard each")
	limit := fs.Int("limit", pacing.DefaultLimit, "calls a second the processor allows")
	charges := fs.Int("charges", pacing.DefaultCharges, "the day's charges, split over the shards; at least --limit")
	seed := fs.Int64("seed", 1, "seed of the late starts, deaths, slow answers, 429 bursts and latencies")
	calls := fs.Bool("calls", false, "run the call-by-call model (slower)")
	workers := fs.Int("workers", 0, "collections a process makes at once (the collector's Concurrency; 0: 40, or 2/5 of --limit when more)")
	batch := fs.Int("batch", pacing.DefaultBatch, "tokens a process takes from the shared budget at once (the collector's SharedBatch)")
	skew := fs.Int("skew", pacing.DefaultSkew, "times the records of the other shards every 8th shard has (1: none)")
	if err := a.parseNoArgs(c, fs, args); err != nil {
		return err
	}
	switch {
	case len(procs) == 0:
		return usagef(c.name, "--processes: want at least one fleet size")
	case *limit < 1:
		return usagef(c.name, "--limit %d: want at least 1", *limit)
	case *charges < *limit:
		return usagef(c.name, "--charges %d: want at least --limit, %d", *charges, *limit)
	case *charges / *limit > pacing.MaxDay:
		return usagef(c.name, "--charges %d at --limit %d: want a day of at most %d s", *charges, *limit, pacing.MaxDay)
	case *workers < 0:
		return usagef(c.name, "--workers %d: want at least 1 (0: by --limit)", *workers)
	case *skew < 1 || *skew > 100:
		return usagef(c.name, "--skew %d: want 1 to 100", *skew)
	case *batch < 1:
		return usagef(c.name, "--batch %d: want at least 1", *batch)
	}
	for _, k := range procs {
		if k < 1 || k > 100_000 {
			return usagef(c.name, "--processes %d: want 1 to 100000", k)
		}
	}
	var rows []pacingRow
	for _, k := range procs {
		cfg := pacing.Config{Processes: k, Limit: *limit, Charges: *charges, Seed: *seed, Calls: *calls,
			Workers: *workers, Batch: *batch, Skew: *skew}
		cmp, err := pacing.Compare(a.ctx, cfg)
		if errors.Is(err, pacing.ErrConfig) {
			return usagef(c.name, "%v", err)
		}
		if err != nil {
			return err
		}
		bound := pacing.BoundOf(cfg)
		if a.g.json {
			row := pacingRow{Processes: k, Shared: toPacingRun(cmp.Shared), Static: toPacingRun(cmp.Static)}
			if bound.Bounded() {
				row.Bound = &pacingBound{EfficiencyPercent: bound.Efficiency, FromSeconds: int64(bound.From / time.Second),
					ProcessesLeft: bound.Left, CallsPerProcess: bound.PerProcess, CycleMillis: cfg.WithDefaults().Cycle().Milliseconds(),
					WorkersFor99: bound.Workers, Line: bound.String()}
			}
			rows = append(rows, row)
			continue
		}
		// A line as soon as its K is done: --calls takes a while.
		if _, err := fmt.Fprintln(a.stdout, cmp); err != nil {
			return err
		}
		if bound.Bounded() {
			if _, err := fmt.Fprintln(a.stdout, bound); err != nil {
				return err
			}
		}
	}
	if !a.g.json {
		return nil
	}
	return writeJSON(a.stdout, map[string]any{
		"inputs": map[string]any{"limit": *limit, "charges": *charges, "seed": *seed, "calls": *calls,
			"workers": pacing.Config{Limit: *limit, Workers: *workers}.WithDefaults().Workers, "batch": *batch, "skew": *skew},
		"rows": rows,
	})
}
