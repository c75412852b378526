// Package preview is the engine's dry runs for the library's own operator
// tools (billingctl): what a run would do with a period, and whether a
// change, a reactivation or a sign-up would be accepted, decided by the
// same code the operations run under the user's lock. It reads and writes
// nothing. It is internal so that the root's API keeps one call per
// operation.
package preview

import (
	"context"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/hooks"
)

// Action is what a run would do with a period.
type Action string

// The actions (the engine's own words).
const (
	// Collect: the period is charged (process INITIAL or RETRY).
	Collect Action = "collect"
	// CompleteFree: the period's amount is zero; it is completed without
	// the processor (see billing.Config.AllowFreeTiers).
	CompleteFree Action = "complete free"
	// MarkStale: the period is too old to collect and becomes STALE.
	MarkStale Action = "mark stale"
	// AdvancePause: the paused period is skipped and the next opened.
	AdvancePause Action = "advance pause"
	// Resolve: the period's attempt is in flight; the run replays it or
	// looks it up, and records its outcome.
	Resolve Action = "resolve attempt"
	// ACHOverdue: an ACH debit past its settlement deadline is looked up
	// with the processor, or marked STALE (ach-overdue).
	ACHOverdue Action = "ach overdue"
	// Skip: the run leaves the period alone (Reason says why).
	Skip Action = "skip"
)

// Why a retry run leaves an ERROR period alone (a Plan's Reason).
const (
	ReasonNotError      = "not an ERROR record"
	ReasonDeclinedFinal = "declined as final"
	ReasonRetryNotNow   = "retry policy: not now"
)

// Plan is what a run would do with one period, and why.
type Plan struct {
	Action Action
	Reason string
}

// Period says what a run of kind would do at now with p as read under the
// user's lock: the decision the run makes. It does no I/O.
func Period(c *billing.Collector, kind billing.RunKind, p *billing.Period, now time.Time) Plan {
	f := hooks.PlanPeriod.(func(*billing.Collector, billing.RunKind, *billing.Period, time.Time) (string, string))
	a, r := f(c, kind, p, now)
	return Plan{Action: Action(a), Reason: r}
}

// RunQueries returns the status queries a run of kind at at reads, one
// after the other (for the retry run also ACH debits past their settlement
// deadline and ERROR periods older than its window).
func RunQueries(c *billing.Collector, kind billing.RunKind, at time.Time) ([]billing.StatusQuery, error) {
	f := hooks.RunQueries.(func(*billing.Collector, billing.RunKind, time.Time) ([]billing.StatusQuery, error))
	return f(c, kind, at)
}

// Op names an operator's change of one period.
type Op string

// The changes of one period.
const (
	Waive       Op = "waive"               // billing.Periods.WaiveByID
	Cancel      Op = "cancel"              // billing.Periods.Cancel
	Pause       Op = "pause"               // billing.Periods.Pause
	Resume      Op = "resume"              // billing.Periods.Resume
	ChangeDate  Op = "change billing date" // billing.Periods.Move
	ChangeTier  Op = "change tier"         // billing.Periods.ChangeTier
	EndTrial    Op = "end trial"           // billing.Collector.EndTrial
	ExtendTrial Op = "extend trial"        // billing.Collector.ExtendTrial
)

// Change is a change of one period and the inputs it takes.
type Change struct {
	Op Op
	// Months is the pause of Pause, 1 to 120.
	Months int
	// Date is the new billing date of ChangeDate.
	Date time.Time
	// Tier and Amount are those of ChangeTier, as billing.Periods.ChangeTier
	// takes them.
	Tier   string
	Amount billing.Amount
	// UserRecords, when not nil, are the user's periods ascending by
	// billing date: a ChangeDate is then also checked against the user's
	// other periods.
	UserRecords []billing.Period
}

// CheckChange reports whether ch may be applied to p as it is now, by the
// rules the change applies under the user's lock: the period's status (an
// error wrapping billing.ErrNotCollectible) and the inputs (a
// *billing.FieldError, or a *billing.DateMoveError for a date among the
// user's other periods).
func CheckChange(ctx context.Context, c *billing.Collector, ch Change, p *billing.Period) error {
	f := hooks.CheckChange.(func(*billing.Collector, context.Context, string, int, time.Time, string, billing.Amount, []billing.Period, *billing.Period) error)
	return f(c, ctx, string(ch.Op), ch.Months, ch.Date, ch.Tier, ch.Amount, ch.UserRecords, p)
}

// CheckReactivate reports whether billing.Collector.Reactivate may open a
// period for userID billed on date, the user's periods being recs
// (ascending by billing date).
func CheckReactivate(c *billing.Collector, userID string, recs []billing.Period, date time.Time) error {
	f := hooks.CanReactivate.(func(*billing.Collector, string, []billing.Period, time.Time) error)
	return f(c, userID, recs, date)
}

// CheckSubscribe reports what billing.Collector.Subscribe would make of
// req, the user's periods being recs: the subscription it would write, or
// the error it would return.
func CheckSubscribe(ctx context.Context, c *billing.Collector, req billing.SubscribeRequest, recs []billing.Period) (billing.Subscribed, error) {
	f := hooks.CheckSubscribe.(func(*billing.Collector, context.Context, billing.SubscribeRequest, []billing.Period) (billing.Subscribed, error))
	return f(c, ctx, req, recs)
}
