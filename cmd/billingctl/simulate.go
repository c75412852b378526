package main

import (
	"fmt"
	"time"

	"github.com/dynabill/billing"
	simulate "github.com/dynabill/billing/billingtest/simulation"
)

var simulateCmd = &command{
	name:     "simulate",
	synopsis: "[--users N] [--months N] [--decline-rate R] [--seed N]",
	doc: `the quickstart simulation, in memory
Seeds users on monthly and yearly plans and steps a fake clock day by day
through the collector's scheduled, retry and pause runs and next-day ACH
settlements of a scripted processor, then prints a table per month and one
user's history. It runs on the library's in-memory store: it never touches
DynamoDB, whatever --endpoint and the table flags say. A rate of 0 means none.`,
	run: runSimulate,
}

// simMonth is a simulate.Month for JSON.
type simMonth struct {
	Period    string         `json:"period"`
	Attempts  int            `json:"attempts"`
	Collected int            `json:"collected"`
	Pending   int            `json:"pending"`
	Settled   int            `json:"settled"`
	Returned  int            `json:"returned"`
	Declined  int            `json:"declined"`
	Retried   int            `json:"retried"`
	Unknown   int            `json:"unknown"`
	Stale     int            `json:"stale"`
	Paused    int            `json:"paused"`
	Revenue   billing.Amount `json:"revenue"`
}

func toSimMonth(m simulate.Month) simMonth {
	return simMonth{Period: m.Period, Attempts: m.Attempts, Collected: m.Collected, Pending: m.Pending, Settled: m.Settled,
		Returned: m.Returned, Declined: m.Declined, Retried: m.Retried, Unknown: m.Unknown, Stale: m.Stale,
		Paused: m.Paused, Revenue: m.Revenue}
}

func runSimulate(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	users := fs.Int("users", simulate.DefaultUsers, "number of users, 1 to 100000")
	months := fs.Int("months", simulate.DefaultMonths, "calendar months to simulate, 1 to 60")
	decline := fs.Float64("decline-rate", simulate.DefaultDeclineRate, "share of attempts declined, 0 to 1")
	pending := fs.Float64("pending-rate", simulate.DefaultPendingRate, "share of attempts submitted as ACH debits, 0 to 1")
	returns := fs.Float64("return-rate", simulate.DefaultReturnRate, "share of ACH debits returned, 0 to 1")
	seed := fs.Int64("seed", 1, "seed of the population and of the processor's answers")
	start := fs.String("start", simulate.DefaultStart.Format(time.DateOnly), "first simulated `day`, YYYY-MM-DD")
	showcase := fs.Bool("showcase", true, "print the history of one eventful user")
	if err := a.parseNoArgs(c, fs, args); err != nil {
		return err
	}
	switch {
	case *users < 1 || *users > 100000:
		return usagef(c.name, "--users %d: want 1 to 100000", *users)
	case *months < 1 || *months > 60:
		return usagef(c.name, "--months %d: want 1 to 60", *months)
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"decline-rate", *decline}, {"pending-rate", *pending}, {"return-rate", *returns}} {
		if !(r.v >= 0 && r.v <= 1) { // also rejects NaN
			return usagef(c.name, "--%s %v: want 0 to 1", r.name, r.v)
		}
	}
	if *decline+*pending > 1 {
		return usagef(c.name, "--decline-rate %v and --pending-rate %v: must sum to at most 1", *decline, *pending)
	}
	day, err := time.Parse(time.DateOnly, *start)
	if err != nil {
		return usagef(c.name, "--start %q: want YYYY-MM-DD, a real date", *start)
	}
	opts := simulate.Options{
		Users: *users, Months: *months, Seed: *seed, Start: day,
		DeclineRate: noneIfZero(*decline), PendingRate: noneIfZero(*pending), ReturnRate: noneIfZero(*returns),
	}
	began := time.Now()
	res, err := simulate.Run(a.ctx, opts)
	if err != nil {
		return err
	}
	if a.g.json {
		ms := make([]simMonth, len(res.Months))
		for i, m := range res.Months {
			ms[i] = toSimMonth(m)
		}
		failures := make([]billing.ItemFailure, len(res.Failures))
		for i, f := range res.Failures {
			failures[i] = f.ItemFailure
		}
		return writeJSON(a.stdout, map[string]any{
			"start": res.Start.Format(time.DateOnly), "end": res.End.Format(time.DateOnly), "users": len(res.Users),
			"invocations": res.Invocations, "months": ms, "total": toSimMonth(res.Total),
			"pending_at_end": res.PendingAtEnd, "settlements_redelivered": res.Deferred, "failures": failures,
		})
	}
	if err := res.Format(a.stdout); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "(in memory, %.1fs)\n", time.Since(began).Seconds())
	if !*showcase || res.Showcase == "" {
		return nil
	}
	rows, err := res.History.ListByUser(a.ctx, res.Showcase)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nHistory of %s, one row per write:\n\n", res.Showcase)
	return simulate.FormatHistory(a.stdout, rows)
}

// noneIfZero maps a rate of 0 to the simulation's "none" (a negative
// rate; its 0 means the default).
func noneIfZero(r float64) float64 {
	if r == 0 {
		return -1
	}
	return r
}
