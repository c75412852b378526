package billing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dynabill/billing/internal/calendar"
)

// Change is the result of an admin change: the record before and after,
// and any records the change created.
type Change struct {
	Before  Period   `json:"before"`
	After   Period   `json:"after"`
	Created []Period `json:"created,omitempty"`
}

// admin applies edit to the record subscriptionID under the user's lock
// and writes it (with its history row) conditionally on the record read,
// once the record, re-read and its attempt resolved, is in a status op
// accepts (the table checkChange reads too). edit returns the
// records to create in the same transaction. A guard, when given, sees the
// record as re-read under the lock, before its attempt is resolved, and
// refuses the change by returning an error.
func (c *Collector) admin(ctx context.Context, op opName, subscriptionID string, edit func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error), guard ...func(cur *Period) error) (Change, error) {
	found, err := c.cfg.Repository.GetByID(ctx, subscriptionID)
	if err != nil {
		return Change{}, c.periodIDHint(ctx, subscriptionID, err)
	}
	var ch Change
	_, err = c.single(ctx, string(op), found.UserID, subscriptionID, func(ctx context.Context, _ *Report) error {
		cur, err := c.reread(ctx, &found)
		if err != nil {
			return err
		}
		for _, g := range guard {
			if err := g(&cur); err != nil {
				return fmt.Errorf("%s %s: %w", op, subscriptionID, err)
			}
		}
		// Nothing changes a record whose charge may have happened: its
		// attempt is resolved first, or the change is refused.
		if cur, err = c.resolve(ctx, &cur, &Report{}); err != nil {
			return fmt.Errorf("%s %s: %w", op, subscriptionID, inFlightRefused(op, err))
		}
		if err := requireStatus(op, &cur); err != nil {
			return fmt.Errorf("%s %s: %w", op, subscriptionID, err)
		}
		now := c.cfg.Clock.Now()
		next := cur.Clone()
		next.LastRunDate = runTime(&cur, now)
		if firstAfterTrial(&cur) {
			// A period opened before billing_after_trial existed is known
			// by its updated_event only, which this write may replace.
			next.AfterTrial = true
		}
		create, err := edit(ctx, &cur, &next, now)
		if err != nil {
			return fmt.Errorf("%s %s: %w", op, subscriptionID, err)
		}
		for i, f := range create {
			f.LastRunDate = next.LastRunDate.Add(time.Duration(i+1) * time.Nanosecond)
			f.CreatedDate = f.LastRunDate
		}
		stampRequest(&next, requestOf(ctx)) // a change by user records its request, and who made it
		if err := c.write(ctx, adminOps[op].change, &cur, &next, create); err != nil {
			return fmt.Errorf("%s %s: %w", op, subscriptionID, c.keyTaken(ctx, &cur, &next, err))
		}
		ch = Change{Before: cur, After: next}
		for _, f := range create {
			ch.Created = append(ch.Created, *f)
		}
		return nil
	})
	return ch, err
}

// requireStatus refuses op on cur unless cur's status is one op takes
// ([adminOps]): the refusal names the status, those op takes, and what to
// do first.
func requireStatus(op opName, cur *Period) error {
	allowed := adminOps[op].statuses
	if slices.Contains(allowed, cur.Status) {
		return nil
	}
	msg := fmt.Sprintf("record is %s, want one of %v", cur.Status, allowed)
	if fix := statusFix(op, cur.Status); fix != "" {
		msg += ": " + fix
	}
	return refused(op, "%s", msg)
}

// WaiveByID forgives a SCHEDULED or ERROR record without payment (WAIVED).
// A record never attempted also opens the next period, as an attempt would.
// When another writer put that next period in place after WaiveByID read the
// user's records, nothing is written and the error is a [*ConflictError]
// wrapping [ErrConflict] (never [ErrAlreadyExists]): call again, and the
// waive goes on with the period found.
func (p *Periods) WaiveByID(ctx context.Context, subscriptionID string) (Change, error) {
	c := p.c
	return c.admin(ctx, opWaive, subscriptionID, func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
		next.Status, next.CompletionDate = StatusWaived, next.LastRunDate
		return c.openNext(ctx, cur, now)
	})
}

// Cancel cancels a SCHEDULED, ERROR or PAUSED record (CANCELLED). The
// subscription ends: no next period is opened. Cancelling an ERROR record
// forgives what it owes, as [Periods.WaiveByID] does; a host acting for the
// end user calls [Periods.CancelUnowed] instead.
func (p *Periods) Cancel(ctx context.Context, subscriptionID string) (Change, error) {
	c := p.c
	return c.admin(ctx, opCancel, subscriptionID, cancelEdit)
}

// CancelUnowed cancels a record as [Periods.Cancel] does, but only while
// cancelling forgives nothing: the record, re-read under the user's lock,
// must be SCHEDULED or PAUSED with no attempt in flight. A record that is
// ERROR (its charge was declined), ACHSENT (its bank debit has not settled)
// or carries an attempt of unknown outcome is refused with an [*OwedError]
// (matching [ErrOwed]): nothing is written and the processor is not called.
// It is the cancel an end user may make on their own; an operator who
// means to forgive the period calls Cancel. Because the decision is made
// under the lock, a decline that lands after the caller's own read of the
// record still refuses the cancel.
func (p *Periods) CancelUnowed(ctx context.Context, subscriptionID string) (Change, error) {
	c := p.c
	return c.admin(ctx, opCancel, subscriptionID, cancelEdit, refuseOwed)
}

func cancelEdit(_ context.Context, _, next *Period, _ time.Time) ([]*Period, error) {
	next.Status, next.CompletionDate = StatusCancelled, next.LastRunDate
	return nil, nil
}

// Pause pauses a SCHEDULED record for months months (PAUSED), or changes
// the months of a PAUSED one. The pause run advances it.
//
// A pause counts calendar months on every term: the record's billing date
// is skipped and the subscription is charged again months months after it
// ([Schedule.AfterPause]), for a yearly plan too, which is then billed yearly
// from that date. The pause run skips one month at a time: each skipped
// PAUSED record opens the next one a month later with one month fewer,
// and the last opens the SCHEDULED record (pause-resume). A trial's period
// paused before it was completed (a pause asked during a trial) is no
// month of the pause: the first paid period opens on the trial's end
// paused for all months, so the first charge comes months months after
// the trial's end ([Period.ResumeDate]). Months outside 1 to 120 is a
// [*FieldError] wrapping [ErrInvalidQuery].
func (p *Periods) Pause(ctx context.Context, subscriptionID string, months int) (Change, error) {
	c := p.c
	if err := checkPauseMonths(months); err != nil {
		return Change{}, fmt.Errorf("%s %s: %w", opPause, subscriptionID, err)
	}
	return c.admin(ctx, opPause, subscriptionID, func(ctx context.Context, cur, next *Period, _ time.Time) ([]*Period, error) {
		next.Status, next.PauseDurationMonths = StatusPaused, months
		next.UpdatedEvent = ""
		if months == 1 {
			next.UpdatedEvent = UpdatedPausePendingResume
		}
		return nil, nil
	})
}

// Resume ends the pause of a PAUSED record: it becomes SCHEDULED again
// (pause-resume) on its billing date.
func (p *Periods) Resume(ctx context.Context, subscriptionID string) (Change, error) {
	c := p.c
	return c.admin(ctx, opResume, subscriptionID, func(ctx context.Context, cur, next *Period, _ time.Time) ([]*Period, error) {
		next.Status, next.PauseDurationMonths, next.UpdatedEvent = StatusScheduled, 0, UpdatedPauseResume
		return nil, nil
	})
}

// Move moves a SCHEDULED, ERROR or PAUSED record to another
// billing date (delete + put + history in one transaction). The new date's
// day becomes the anchor day; a Friday-billing record takes the Friday week
// of the new date, which must be a Friday (a [*FieldError] wrapping
// [ErrInvalidDate] otherwise, as [Collector.Subscribe] refuses it: the next
// period would be billed days later at a full month's price). A trial period not completed yet moves whole: its end
// moves as far as its start (the trial keeps its length), and the anchor
// day and Friday week follow the new end, where the first paid period is
// billed (see [Collector.ExtendTrial] to move the end alone).
//
// The date is read as a wall-clock date and time in UTC, whatever its
// location, and must be at least a day inside the stale threshold
// before now and at most [MaxDateAhead] after it, in the years 1 to 9999; otherwise the move is
// refused with a [*FieldError] wrapping [ErrInvalidDate].
//
// A move keeps the record's place among the user's periods, because the
// collector opens a user's next period only from the latest record:
//
//   - the new date must be before every later open (SCHEDULED, ERROR,
//     ACHSENT or PAUSED) record of the user: a move onto or past the next
//     period would leave two open periods in the wrong order and no period
//     after them;
//   - the new date must be after every earlier record of the user, whatever
//     its status: a record moved onto or before its previous period would
//     no longer be the latest, and collecting it would open nothing;
//   - the new date must not be the date of any other record of the user;
//   - the new date must not be inside a period the user paid (before the
//     billing date after it by its schedule, [DateMoveError.PaidThrough]):
//     the days up to that date are paid for, and a charge before it would
//     charge them again (a trial's period and a free one are not paid);
//   - with no later open period, the schedule from the new date must not
//     bill on the date of a record of the user's earlier life (a
//     [*FieldError] wrapping [ErrInvalidDate] names it): the record's
//     collection could not open that period.
//
// Such a move is refused with a [*DateMoveError] (matching [ErrDateMove]
// and [ErrInvalidDate], never [ErrConflict] or [ErrAlreadyExists]):
// retrying cannot help, the date must change. So is a move onto a record
// another writer put on the new date after the move read the user's
// records: the error names that record. Moving a record past later records that are all
// terminal (cancelled, completed, ...) is allowed: it stays the latest.
func (p *Periods) Move(ctx context.Context, subscriptionID string, date time.Time) (Change, error) {
	c := p.c
	return c.admin(ctx, opChangeDate, subscriptionID, c.moveDate(date))
}

// moveDate is the edit of a record's move to date ([Periods.Move]).
func (c *Collector) moveDate(date time.Time) func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
	return func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
		d, err := c.billingDay("billing_date", date, now)
		if err == nil {
			err = fridayMove(cur, d)
		}
		if err != nil {
			return nil, err
		}
		// Read under the user's lock; the write's condition on cur stays
		// the fence against anything this read could miss.
		rctx, unread := collectUnreadable(ctx)
		recs, err := c.cfg.Repository.ListByUser(rctx, cur.UserID)
		if err != nil {
			return nil, fmt.Errorf("list the records of user %s: %w", cur.UserID, err)
		}
		if err := checkDateMove(cur, d, recs); err != nil {
			return nil, err
		}
		// A record that cannot be read is taken for one the move may not
		// reach: checkDateMove's rules with what of it decodes.
		err = unread.refuse("a period the new date reaches", func(at time.Time, st Status) bool {
			switch {
			case at.IsZero():
				return true
			case !at.After(cur.BillingDate):
				// An earlier record: d must be after it, and, moving
				// earlier, out of its paid period, whose end cannot be told.
				return !d.After(at) || d.Before(cur.BillingDate) && (st == "" || st == StatusCompleted)
			}
			return !d.Before(at) && (mayBeOpen(at, st) || d.Equal(at))
		})
		if err != nil {
			return nil, err
		}
		moveTo(next, d)
		return nil, nil
	}
}

// fridayMove refuses moving cur, a Friday-billing record, to d when the
// date its schedule goes on from (d, or a trial's end moved with it, see
// moveTo) is not a Friday: the next period would be billed on the record's
// Friday of the next month, days later at a full month's price.
// [Collector.Subscribe] refuses such a first date alike. The error is a
// [*FieldError] wrapping [ErrInvalidDate].
func fridayMove(cur *Period, d time.Time) error {
	if cur.BillingWeek == 0 {
		return nil
	}
	moved := cur.Clone()
	moveTo(&moved, d)
	anchor := moved.BillingDate
	if moved.IsTrial() {
		anchor = moved.TrialEnd
	}
	if calendar.FridayWeek(anchor) != 0 {
		return nil
	}
	return &FieldError{Field: "billing_date", Value: d.Format(time.RFC3339), Err: fmt.Errorf(
		"%w: %s bills on a Friday of the month, and its schedule would go on from %s, a %s: choose a Friday",
		ErrInvalidDate, cur.SubscriptionID, anchor.UTC().Format(time.RFC3339), anchor.UTC().Weekday())}
}

// moveTo moves next, a record as read, to billing date d: the new date's
// day becomes its anchor day and, on a Friday-billing record, the Friday
// week of d its week. A trial period not completed yet moves whole: its
// end moves as far as its start, so the trial keeps its length, and the
// anchor day and Friday week follow the new end, the first paid period's
// date (as [Collector.ExtendTrial] sets them): the paid schedule starts
// there, and no paid period is shorter than its term.
func moveTo(next *Period, d time.Time) {
	anchor := d
	if next.IsTrial() {
		next.TrialEnd = next.TrialEnd.Add(d.Sub(next.BillingDate))
		anchor = next.TrialEnd
	}
	next.BillingDate, next.BillingPeriod, next.AnchorDay = d, BillingPeriod(d), anchor.Day()
	if next.BillingWeek != 0 {
		if w := calendar.FridayWeek(anchor); w != 0 {
			next.BillingWeek = w
		}
	}
}

// DateMoveError reports a refused [Periods.Move]: the
// requested date is on or past a later open period of the user, or on or
// before an earlier period. It matches [ErrDateMove] and [ErrInvalidDate].
type DateMoveError struct {
	// SubscriptionID is the record that was to move.
	SubscriptionID string
	// Date is the requested billing date.
	Date time.Time
	// PeriodID and PeriodDate identify the user's record in the way, and
	// PeriodStatus is its status.
	PeriodID     string
	PeriodDate   time.Time
	PeriodStatus Status
	// Later is set when that record is later than the moving one (an open
	// period the move would reach or pass, or any record on the requested
	// date), unset when it is an earlier period (the move would reach or
	// precede it).
	Later bool
	// PaidThrough, when set, is the end of the paid period PeriodID the
	// requested date is inside: the first date not paid for. A move
	// there would charge paid days again; the new date must be on or
	// after it.
	PaidThrough time.Time
}

// Error implements error.
func (e *DateMoveError) Error() string {
	if !e.PaidThrough.IsZero() {
		return fmt.Sprintf("%s: %s to %s is inside the paid period %s (billed %s, paid through %s); "+
			"the new date must be on or after %s",
			ErrDateMove, e.SubscriptionID, e.Date.UTC().Format(time.RFC3339), e.PeriodID,
			e.PeriodDate.UTC().Format(time.RFC3339), e.PaidThrough.UTC().Format(time.RFC3339),
			e.PaidThrough.UTC().Format(time.RFC3339))
	}
	rel, side := "on or before the earlier period", "after"
	if e.Later {
		rel, side = "on or past the later period", "before"
	}
	return fmt.Sprintf("%s: %s to %s is %s %s (%s, %s); the new date must be %s it",
		ErrDateMove, e.SubscriptionID, e.Date.UTC().Format(time.RFC3339), rel,
		e.PeriodID, e.PeriodDate.UTC().Format(time.RFC3339), e.PeriodStatus, side)
}

// Unwrap returns ErrDateMove and ErrInvalidDate.
func (e *DateMoveError) Unwrap() []error { return []error{ErrDateMove, ErrInvalidDate} }

// checkDateMove refuses moving cur to d when d is on or past a later open
// record of recs, on another later record, or on or before an earlier
// record. recs are the user's records ascending by billing date.
func checkDateMove(cur *Period, d time.Time, recs []Period) error {
	var prev *Period
	for i := range recs {
		r := &recs[i]
		switch {
		case r.SubscriptionID == cur.SubscriptionID:
		case r.BillingDate.After(cur.BillingDate):
			if !d.Before(r.BillingDate) && (!r.Status.IsTerminal() || d.Equal(r.BillingDate)) {
				return newDateMoveError(cur, d, r, true) // the nearest such record: recs ascend
			}
		default:
			prev = r // the last earlier record is the nearest
		}
	}
	if prev != nil && !d.After(prev.BillingDate) {
		return newDateMoveError(cur, d, prev, false)
	}
	if paid, end := paidBefore(cur, recs); paid != nil && d.Before(end) {
		e := newDateMoveError(cur, d, paid, false)
		e.PaidThrough = end
		return e
	}
	// With no later open period, cur's collection opens the next one from
	// d on: its schedule must not meet a record of an earlier life.
	var others []Period
	for _, r := range recs {
		switch {
		case r.SubscriptionID == cur.SubscriptionID:
		case !r.Status.IsTerminal() && r.BillingDate.After(cur.BillingDate):
			return nil
		case r.Status.IsTerminal():
			others = append(others, r)
		}
	}
	moved := cur.Clone()
	moveTo(&moved, d)
	return clearSchedule("billing_date", &moved, others)
}

// paidBefore returns the paid period among recs (ascending) before cur
// that ends last, and its end (the billing date after it by its
// schedule, or the end of access a cancellation now put before it:
// [paidEnd]): the date up to which the user paid. A trial's period and a
// free one are not paid, nor is the time a cancellation now refunded.
// Nil when none was paid.
func paidBefore(cur *Period, recs []Period) (*Period, time.Time) {
	var (
		paid *Period
		end  time.Time
	)
	for i := range recs {
		r := &recs[i]
		if r.SubscriptionID == cur.SubscriptionID || !r.BillingDate.Before(cur.BillingDate) ||
			r.Status != StatusCompleted || r.Amount <= 0 || r.IsTrial() {
			continue
		}
		e, err := paidEnd(r, recs)
		if err != nil {
			continue
		}
		if e.After(end) {
			paid, end = r, e
		}
	}
	return paid, end
}

func newDateMoveError(cur *Period, d time.Time, r *Period, later bool) *DateMoveError {
	return &DateMoveError{SubscriptionID: cur.SubscriptionID, Date: d, PeriodID: r.SubscriptionID,
		PeriodDate: r.BillingDate, PeriodStatus: r.Status, Later: later}
}

// ChangeTier changes the tier of a SCHEDULED record. An upgrade applies
// to this period at once; a downgrade is marked pending
// (is_pending_downgrade) and applies from the next period, which the
// collector opens with the new tier and amount. While a trial runs
// (the trial period, or the first paid period after it not charged yet)
// nothing has been charged: a downgrade too sets the first charge.
//
// The amount is the host's, never an end user's: with [Config.Prices] set
// it comes from the price list (amount must then be [ListPrice] or that
// price), otherwise amount is taken as given. Either way it must be more than zero
// (zero only with [Config.AllowFreeTiers]) and at most [Config.MaxCharge];
// a refused tier or amount is a [*FieldError] wrapping [ErrUnknownTier] or
// [ErrInvalidAmount], and nothing is written. The price list prices the
// record's plan: the tier on the record's term and interval
// ([PricePlan]). A change to the tier
// and amount the record has (or has pending) is [ErrNoChange], unwritten.
func (p *Periods) ChangeTier(ctx context.Context, subscriptionID, tier string, amount Amount, downgrade bool) (Change, error) {
	c := p.c
	// What needs no record is refused before anything is read: the tier
	// name, and without a price list the amount itself. A price list
	// prices the record's plan (its term and interval), read under the lock.
	given := amount
	if c.cfg.Prices == nil || !validTierName(tier) {
		if _, err := c.priceOf(ctx, PricePlan{Tier: tier}, amount); err != nil {
			return Change{}, fmt.Errorf("change tier %s: %w", subscriptionID, err)
		}
	}
	return c.admin(ctx, opChangeTier, subscriptionID, func(ctx context.Context, cur, next *Period, _ time.Time) ([]*Period, error) {
		amount, err := c.priceOf(ctx, PricePlan{Tier: tier, Term: cur.Term, Interval: cur.Interval}, given)
		if err != nil {
			return nil, err
		}
		if err := sameTier(cur, tier, amount, downgrade); err != nil {
			return nil, err // a change to what it is writes no history row
		}
		if cur.IsTrial() {
			// Nothing is charged in a trial: the first charge follows the
			// new plan, whether it is an upgrade or a downgrade.
			next.ReceiptTierName, next.TrialAmount = tier, amount
			next.IsPendingDowngrade, next.PendingTierName, next.PendingAmount = false, "", 0
			return nil, nil
		}
		// While a trial runs (its period completed, the first paid one not
		// charged yet) a downgrade too sets that first charge.
		if downgrade && !firstAfterTrial(cur) {
			next.IsPendingDowngrade, next.PendingTierName, next.PendingAmount = true, tier, amount
			return nil, nil
		}
		next.ReceiptTierName, next.Amount = tier, amount
		next.IsPendingDowngrade, next.PendingTierName, next.PendingAmount = false, "", 0
		return nil, nil
	})
}

// Reactivate opens a new SCHEDULED record for a user whose subscription
// ended (REACTIVATION, user-reactivated), billed on date with the tier,
// amount, term and Friday week of the user's latest record. The user must
// have no SCHEDULED, ERROR, ACHSENT or PAUSED record ([ErrNotCollectible]
// otherwise; an [*InFlightError] when such a record's attempt is in
// flight). An ACH debit given up on past [Config.ACHSettlementDeadline] is
// STALE and no longer blocks reactivation.
//
// The date is read as [Periods.Move] reads it. It must not
// be before the end of the user's last COMPLETED period (its next billing
// date by its own term, interval and anchor), so that no paid day is
// billed again; otherwise nothing is written and the error is a
// [*FieldError] wrapping [ErrInvalidDate] that names the paid period and
// the first date not paid for. A date whose schedule would later bill on
// the date of another record of the user is refused the same way, naming
// it: that period could not be opened.
//
// That end date is where a user who cancelled at period end comes back:
// the cancelled renewal, never attempted, is billed on it. Reactivating
// on it reopens that record (SCHEDULED again, with its subscription ID,
// the latest record's plan, and its anchor day and Friday week), one
// write conditional on it as read, its history row appended to the
// cancelled one's: the subscription goes on with no gap and no second
// charge. Any other record on the date (a period charged, waived or
// skipped) refuses it with a [*FieldError] wrapping [ErrInvalidDate]
// naming that record. A write that loses a race with another writer is a
// [*ConflictError] wrapping [ErrConflict]: call again.
func (c *Collector) Reactivate(ctx context.Context, userID string, date time.Time) (Period, error) {
	var created Period
	_, err := c.single(ctx, "reactivate", userID, "", func(ctx context.Context, _ *Report) error {
		var err error
		for pass := 0; ; pass++ {
			created, err = c.reactivateOnce(ctx, userID, date)
			if pass > 0 || !errors.Is(err, ErrAlreadyExists) {
				return lostRace(err)
			}
			// A record appeared on the date since the read: read again.
		}
	})
	return created, err
}

// reactivateOnce is one read and write of [Collector.Reactivate], under
// the user's lock.
func (c *Collector) reactivateOnce(ctx context.Context, userID string, date time.Time) (Period, error) {
	rctx, unread := collectUnreadable(ctx)
	recs, err := c.cfg.Repository.ListByUser(rctx, userID)
	if err != nil {
		return Period{}, err
	}
	now := c.cfg.Clock.Now()
	d, over, err := c.checkReactivate(userID, recs, date, now)
	if err == nil {
		err = refuseBesideUnreadable(*unread, d)
	}
	if err != nil {
		return Period{}, err
	}
	created := reactivated(userID, recs, d, over, c.cfg.NewID(), now)
	if err := c.placeFirst(ctx, EventSubscriptionReactivated, &created, over, recs); err != nil {
		return Period{}, err
	}
	return created, nil
}

// reactivated is the period Reactivate opens for userID, whose records
// are recs, on d: with id, the tier, amount, term and Friday week of the
// user's latest record; or, when over is the cancelled renewal on d
// ([comeBackOn]), that period going on, its ID and anchor kept.
func reactivated(userID string, recs []Period, d time.Time, over *Period, id string, now time.Time) Period {
	last := recs[len(recs)-1]
	created := Period{
		UserID: userID, BillingDate: d, SubscriptionID: id, Amount: last.Amount,
		Status: StatusScheduled, BillingPeriod: BillingPeriod(d), Process: ProcessReactivation,
		UpdatedEvent: UpdatedUserReactivated, Term: last.Term, AnchorDay: d.Day(), Interval: last.Interval, ReceiptTierName: last.ReceiptTierName,
		CreatedDate: now, LastRunDate: now,
	}
	if last.BillingWeek != 0 {
		created.BillingWeek = calendar.FridayWeek(d)
	}
	if last.IsTrial() {
		// A trial's zero is not the plan's price: a reactivation is paid
		// (and brings no second trial).
		created.Amount = last.TrialAmount
	}
	if over != nil {
		// The cancelled renewal goes on: its ID, and its place in the
		// schedule (an anchor on the 31st billed on the 30th stays the 31st).
		created.SubscriptionID = over.SubscriptionID
		if a := over.EffectiveAnchorDay(); anchorFits(a, d) {
			created.AnchorDay = a
		}
		if last.BillingWeek != 0 && over.BillingWeek != 0 {
			created.BillingWeek = over.BillingWeek
		}
	}
	return created
}

// openNext returns the next period's record for a record leaving SCHEDULED
// without an attempt (so the subscription goes on), or nil.
func (c *Collector) openNext(ctx context.Context, cur *Period, now time.Time) ([]*Period, error) {
	if !cur.InitialRunDate.IsZero() {
		return nil, nil
	}
	f, err := c.nextPeriod(ctx, ProcessNotIdentified, cur, now, nil)
	if err != nil || f == nil {
		return nil, err
	}
	return []*Period{f}, nil
}
