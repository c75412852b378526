package billing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Coming back: a user who cancels at period end keeps what they paid for
// until the paid period ends, and the renewal that would have charged
// them on that day stays in the table as a CANCELLED record that was
// never attempted. Coming back on that very day — the one date with
// neither a gap nor a second charge — puts the new first period where
// that record is: the record is reopened (SCHEDULED or PAUSED again) by
// one write conditional on it as read, with its history row after the
// cancelled one's, rather than added beside it, which its key forbids.

// comeBackOn returns the record among recs, a user's records, that a new
// first period billed on d takes the place of: the CANCELLED period on d
// that was never attempted, or nil when no record is on d. Any other
// record on d cannot be billed again or reopened: the error is a
// [*FieldError] (field names the date) wrapping [ErrInvalidDate] that
// names it.
func comeBackOn(field string, d time.Time, recs []Period) (*Period, error) {
	for i := range recs {
		r := &recs[i]
		if !sameSecond(r.BillingDate, d) {
			continue
		}
		if r.Status == StatusCancelled && !r.Attempted() {
			return r, nil
		}
		why := "its status is not a cancelled renewal"
		if r.Status == StatusCancelled {
			why = "it was attempted (charged, asked for or declined)"
		}
		return nil, &FieldError{Field: field, Value: d.Format(time.RFC3339), Err: fmt.Errorf(
			"%w: the user's period %s (%s) is billed on %s and cannot be reopened: %s; choose another date",
			ErrInvalidDate, r.SubscriptionID, r.Status, r.BillingDate.UTC().Format(time.RFC3339), why)}
	}
	return nil, nil
}

// placeFirst writes sub, a new first period of its user whose records are
// recs, with its history row recording change: added (see addPeriod), or,
// when over is the cancelled period on its date ([comeBackOn]), written
// over it as an update conditional on over as read. sub then keeps what
// the store holds of over beyond the record (attributes the library does
// not own) and its key as stored; every field of the record is sub's,
// except that over as the first paid period after a trial
// ([Period.IsAfterTrial]) leaves sub that marker: the user came
// back during the trial, which goes on (TRIALING, the trial-ending
// notice, [Collector.EndTrial]), and over's end of access
// ([Period.AccessEnd]) stays on the record.
// Its creation and last-run dates are after every row of the user.
func (c *Collector) placeFirst(ctx context.Context, change EventType, sub, over *Period, recs []Period) error {
	if over == nil {
		return c.addPeriod(ctx, change, sub, recs)
	}
	sub.BillingDate, sub.BillingPeriod, sub.Stored = over.BillingDate, BillingPeriod(over.BillingDate), over.Stored
	if over.IsAfterTrial() && !sub.IsTrial() {
		// The first paid period after a trial, cancelled during the trial:
		// coming back on it goes on with the trial, whose end it is.
		sub.AfterTrial = true
	}
	if !over.AccessEnd.IsZero() {
		// A cancellation now refunded the time after it: it stays unpaid.
		sub.AccessEnd = over.AccessEnd
	}
	sub.Change = change
	defer func() { sub.Change = "" }()
	for i := range recs {
		sub.LastRunDate = runTime(&recs[i], sub.LastRunDate)
	}
	for i := 0; ; i++ {
		sub.CreatedDate = sub.LastRunDate
		err := c.cfg.Repository.Update(ctx, over, sub)
		if !isHistoryKeyConflict(err) || i == historyKeyRetries {
			return err
		}
		sub.LastRunDate = sub.LastRunDate.Add(time.Millisecond)
	}
}

// lostRace returns err, except that a write refused because its key was
// taken — by a record another writer put there after this call read the
// user's records — is a [*ConflictError] wrapping [ErrConflict] only:
// the call may be repeated, and judges what it then reads. Lifecycle
// calls never answer [ErrAlreadyExists].
func lostRace(err error) error {
	if !errors.Is(err, ErrAlreadyExists) {
		return err
	}
	var ce *ConflictError
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	out := *ce
	out.Err, out.Taken = ErrConflict, false
	out.Reason += " (written by another writer meanwhile; repeat the call)"
	return &out
}

// anchorFits reports whether anchor, a day of the month, bills on d's
// day in d's month: the day itself, or a later one on the month's last
// day.
func anchorFits(anchor int, d time.Time) bool {
	return min(anchor, daysIn(d.Year(), d.Month())) == d.Day()
}

// keyTaken returns err, the error of an admin write of cur as next,
// except that a key taken by a record another writer put there after the
// change read the user's records is no [ErrAlreadyExists]: a move onto
// it ([Periods.Move]) is a [*DateMoveError] naming that
// record, as when it was there before, and a period to open (the one
// after a waived record) a [*ConflictError] wrapping [ErrConflict]
// (see [lostRace]).
func (c *Collector) keyTaken(ctx context.Context, cur, next *Period, err error) error {
	var ce *ConflictError
	if errors.As(err, &ce) && ce.Taken {
		if r, gerr := c.cfg.Repository.Get(ctx, next.UserID, next.BillingDate); gerr == nil && r.SubscriptionID != cur.SubscriptionID {
			return newDateMoveError(cur, next.BillingDate, &r, r.BillingDate.After(cur.BillingDate))
		}
	}
	return lostRace(err)
}
