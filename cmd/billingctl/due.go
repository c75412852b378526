package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
)

var dueCmd = &command{
	name:     "due",
	synopsis: "[--run scheduled|retry|pause] [--date YYYY-MM-DD | --at RFC3339]",
	doc: `what the scheduled, retry and pause runs would pick up on a date
Pages through the status index exactly as the collector's runs query it and
prints, per run, the records returned and their total amount (exact), what
the run would do with them (by the collector's checks, with the library's
default retry policy and --stale-days), the pages and items read, and items read per
item returned (the cost of the index: in legacy mode every record of the
status is read and billing_date is only a filter; in due mode, with
--due-shards K, each run reads K shards of the due index, a page or more
each). Nothing is written.

  scheduled  SCHEDULED records with billing_date before the run time
  retry      ERROR records billed after the run time minus (stale days + 7)
  pause      PAUSED records with billing_date before the run time

--date D looks at runs at the very end of day D (UTC): every record billed on
D or earlier counts. --at gives the run time exactly. The default is the end
of today (UTC). A progress bar is drawn on stderr when it is a terminal.`,
	run: runDue,
}

// dueRun is one run's query.
type dueRun struct {
	kind   billing.RunKind
	status billing.Status
	query  billing.StatusQuery
}

// dueAction counts the records a run would handle one way.
type dueAction struct {
	Action  string         `json:"action"`
	Records int            `json:"records"`
	Amount  billing.Amount `json:"amount"`
}

// dueSummary is what one run would pick up.
type dueSummary struct {
	Run             string         `json:"run"`
	Status          string         `json:"status"`
	Query           string         `json:"query"`
	Records         int            `json:"records"`
	Amount          billing.Amount `json:"amount"`
	Actions         []dueAction    `json:"actions"`
	Invalid         int            `json:"invalid"`
	InvalidErrors   []string       `json:"invalid_errors,omitempty"`
	Pages           int            `json:"pages"`
	ItemsRead       int            `json:"items_read"`
	ItemsReturned   int            `json:"items_returned"`
	ReadPerReturned *float64       `json:"items_read_per_item_returned"`
}

func (s *dueSummary) add(action string, amount billing.Amount) error {
	for i := range s.Actions {
		if s.Actions[i].Action == action {
			s.Actions[i].Records++
			return sumAmounts(&s.Actions[i].Amount, amount)
		}
	}
	s.Actions = append(s.Actions, dueAction{Action: action, Records: 1, Amount: amount})
	return nil
}

func runDue(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	runFlag := fs.String("run", "all", "the `run`: scheduled, retry, pause or all")
	dateFlag := fs.String("date", "", "the `day` of the runs, YYYY-MM-DD (default today, UTC)")
	atFlag := fs.String("at", "", "the run `time`, RFC3339 (instead of --date)")
	pageSize := fs.Int("page-size", 0, "items read per page (DynamoDB's Limit; default the library's 100)")
	staleDays := fs.Int("stale-days", 30, "the collector's OldSubscriptionDays: older records are marked STALE")
	if err := a.parseNoArgs(c, fs, args); err != nil {
		return err
	}
	if *pageSize < 0 {
		return usagef(c.name, "--page-size %d: must not be negative", *pageSize)
	}
	if *staleDays < 1 {
		return usagef(c.name, "--stale-days %d: must be at least 1", *staleDays)
	}
	// bound is the query's time bound and now the time the collector's
	// checks use: the end of the day, or the --at instant for both.
	var bound, now time.Time
	var when string
	switch {
	case *dateFlag != "" && *atFlag != "":
		return usagef(c.name, "give --date or --at, not both")
	case *atFlag != "":
		t, err := time.Parse(time.RFC3339Nano, *atFlag)
		if err != nil {
			return usagef(c.name, "--at %q: want an RFC3339 time such as 2024-03-14T12:00:00Z", *atFlag)
		}
		bound, now = t.UTC(), t.UTC()
		when = "at " + now.Format(time.RFC3339Nano)
	default:
		t := a.clock().UTC()
		day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		if *dateFlag != "" {
			d, err := time.Parse(time.DateOnly, *dateFlag)
			if err != nil {
				return usagef(c.name, "--date %q: want YYYY-MM-DD, a real date", *dateFlag)
			}
			day = d
		}
		bound = day.AddDate(0, 0, 1)
		now = bound.Add(-time.Nanosecond)
		when = "at the end of " + day.Format(time.DateOnly) + " (UTC)"
	}
	// The run's own queries and decisions, from a collector that only
	// plans (it never locks or charges).
	planner, err := billing.NewCollector(billing.Config{Repository: noRepository{}, Locker: noLocker{},
		Provider: refuseProvider{}, OldSubscriptionDays: *staleDays})
	if err != nil {
		return err
	}
	var runs []dueRun
	for _, k := range []billing.RunKind{billing.RunScheduled, billing.RunRetry, billing.RunPause} {
		if *runFlag != "all" && *runFlag != string(k) {
			continue
		}
		// Scheduled and pause runs are bounded by the end of the day, so
		// the preview includes every record billed on it (a query at the
		// last instant would be truncated to its whole second); the retry
		// lookback counts from the run's instant.
		at := bound
		if k == billing.RunRetry {
			at = now
		}
		q, err := planner.RunQuery(k, at)
		if err != nil {
			return err
		}
		runs = append(runs, dueRun{k, q.Status, q})
	}
	if len(runs) == 0 {
		return usagef(c.name, "--run %q: want scheduled, retry, pause or all", *runFlag)
	}

	repo, _, err := a.stores()
	if err != nil {
		return err
	}
	ev := dueEvaluator{now: now, planner: planner}
	var sums []dueSummary
	for _, r := range runs {
		r.query.Limit = *pageSize
		sum, err := a.dueRun(repo, r, &ev)
		if err != nil {
			return err
		}
		sums = append(sums, sum)
	}
	total := dueSummary{Run: "total", Actions: []dueAction{}}
	for _, s := range sums {
		total.Records += s.Records
		total.Invalid += s.Invalid
		total.Pages += s.Pages
		total.ItemsRead += s.ItemsRead
		total.ItemsReturned += s.ItemsReturned
		if err := sumAmounts(&total.Amount, s.Amount); err != nil {
			return err
		}
	}
	total.ReadPerReturned = ratioJSON(total.ItemsRead, total.ItemsReturned)
	tables := a.tables()
	mode := "legacy: billing_date is a filter, every record of the status is read"
	switch tables.StatusIndexMode {
	case dynamostore.StatusIndexSorted:
		mode = "sorted: billing_date is a key condition, only due records are read"
	case dynamostore.StatusIndexDue:
		tables.StatusIndex = tables.DueIndex
		mode = fmt.Sprintf("due: %s, one query per shard, billing_date is a key condition", plural(tables.DueShards, "shard"))
	}
	if a.single() && tables.StatusIndexMode != dynamostore.StatusIndexDue {
		st := a.singleTable()
		tables.StatusIndex, mode = st.PaymentIndex, "single table: the payment-date index, day by day"
	}
	if a.g.json {
		return writeJSON(a.stdout, map[string]any{
			"now": now.Format(time.RFC3339Nano), "table": tables.Subscriptions, "index": tables.StatusIndex,
			"index_mode": tables.StatusIndexMode.String(), "runs": sums, "total": total,
		})
	}
	w := a.stdout
	fmt.Fprintf(w, "Runs %s on %s, index %s (%s).\n\n", when, tables.Subscriptions, tables.StatusIndex, mode)
	tw := newTable(w)
	fmt.Fprintln(tw, "RUN\tSTATUS\tRECORDS\tAMOUNT\tINVALID\tPAGES\tITEMS_READ\tREAD_PER_RETURNED")
	row := func(s *dueSummary) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\n", s.Run, dash(s.Status), s.Records, s.Amount, s.Invalid,
			s.Pages, s.ItemsRead, ratio(s.ItemsRead, s.ItemsReturned))
	}
	for i := range sums {
		row(&sums[i])
	}
	if len(sums) > 1 {
		row(&total)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, s := range sums {
		fmt.Fprintf(w, "%s run (%s): ", s.Run, s.Query)
		if len(s.Actions) == 0 {
			fmt.Fprint(w, "nothing to do")
		}
		for i, act := range s.Actions {
			if i > 0 {
				fmt.Fprint(w, ", ")
			}
			fmt.Fprintf(w, "%s %d (%s)", act.Action, act.Records, act.Amount)
		}
		fmt.Fprintln(w)
		for _, e := range s.InvalidErrors {
			fmt.Fprintf(w, "  invalid item: %s\n", e)
		}
	}
	return nil
}

// dueRun pages through one run's query.
func (a *app) dueRun(repo billing.Repository, r dueRun, ev *dueEvaluator) (dueSummary, error) {
	sum := dueSummary{Run: string(r.kind), Status: string(r.status), Query: queryText(r.query), Actions: []dueAction{}}
	bar := a.newProgress("due: " + string(r.kind))
	defer bar.finish()
	q := r.query
	for {
		page, err := repo.QueryStatus(a.ctx, q)
		if err != nil {
			return sum, fmt.Errorf("%s run: page %d: %w", r.kind, sum.Pages+1, err)
		}
		sum.Pages++
		sum.ItemsRead += page.Scanned
		sum.ItemsReturned += page.Count
		sum.Invalid += len(page.Invalid)
		for _, e := range page.Invalid {
			sum.InvalidErrors = append(sum.InvalidErrors, e.Error())
		}
		for i := range page.Items {
			it := &page.Items[i]
			sum.Records++
			if err := sumAmounts(&sum.Amount, it.Amount); err != nil {
				return sum, err
			}
			if err := sum.add(ev.action(r.kind, it), it.Amount); err != nil {
				return sum, err
			}
		}
		bar.update(sum.Pages, sum.ItemsRead, sum.ItemsReturned)
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	sum.ReadPerReturned = ratioJSON(sum.ItemsRead, sum.ItemsReturned)
	return sum, nil
}

// dueEvaluator says what a run would do with a record: the collector's
// own decision ([billing.Collector.PlanRecord]), worded for operators.
type dueEvaluator struct {
	now     time.Time
	planner *billing.Collector
}

func (e *dueEvaluator) action(kind billing.RunKind, s *billing.Subscription) string {
	p := e.planner.PlanRecord(kind, s, e.now)
	switch p.Action {
	case billing.PlanCollect:
		if kind == billing.RunRetry {
			return "retry"
		}
		return "collect"
	case billing.PlanMarkStale:
		return "mark stale"
	case billing.PlanAdvancePause:
		if s.PauseDurationMonths > 1 {
			return "skip period, stay paused"
		}
		return "skip period, then resume"
	}
	switch p.Reason {
	case billing.ReasonDeclinedFinal, billing.ReasonRetryNotNow:
		return "skip (" + p.Reason + ")"
	}
	return "not eligible"
}

// noRepository and noLocker complete the planning collector of due, which
// never reads, writes or locks.
type (
	noRepository struct{ billing.Repository }
	noLocker     struct{}
)

func (noLocker) Lock(context.Context, string) (billing.Lease, error) {
	return nil, errors.New("billingctl: due only plans")
}

// queryText describes a status query's date range.
func queryText(q billing.StatusQuery) string {
	var parts []string
	if !q.Since.IsZero() {
		parts = append(parts, "billing_date >= "+fmtTime(q.Since))
	}
	if !q.After.IsZero() {
		parts = append(parts, "billing_date > "+fmtTime(q.After))
	}
	if !q.Before.IsZero() {
		parts = append(parts, "billing_date < "+fmtTime(q.Before))
	}
	return string(q.Status) + " with " + strings.Join(parts, " and ")
}
