package billing

import (
	"context"
	"fmt"
	"time"
)

// opName names an admin change of one record, for checkChange.
type opName string

// The admin changes of one record.
const (
	opWaive       opName = "waive"               // [Periods.WaiveByID]
	opCancel      opName = "cancel"              // [Periods.Cancel]
	opPause       opName = "pause"               // [Periods.Pause]
	opResume      opName = "resume"              // [Periods.Resume]
	opChangeDate  opName = "change billing date" // [Periods.Move]
	opChangeTier  opName = "change tier"         // [Periods.ChangeTier]
	opEndTrial    opName = "end trial"           // [Collector.EndTrial]
	opExtendTrial opName = "extend trial"        // [Collector.ExtendTrial]
)

// adminOp is what the engine knows of an admin change: the statuses it
// accepts and the change its history row records.
type adminOp struct {
	statuses []Status
	change   EventType
}

// adminOps is the one table of the admin changes, read by the changes
// themselves and by checkChange.
var adminOps = map[opName]adminOp{
	opWaive:       {[]Status{StatusScheduled, StatusError}, EventWaived},
	opCancel:      {[]Status{StatusScheduled, StatusError, StatusPaused}, EventCancelled},
	opPause:       {[]Status{StatusScheduled, StatusPaused}, EventPaused},
	opResume:      {[]Status{StatusPaused}, EventResumed},
	opChangeDate:  {[]Status{StatusScheduled, StatusError, StatusPaused}, EventBillingDateMoved},
	opChangeTier:  {[]Status{StatusScheduled}, EventTierChanged},
	opEndTrial:    {[]Status{StatusScheduled}, EventTrialChanged},
	opExtendTrial: {[]Status{StatusScheduled}, EventTrialChanged},
}

// adminChange is an admin change for checkChange: the
// operation and the inputs it takes.
type adminChange struct {
	// Op is the change.
	Op opName
	// Months is the pause of opPause, 1 to 120.
	Months int
	// Date is the new billing date of opChangeDate.
	Date time.Time
	// Tier and Amount are the tier and amount of opChangeTier, as
	// [Periods.ChangeTier] takes them.
	Tier   string
	Amount Amount
	// UserRecords, when not nil, are the user's records ascending by
	// billing date ([Repository.ListByUser]): an opChangeDate is then
	// also checked against the user's other periods, as
	// [Periods.Move] checks it under the user's lock.
	UserRecords []Period
}

// checkChange reports whether ch may be applied to s as it is now, by the
// rules the change itself applies under the user's lock: the record's
// status (an error wrapping [ErrNotCollectible] naming the status and
// those allowed) and the inputs (a [*FieldError] for a tier, amount or
// date the change refuses or a pause's months (wrapping [ErrInvalidQuery]), a
// [*DateMoveError] for a date among the user's other periods). It reads
// and writes nothing: operator tools call it before they show a change and
// ask for confirmation. Nil does not promise success: the record may change
// before the change is applied, and an attempt in flight on it is resolved
// first.
func (c *Collector) checkChange(ctx context.Context, ch adminChange, s *Period) error {
	if _, ok := adminOps[ch.Op]; !ok {
		return fmt.Errorf("%w: unknown admin change %q", ErrInvalidQuery, ch.Op)
	}
	if err := requireStatus(ch.Op, s); err != nil {
		return fmt.Errorf("%s %s: %w", ch.Op, s.SubscriptionID, err)
	}
	var err error
	switch ch.Op {
	case opPause:
		err = checkPauseMonths(ch.Months)
	case opChangeTier:
		_, err = c.priceOf(ctx, PricePlan{Tier: ch.Tier, Term: s.Term, Interval: s.Interval}, ch.Amount)
	case opChangeDate:
		var d time.Time
		if d, err = c.billingDay("billing_date", ch.Date, c.cfg.Clock.Now()); err == nil {
			err = fridayMove(s, d)
		}
		if err == nil && ch.UserRecords != nil {
			err = checkDateMove(s, d, ch.UserRecords)
		}
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", ch.Op, s.SubscriptionID, err)
	}
	return nil
}

// checkPauseMonths refuses a pause of other than 1 to 120 months.
func checkPauseMonths(months int) error {
	if months < 1 || months > 120 {
		return &FieldError{Field: "months", Value: fmt.Sprint(months), Err: fmt.Errorf("%w: pause of %d months, want 1 to 120", ErrInvalidQuery, months)}
	}
	return nil
}

// canReactivate reports whether [Collector.Reactivate] may open a period
// for userID billed on date, the user's records being recs (ascending by
// billing date, as [Repository.ListByUser] returns them), by the rules
// Reactivate applies under the user's lock. It reads and writes nothing.
func (c *Collector) canReactivate(userID string, recs []Period, date time.Time) error {
	_, _, err := c.checkReactivate(userID, recs, date, c.cfg.Clock.Now())
	return err
}

// checkReactivate checks a reactivation of userID, whose records are recs,
// on date at now, and returns the new period's billing date and the
// cancelled period it takes the place of, if any (see [comeBackOn]).
func (c *Collector) checkReactivate(userID string, recs []Period, date, now time.Time) (time.Time, *Period, error) {
	if len(recs) == 0 {
		return time.Time{}, nil, fmt.Errorf("%w: user %s has no records to reactivate", ErrNotFound, userID)
	}
	for _, r := range recs {
		if r.InFlight() {
			return time.Time{}, nil, inFlightErr(&r, fmt.Errorf("user %s cannot be reactivated before the attempt's outcome is known", userID))
		}
		if !r.Status.IsTerminal() {
			return time.Time{}, nil, fmt.Errorf("%w: user %s has an open record %s (%s)", ErrNotCollectible, userID, r.SubscriptionID, r.Status)
		}
	}
	d, err := c.billingDay("billing_date", date, now)
	if err != nil {
		return time.Time{}, nil, err
	}
	if err := afterLastPaid("billing_date", d, recs); err != nil {
		return time.Time{}, nil, err
	}
	over, err := comeBackOn("billing_date", d, recs)
	if err != nil {
		return d, nil, err
	}
	next := reactivated(userID, recs, d, over, "", now)
	return d, over, clearSchedule("billing_date", &next, recs)
}

// clearSchedule refuses sub, a new first period (field names its date),
// when a later period of its schedule would fall on the date of a record
// of the user among recs: a record of the subscription's earlier life
// billed after sub's date (a renewal cancelled before it was charged, a
// waived period). The collector could not open that period, its key being
// taken, and the subscription would be charged up to it and then never
// again. The error is a [*FieldError] wrapping [ErrInvalidDate] that names
// the record and the period that would meet it. A schedule that cannot be
// computed is left to the collector's own checks.
func clearSchedule(field string, sub *Period, recs []Period) error {
	taken := map[int64]*Period{}
	var last time.Time
	first := sub.BillingDate.Truncate(time.Second)
	for i := range recs {
		d := recs[i].BillingDate.Truncate(time.Second)
		if d.After(first) {
			taken[d.Unix()] = &recs[i]
			if d.After(last) {
				last = d
			}
		}
	}
	cur := sub.Clone()
	for n := 2; len(taken) > 0; n++ {
		next, err := followingDate(&cur)
		if err != nil {
			return nil
		}
		d := next.Truncate(time.Second)
		if d.After(last) {
			return nil
		}
		if r := taken[d.Unix()]; r != nil {
			return &FieldError{Field: field, Value: sub.BillingDate.Format(time.RFC3339), Err: fmt.Errorf(
				"%w: the subscription's period %d would be billed on %s, the date of the user's period %s (%s), "+
					"and could not be opened: choose a date whose schedule avoids it, or that date itself to continue that period",
				ErrInvalidDate, n, d.UTC().Format(time.RFC3339), r.SubscriptionID, r.Status)}
		}
		// The period after a trial is a paid one: from it on, the
		// schedule is the plan's, not the trial's end again.
		cur.BillingDate, cur.Status, cur.TrialEnd = next, StatusScheduled, time.Time{}
	}
	return nil
}

// afterLastPaid refuses d, the billing date of a new first period (field
// names it), when it is before the end of a COMPLETED record among recs
// (its next billing date by its own schedule, or the end of access a
// cancellation now put before it: [paidEnd]): the days from d to that
// end are paid for already. The error is a [*FieldError] wrapping
// [ErrInvalidDate] that names the paid period and the first date not
// paid for. A paid period whose schedule cannot be read ends, for this
// rule, a second after its billing date.
func afterLastPaid(field string, d time.Time, recs []Period) error {
	var (
		end  time.Time
		paid *Period
	)
	for i := range recs {
		r := &recs[i]
		if r.Status != StatusCompleted {
			continue
		}
		e, err := paidEnd(r, recs)
		if err != nil {
			e = r.BillingDate.Truncate(time.Second).Add(time.Second)
		}
		if e.After(end) {
			end, paid = e, r
		}
	}
	if paid == nil || !d.Before(end) {
		return nil
	}
	return &FieldError{Field: field, Value: d.Format(time.RFC3339), Err: fmt.Errorf(
		"%w: inside the user's paid period %s (billed %s, paid until %s): the first date not paid for is %s",
		ErrInvalidDate, paid.SubscriptionID, paid.BillingDate.UTC().Format(time.RFC3339),
		end.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))}
}

// refuseBesideUnreadable refuses a new first period billed on d while a
// record of the user that cannot be read may be open, paid on or after
// d, or on d itself (the rules of againstUser, afterLastPaid and
// comeBackOn: what it is cannot be told).
func refuseBesideUnreadable(unread unreadable, d time.Time) error {
	return unread.refuse("an open period, or one on or (paid) after the new date", func(at time.Time, st Status) bool {
		return mayBeOpen(at, st) || st == StatusCompleted && (at.IsZero() || !d.After(at)) || sameSecond(at, d)
	})
}

// checkSubscribe checks req as [Collector.Subscribe] does and says what it
// would do for a user whose records are recs ([Repository.ListByUser]):
// the first period it would write (its dates of writing are those of now;
// Subscribe writes it after every row of the user, in place of the
// cancelled renewal on its date if there is one), or, with Repeated set,
// the period this request key created already. An invalid field is a
// [*FieldError] naming it (a first billing date inside a paid period, or
// on a record that cannot be reopened, one wrapping [ErrInvalidDate]), and
// an open period of the user an [*OpenSubscriptionError]; a trial for a
// user who had one, [ErrTrialUsed] (for which it reads the user's history
// rows). It writes nothing: operator tools call it before they show a
// subscription and ask for confirmation.
func (c *Collector) checkSubscribe(ctx context.Context, req SubscribeRequest, recs []Period) (Subscribed, error) {
	if err := checkIdentity(req); err != nil {
		return Subscribed{}, fmt.Errorf("subscribe %s: %w", req.UserID, err)
	}
	if done := repeatOf(req, recs); done.Repeated {
		return done, nil
	}
	sub, err := c.newSubscription(ctx, req, c.cfg.Clock.Now())
	if err == nil {
		_, err = againstUser(&sub, recs, req.AnchorDay == 0 && !req.FridayBilling)
	}
	if err == nil {
		err = c.checkRepeatTrial(ctx, req, &sub, recs) // reads the history, as Subscribe does
	}
	if err != nil {
		return Subscribed{}, fmt.Errorf("subscribe %s: %w", req.UserID, err)
	}
	return Subscribed{Subscription: sub}, nil
}
