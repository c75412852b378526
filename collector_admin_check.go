package billing

import (
	"context"
	"fmt"
	"time"
)

// AdminOp names an admin change of one record, for [Collector.CheckChange].
type AdminOp string

// The admin changes of one record.
const (
	OpWaive      AdminOp = "waive"               // [Collector.Waive]
	OpCancel     AdminOp = "cancel"              // [Collector.Cancel]
	OpPause      AdminOp = "pause"               // [Collector.Pause]
	OpResume     AdminOp = "resume"              // [Collector.Resume]
	OpChangeDate AdminOp = "change billing date" // [Collector.ChangeBillingDate]
	OpChangeTier AdminOp = "change tier"         // [Collector.ChangeTier]
)

// adminOp is what the engine knows of an admin change: the statuses it
// accepts and the change its history row records.
type adminOp struct {
	statuses []Status
	change   EventType
}

// adminOps is the one table of the admin changes, read by the changes
// themselves and by [Collector.CheckChange].
var adminOps = map[AdminOp]adminOp{
	OpWaive:      {[]Status{StatusScheduled, StatusError}, EventWaived},
	OpCancel:     {[]Status{StatusScheduled, StatusError, StatusPaused}, EventCancelled},
	OpPause:      {[]Status{StatusScheduled, StatusPaused}, EventPaused},
	OpResume:     {[]Status{StatusPaused}, EventResumed},
	OpChangeDate: {[]Status{StatusScheduled, StatusError, StatusPaused}, EventBillingDateMoved},
	OpChangeTier: {[]Status{StatusScheduled}, EventTierChanged},
}

// AdminChange is an admin change for [Collector.CheckChange]: the
// operation and the inputs it takes.
type AdminChange struct {
	// Op is the change.
	Op AdminOp
	// Months is the pause of [OpPause], 1 to 120.
	Months int
	// Date is the new billing date of [OpChangeDate].
	Date time.Time
	// Tier and Amount are the tier and amount of [OpChangeTier], as
	// [Collector.ChangeTier] takes them.
	Tier   string
	Amount Amount
	// UserRecords, when not nil, are the user's records ascending by
	// billing date ([Repository.ListByUser]): an [OpChangeDate] is then
	// also checked against the user's other periods, as
	// [Collector.ChangeBillingDate] checks it under the user's lock.
	UserRecords []Subscription
}

// CheckChange reports whether ch may be applied to s as it is now, by the
// rules the change itself applies under the user's lock: the record's
// status (an error wrapping [ErrNotCollectible] naming the status and
// those allowed) and the inputs (a [*FieldError] for a tier, amount or
// date the change refuses or a pause's months (wrapping [ErrInvalidQuery]), a
// [*DateMoveError] for a date among the user's other periods). It reads
// and writes nothing: operator tools call it before they show a change and
// ask for confirmation. Nil does not promise success: the record may change
// before the change is applied, and an attempt in flight on it is resolved
// first.
func (c *Collector) CheckChange(ctx context.Context, ch AdminChange, s *Subscription) error {
	op, ok := adminOps[ch.Op]
	if !ok {
		return fmt.Errorf("%w: unknown admin change %q", ErrInvalidQuery, ch.Op)
	}
	if err := requireStatus(s, op.statuses...); err != nil {
		return fmt.Errorf("%s %s: %w", ch.Op, s.SubscriptionID, err)
	}
	var err error
	switch ch.Op {
	case OpPause:
		err = checkPauseMonths(ch.Months)
	case OpChangeTier:
		_, err = c.priceOf(ctx, ch.Tier, ch.Amount)
	case OpChangeDate:
		var d time.Time
		if d, err = c.billingDay("billing_date", ch.Date, c.cfg.Clock.Now()); err == nil && ch.UserRecords != nil {
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

// CheckReactivate reports whether [Collector.Reactivate] may open a period
// for userID billed on date, the user's records being recs (ascending by
// billing date, as [Repository.ListByUser] returns them), by the rules
// Reactivate applies under the user's lock. It reads and writes nothing.
func (c *Collector) CheckReactivate(userID string, recs []Subscription, date time.Time) error {
	_, err := c.checkReactivate(userID, recs, date, c.cfg.Clock.Now())
	return err
}

// checkReactivate checks a reactivation of userID, whose records are recs,
// on date at now, and returns the new period's billing date.
func (c *Collector) checkReactivate(userID string, recs []Subscription, date, now time.Time) (time.Time, error) {
	if len(recs) == 0 {
		return time.Time{}, fmt.Errorf("%w: user %s has no records to reactivate", ErrNotFound, userID)
	}
	for _, r := range recs {
		if r.InFlight() {
			return time.Time{}, inFlightErr(&r, fmt.Errorf("user %s cannot be reactivated before the attempt's outcome is known", userID))
		}
		if !r.Status.IsTerminal() {
			return time.Time{}, fmt.Errorf("%w: user %s has an open record %s (%s)", ErrNotCollectible, userID, r.SubscriptionID, r.Status)
		}
	}
	d, err := c.billingDay("billing_date", date, now)
	if err != nil {
		return time.Time{}, err
	}
	return d, afterLastPaid("billing_date", d, recs)
}

// afterLastPaid refuses d, the billing date of a new first period (field
// names it), unless it is after the billing date of the last COMPLETED
// record among recs: no paid period is billed again.
func afterLastPaid(field string, d time.Time, recs []Subscription) error {
	for i := len(recs) - 1; i >= 0; i-- {
		if r := &recs[i]; r.Status == StatusCompleted && !d.After(r.BillingDate) {
			return &FieldError{Field: field, Value: d.Format(time.RFC3339), Err: fmt.Errorf(
				"%w: on or before %s, the billing date of the user's last paid period %s", ErrInvalidDate,
				r.BillingDate.UTC().Format(time.RFC3339), r.SubscriptionID)}
		}
	}
	return nil
}

// refuseBesideUnreadable refuses a new first period billed on d while a
// record of the user that cannot be read may be open, or paid on or
// after d (the rules of againstUser and afterLastPaid).
func refuseBesideUnreadable(unread unreadable, d time.Time) error {
	return unread.refuse("an open period, or a paid one on or after the new date", func(at time.Time, st Status) bool {
		return mayBeOpen(at, st) || st == StatusCompleted && (at.IsZero() || !d.After(at))
	})
}

// CheckSubscribe checks req as [Collector.Subscribe] does and says what it
// would do for a user whose records are recs ([Repository.ListByUser]):
// the first period it would write (its dates of writing are those of now;
// Subscribe writes it after every row of the user), or, with Repeated set,
// the period this request key created already. An invalid field is a
// [*FieldError] naming it, and an open period of the user an
// [*OpenSubscriptionError]. It reads and writes nothing: operator tools
// call it before they show a subscription and ask for confirmation.
func (c *Collector) CheckSubscribe(ctx context.Context, req SubscribeRequest, recs []Subscription) (Subscribed, error) {
	if err := checkIdentity(req); err != nil {
		return Subscribed{}, fmt.Errorf("subscribe %s: %w", req.UserID, err)
	}
	if done := repeatOf(req, recs); done.Repeated {
		return done, nil
	}
	sub, err := c.newSubscription(ctx, req, c.cfg.Clock.Now())
	if err == nil {
		err = againstUser(&sub, recs)
	}
	if err != nil {
		return Subscribed{}, fmt.Errorf("subscribe %s: %w", req.UserID, err)
	}
	return Subscribed{Subscription: sub}, nil
}
