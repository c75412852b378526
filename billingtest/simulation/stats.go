package simulation

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

// Month is what happened in one calendar month of simulated days. Counts
// come from the collector's reports (attempts, retried, unknown, paused)
// and events (the rest); the simulation's tests recompute them from the
// store and the processor's call log.
type Month struct {
	// Period is the month as "MM/YYYY".
	Period string
	// Attempts counts provider calls (scheduled and retry runs).
	Attempts int
	// Collected counts records that became COMPLETED: collected at once,
	// or an ACH debit that settled.
	Collected int
	// Pending counts ACH debits submitted (records that became ACHSENT).
	Pending int
	// Settled and Returned count ACH debits that settled (ACHSENT →
	// COMPLETED) or came back (ACHSENT → ERROR).
	Settled  int
	Returned int
	// Declined counts attempts declined (records that became, or stayed,
	// ERROR).
	Declined int
	// Retried counts the retry run's attempts (process RETRY).
	Retried int
	// Unknown counts attempts whose outcome the provider did not give
	// (timeouts): retried with the same idempotency key later.
	Unknown int
	// Stale counts records marked STALE.
	Stale int
	// Paused counts paused periods skipped by the pause run
	// (PAUSED_SKIPPED).
	Paused int
	// Revenue is the sum of the amounts of the records Collected counts.
	Revenue billing.Amount
}

func (m *Month) add(o *Month) error {
	m.Attempts += o.Attempts
	m.Collected += o.Collected
	m.Pending += o.Pending
	m.Settled += o.Settled
	m.Returned += o.Returned
	m.Declined += o.Declined
	m.Retried += o.Retried
	m.Unknown += o.Unknown
	m.Stale += o.Stale
	m.Paused += o.Paused
	r, err := m.Revenue.Add(o.Revenue)
	m.Revenue = r
	return err
}

// Result is what a simulation did.
type Result struct {
	// Start and End bound the simulated days: [Start, End).
	Start, End time.Time
	// Users are the seeded users, in ID order.
	Users []User
	// Months has one entry per simulated calendar month, in order; Total
	// sums them.
	Months []Month
	Total  Month
	// Invocations counts Collector.Run calls (a run continued through
	// Report.Next takes several).
	Invocations int
	// Failures lists what the runs could not handle (outcome-unknown
	// attempts are expected: they are retried with the same key).
	Failures []Failure
	// Deferred counts settlement events that arrived before the record
	// knew its transaction (the attempt's outcome was still unknown) and
	// were delivered again the next day.
	Deferred int
	// PendingAtEnd counts ACH debits still awaiting settlement when the
	// simulation ended.
	PendingAtEnd int
	// Showcase is a user with an eventful history, for display.
	Showcase string

	// What the simulation ran on (the options' or the defaults).
	Repository billing.Repository
	History    billing.History
	Provider   *billingtest.Provider
	Clock      Clock
}

// Failure is an item a run could not handle.
type Failure struct {
	Step Step
	billing.ItemFailure
}

// Format prints the population and the per-month table.
func (r *Result) Format(w io.Writer) error {
	var monthly, yearly, friday, paused, legacy, backlog int
	behaviours := map[Behavior]int{}
	for i := range r.Users {
		u := &r.Users[i]
		if u.Term == billing.TermYearly {
			yearly++
		} else {
			monthly++
		}
		if u.BillingWeek > 0 {
			friday++
		}
		if u.PauseMonths > 0 {
			paused++
		}
		if u.Legacy {
			legacy++
		}
		if u.Backlog {
			backlog++
		}
		behaviours[u.Behavior]++
	}
	days := int(r.End.Sub(r.Start) / (24 * time.Hour))
	fmt.Fprintf(w, "Simulated %d users for %d days, %s to %s (%d collector invocations).\n",
		len(r.Users), days, r.Start.Format("2006-01-02"), r.End.AddDate(0, 0, -1).Format("2006-01-02"), r.Invocations)
	fmt.Fprintf(w, "Users: %d monthly (%d on Friday billing), %d yearly; %d paused.\n", monthly, friday, yearly, paused)
	fmt.Fprintf(w, "Sign-ups: %d through Subscribe; %d records another service wrote (%d a stale backlog).\n",
		len(r.Users)-legacy, legacy, backlog)
	fmt.Fprintf(w, "Processor: %d accounts closed, %d insolvent, %d timeouts before and %d after charging.\n\n",
		behaviours[BehaviorAccountClosed], behaviours[BehaviorInsolvent],
		behaviours[BehaviorTimeoutBeforeCharge], behaviours[BehaviorTimeoutAfterCharge])

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "month\tattempts\tcollected\tpending\tsettled\treturned\tdeclined\tretried\tunknown\tstale\tpaused\trevenue\t")
	row := func(name string, m *Month) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", name, m.Attempts, m.Collected, m.Pending,
			m.Settled, m.Returned, m.Declined, m.Retried, m.Unknown, m.Stale, m.Paused, m.Revenue)
	}
	for i := range r.Months {
		row(r.Months[i].Period, &r.Months[i])
	}
	row("total", &r.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, `
What the columns count, per calendar month:
  attempts   calls to the processor: first attempts, retries and replays
  collected  periods paid: charged at once, or ACH debits that settled (settled counts those again)
  pending    ACH debits submitted, waiting for the bank
  settled    ACH debits the bank settled (already in collected)
  returned   ACH debits the bank returned; the period goes back to be retried
  declined   attempts the processor declined
  retried    attempts made by the daily retry run (a subset of attempts)
  unknown    attempts whose answer was lost (timeouts): replayed later with the same
             idempotency key, so never charged twice
  stale      periods too old to collect, closed without a charge
  paused     periods skipped because the user paused
  revenue    what was collected that month. It swings from month to month because
             yearly plans pay a whole year in the month they renew, and an ACH debit
             counts in the month it settles, not the month it was submitted.
At the end: %d ACH debits still waiting for the bank; %d settlement events arrived before
their attempt was recorded and were delivered again; %d attempts ended a run with an unknown
outcome (%d timeouts in all) and were replayed by a later run.
`, r.PendingAtEnd, r.Deferred, len(r.Failures), r.Total.Unknown)
	return err
}

// FormatHistory prints history rows (History.ListByUser or
// ListBySubscription), oldest first: one line per write of a record.
func FormatHistory(w io.Writer, rows []billing.Period) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "written\tbilling date\tperiod\tstatus\tprocess\tattempt\tamount\tevent\t")
	prev := map[string]billing.Status{}
	for i := range rows {
		r := &rows[i]
		var ev []string
		switch was := prev[r.SubscriptionID]; {
		case was == billing.StatusACHSent && r.Status == billing.StatusCompleted:
			ev = append(ev, "ACH settled")
		case was == billing.StatusACHSent && r.Status == billing.StatusError:
			ev = append(ev, "ACH returned")
		}
		prev[r.SubscriptionID] = r.Status
		if r.UpdatedEvent != "" {
			ev = append(ev, string(r.UpdatedEvent))
		}
		if r.PaymentError != "" && r.Status == billing.StatusError {
			ev = append(ev, r.PaymentError)
		}
		if r.NoRetry {
			ev = append(ev, "no retry")
		}
		if r.TransactionID != "" && r.Status != billing.StatusError {
			ev = append(ev, r.TransactionID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.LastRunDate.Format("2006-01-02 15:04"),
			r.BillingDate.Format("Mon 2006-01-02 15:04"), r.BillingPeriod, r.Status, r.Process, r.Attempt, r.Amount,
			strings.Join(ev, "; "))
	}
	return tw.Flush()
}

// Tally is the event sink that makes a simulation's per-month table (and
// picks the user [Result.Showcase] shows) from the collector's events.
// [Run] makes one for the collector it builds; a caller that builds the
// collector itself (see [Options.Collector]) gives it one from [NewTally]
// as billing.Config.Events. Safe for concurrent use; one Tally counts one
// simulation.
type Tally struct {
	mu      sync.Mutex
	started bool
	next    billing.EventSink
	months  map[string]*Month
	order   []string
	users   map[string]map[billing.EventType]int
}

// NewTally returns an empty Tally.
func NewTally() *Tally {
	return &Tally{months: map[string]*Month{}, users: map[string]map[billing.EventType]int{}}
}

// start marks t taken by a simulation whose events also go to next.
func (t *Tally) start(next billing.EventSink) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started, t.next = true, next
}

// used reports whether a simulation took t already.
func (t *Tally) used() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.started
}

// month returns the entry of t's month; t.mu is held.
func (t *Tally) month(at time.Time) *Month {
	p := billing.BillingPeriod(at)
	m, ok := t.months[p]
	if !ok {
		m = &Month{Period: p}
		t.months[p] = m
		t.order = append(t.order, p)
	}
	return m
}

// Emit implements billing.EventSink.
func (t *Tally) Emit(ctx context.Context, e billing.Event) error {
	t.mu.Lock()
	next := t.next
	m := t.month(e.At)
	var err error
	switch e.Type {
	case billing.EventPaymentSucceeded:
		m.Collected++
		m.Revenue, err = m.Revenue.Add(e.Amount)
	case billing.EventPaymentPending:
		m.Pending++
	case billing.EventPaymentDeclined:
		m.Declined++
	case billing.EventPaymentReturned:
		m.Returned++
	case billing.EventStale:
		m.Stale++
	}
	if t.users[e.UserID] == nil {
		t.users[e.UserID] = map[billing.EventType]int{}
	}
	t.users[e.UserID][e.Type]++
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if next != nil {
		return next.Emit(ctx, e)
	}
	return nil
}

// count adds to the month of at.
func (t *Tally) count(at time.Time, f func(m *Month)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t.month(at))
}

// result fills r's months and total.
func (t *Tally) result(r *Result) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	order := slices.Clone(t.order)
	slices.SortFunc(order, func(a, b string) int { return strings.Compare(a[3:]+a[:2], b[3:]+b[:2]) })
	for _, p := range order {
		m := *t.months[p]
		if err := r.Total.add(&m); err != nil {
			return err
		}
		r.Months = append(r.Months, m)
	}
	r.Total.Period = "total"
	return nil
}

// showcase picks a user whose history shows the most kinds of events
// (then the most events, then the smallest ID), among users the processor
// treats at random.
func (t *Tally) showcase(users []User) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	best, bestScore := "", -1
	for i := range users {
		u := &users[i]
		if u.Behavior != BehaviorRandom || u.PauseMonths > 0 || u.Backlog {
			continue
		}
		score := 0
		for _, n := range t.users[u.ID] {
			score += 100 + min(n, 99)
		}
		if score > bestScore {
			best, bestScore = u.ID, score
		}
	}
	return best
}
