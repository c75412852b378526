package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/preview"
)

var dueCmd = &command{
	name:     "due",
	synopsis: "[--run scheduled|retry|pause] [--at RFC3339 | --date YYYY-MM-DD [--time HH:MM]]",
	doc: `what the scheduled, retry and pause runs would pick up at an instant
Previews the collector's runs at one instant: every status query they make
(preview.RunQueries) and, for each record returned, what the run would do
with it (preview.Period, with the library's default retry policy and
--stale-days). A record is due when it is billed before the run's instant
(Subscription.DueAt), so a record billed at 18:00 is not due for a run at
noon, and the preview agrees with what a run at that instant collects.
Prints, per run, the records returned and their total amount (exact), the
actions, the pages and items read, and items read per item returned (the
cost of the index: in legacy mode every record of the status is read and
billing_date is only a filter; in due mode, with --due-shards K, each run
reads K shards of the due index, a page or more each). Nothing is written.

  scheduled  SCHEDULED records billed before the instant
  retry      ERROR records billed after the instant minus (stale days + 7);
             then ACHSENT records past the ACH settlement deadline, and ERROR
             records billed before that window (attempts in flight, records
             to mark stale), one row each
  pause      PAUSED records billed before the instant

--at gives the instant (default: now, to the second). --date D is a run at 00:00 UTC on D
(every record billed before D), or at --time HH:MM (UTC) on D. A progress bar
is drawn on stderr when it is a terminal.`,
	run: runDue,
}

// dueInstant returns the instant of the runs due previews: --at, --date
// with --time, or now.
func (a *app) dueInstant(c *command, at, date, clock string) (time.Time, error) {
	switch {
	case date != "" && at != "":
		return time.Time{}, usagef(c.name, "give --date or --at, not both")
	case clock != "" && date == "":
		return time.Time{}, usagef(c.name, "--time needs --date (or give the instant with --at)")
	case at != "":
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return time.Time{}, usagef(c.name, "--at %q: want an RFC3339 time such as 2024-03-14T12:00:00Z", at)
		}
		return t.UTC(), nil
	case date != "":
		d, err := time.Parse(time.DateOnly, date)
		if err != nil {
			return time.Time{}, usagef(c.name, "--date %q: want YYYY-MM-DD, a real date", date)
		}
		if clock == "" {
			return d, nil
		}
		hm, err := time.Parse("15:04", clock)
		if err != nil {
			return time.Time{}, usagef(c.name, "--time %q: want HH:MM (UTC), such as 12:00", clock)
		}
		return d.Add(time.Duration(hm.Hour())*time.Hour + time.Duration(hm.Minute())*time.Minute), nil
	}
	// Now, to the second: the stores compare whole seconds, so at a
	// fraction of a second the query and Subscription.DueAt would differ
	// on a record billed in that second.
	return a.clock().UTC().Truncate(time.Second), nil
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
	atFlag := fs.String("at", "", "the runs' `instant`, RFC3339 (default now)")
	dateFlag := fs.String("date", "", "the `day` of the runs, YYYY-MM-DD: runs at 00:00 UTC, or at --time")
	timeFlag := fs.String("time", "", "the runs' time of day on --date, `HH:MM` UTC (default 00:00)")
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
	// The runs' instant: their queries, and the collector's checks.
	at, err := a.dueInstant(c, *atFlag, *dateFlag, *timeFlag)
	if err != nil {
		return err
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
		// Every query the run reads: the retry run also reads ACH debits
		// past their settlement deadline and ERROR records older than its
		// window (attempts in flight, records to mark stale).
		qs, err := preview.RunQueries(planner, k, at)
		if err != nil {
			return err
		}
		for _, q := range qs {
			runs = append(runs, dueRun{k, q.Status, q})
		}
	}
	if len(runs) == 0 {
		return usagef(c.name, "--run %q: want scheduled, retry, pause or all", *runFlag)
	}

	repo, _, err := a.stores()
	if err != nil {
		return err
	}
	ev := dueEvaluator{now: at, planner: planner}
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
			"now": at.Format(time.RFC3339Nano), "due_before": at.Format(time.RFC3339Nano),
			"table": tables.Subscriptions, "index": tables.StatusIndex,
			"index_mode": tables.StatusIndexMode.String(), "runs": sums, "total": total,
		})
	}
	w := a.stdout
	instant := at.Format(time.RFC3339Nano)
	fmt.Fprintf(w, "Runs at %s on %s, index %s (%s).\n", instant, tables.Subscriptions, tables.StatusIndex, mode)
	fmt.Fprintf(w, "Due: records billed before %s, as the collector's runs at that instant take them.\n\n", instant)
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
// own decision (preview.Period), worded for operators.
type dueEvaluator struct {
	now     time.Time
	planner *billing.Collector
}

func (e *dueEvaluator) action(kind billing.RunKind, s *billing.Period) string {
	p := preview.Period(e.planner, kind, s, e.now)
	switch p.Action {
	case preview.Collect:
		if kind == billing.RunRetry {
			return "retry"
		}
		return "collect"
	case preview.MarkStale:
		return "mark stale"
	case preview.AdvancePause:
		if s.PauseDurationMonths > 1 {
			return "skip period, stay paused"
		}
		return "skip period, then resume"
	}
	switch p.Reason {
	case preview.ReasonDeclinedFinal, preview.ReasonRetryNotNow:
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
