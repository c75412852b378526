package billing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dynabill/billing/internal/calendar"
)

// This file holds the calls an operator (a console, a support tool) makes
// on one period of a user: retry it now, waive it. Like the calls that
// take a user ([Collector.Cancel] and its siblings) they take a
// request key, so a form sent twice (a double click, the back button and a
// second submit) is one request: the repeat answers what the first call
// did, marked Repeated, and changes nothing more. [Periods.Repay]
// and [Periods.WaiveByID] stay for hosts that key requests themselves.

// PeriodRequest names one period of a user and the request of an
// operator's call on it ([Periods.Retry], [Periods.Waive]).
type PeriodRequest struct {
	// UserRequest is the user, the request key, and who asks and why
	// (Operator and Reason, recorded on the history row of the change).
	UserRequest
	// PeriodID is the period: a [Period.SubscriptionID] of the user.
	// A period of another user is not found. Required.
	PeriodID string
}

// RetryOutcome is what a retry of a period came to.
type RetryOutcome string

// The outcomes of [Periods.Retry].
const (
	// RetryCollected: the processor took the payment; the period is
	// COMPLETED.
	RetryCollected RetryOutcome = "collected"
	// RetryDeclined: the processor declined; the period is ERROR, with the
	// reason in PaymentError.
	RetryDeclined RetryOutcome = "declined"
	// RetryPending: an ACH debit awaits its settlement (ACHSENT).
	RetryPending RetryOutcome = "pending"
	// RetryRateLimited: the processor refused the call before acting on
	// it; nothing was charged and the period is as it was.
	RetryRateLimited RetryOutcome = "rate-limited"
	// RetryStale: the period was older than the stale threshold and was
	// given up on (STALE) instead of charged.
	RetryStale RetryOutcome = "stale"
	// RetryNotCharged: nothing was presented to the processor (a period
	// of zero completed without it).
	RetryNotCharged RetryOutcome = "not charged"
)

// RetryResult is what [Periods.Retry] did.
type RetryResult struct {
	// Outcome is what the retry came to.
	Outcome RetryOutcome
	// Period is the period after the retry; on a repeat, as the history
	// row of the first call recorded it.
	Period Period
	// Repeated reports that the request key had been answered before for
	// this same request: nothing was presented to the processor, and
	// Outcome and Period are the first call's.
	Repeated bool
	// Report counts the call's work, as [Periods.Repay]'s
	// report does; empty on a repeat.
	Report *Report
}

// Retry charges the user's period req.PeriodID now, whatever the
// retry policy says, as [Periods.Repay] does (process
// MANUAL_REPAYMENT, the legacy value of a charge asked for outside the
// runs): an ERROR period, or a SCHEDULED one that is due. It is an
// operator's call, keyed: the history row of the outcome records the
// request (with its Operator and Reason), and a repeat of the key with the
// same parameters answers the first call's outcome, Repeated set, without
// presenting anything to the processor, whatever that outcome was
// (collected, declined, pending). Operator and Reason are not compared: a
// repeat with a reason typed anew is the same request, and the row keeps
// the first. The key given again for another period, or first used for
// another call, is a [*RequestKeyError].
//
// A period whose attempt is in flight is not charged again: its attempt
// is resolved (its request replayed with the same idempotency key, or
// looked up), and the outcome is this call's, recorded with its request.
// So a form sent again while the first call's attempt is unresolved
// resolves that same attempt and never starts another; when it stays
// unknown the error is an [*InFlightError]. A call the processor refused
// before acting on it (rate limited) records nothing: its repeat tries
// again, as nothing was charged.
//
// It needs [Config.History] to read the requests back
// ([ErrInvalidRequest] without it). A period that is not ERROR or a due
// SCHEDULED one is refused with an error wrapping [ErrNotCollectible].
func (p *Periods) Retry(ctx context.Context, req PeriodRequest) (RetryResult, error) {
	c := p.c
	fail := func(err error) (RetryResult, error) {
		return RetryResult{}, fmt.Errorf("retry period %s of user %s: %w", req.PeriodID, req.UserID, err)
	}
	kr := newKeyedRequest("retry now", req.RequestKey).field("Period", req.PeriodID)
	if err := c.checkPeriodRequest(req); err != nil {
		return fail(err)
	}
	kr = withActor(kr, req.UserRequest)
	var out RetryResult
	rep, err := c.single(ctx, "retry now", req.UserID, req.PeriodID, func(ctx context.Context, rep *Report) error {
		first, ok, err := c.repeatOf(ctx, req, kr)
		if err != nil {
			return err
		}
		if ok {
			out = RetryResult{Outcome: retryOutcomeOf(&first), Period: first, Repeated: true}
			return nil
		}
		found, err := c.periodOf(ctx, req)
		if err != nil {
			return err
		}
		cur, err := c.reread(ctx, &found)
		if err != nil {
			return err
		}
		now := c.cfg.Clock.Now()
		if ok, why := c.eligible(ProcessManualRepayment, &cur, now); !ok && !c.staleable(ProcessManualRepayment, &cur, now) && !cur.InFlight() {
			return fmt.Errorf("%w: %s is %s: %s", ErrNotCollectible, req.PeriodID, cur.Status, why)
		}
		// Every row this attempt writes (its outcome, or a resolved
		// attempt's) records the request.
		actx := context.WithValue(ctx, attemptRequestKey{}, kr.encode())
		if err := c.attempt(actx, ProcessManualRepayment, &cur, rep); err != nil {
			return err
		}
		after, err := c.reread(ctx, &cur)
		if err != nil {
			return err
		}
		out = RetryResult{Outcome: retryOutcomeOfReport(rep, &after), Period: after}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if !out.Repeated {
		out.Report = rep
	}
	return out, nil
}

// Waive forgives the user's period req.PeriodID without payment
// (WAIVED), as [Periods.WaiveByID] does: a SCHEDULED or ERROR period; one
// never attempted opens the next period. It is an operator's call, keyed
// as the calls that take a user are (see [Collector.ChangePlan] for what
// they share): its history row records the request with its Operator and
// Reason, a repeat of the key with the same parameters answers the first
// call's change (Repeated set) and writes nothing, and the key given again
// with other parameters is a [*RequestKeyError]. An attempt in flight on
// any period of the user is resolved first, or the waive is refused
// ([*InFlightError]); a period the processor collected meanwhile refuses
// it ([ErrNotCollectible]).
func (p *Periods) Waive(ctx context.Context, req PeriodRequest) (UserChange, error) {
	c := p.c
	if err := c.checkPeriodRequest(req); err != nil {
		return UserChange{}, fmt.Errorf("waive period %s of user %s: %w", req.PeriodID, req.UserID, err)
	}
	kr := newKeyedRequest("waive", req.RequestKey).field("Period", req.PeriodID)
	return c.byUser(ctx, req.UserRequest, kr, opWaive, func(recs []Period, kr keyedRequest, _ time.Time) ([]Period, keyedRequest, error) {
		for _, r := range recs {
			if r.SubscriptionID == req.PeriodID {
				return []Period{r}, kr, nil // its status is checked by the call
			}
		}
		return nil, kr, fmt.Errorf("%w: user %s has no period %s", ErrNotFound, req.UserID, req.PeriodID)
	}, func(ctx context.Context, id string) (Change, error) { return c.Periods().WaiveByID(ctx, id) })
}

// checkPeriodRequest checks what needs no record: the identity, the
// actor, the period ID, and a history to read requests back from.
func (c *Collector) checkPeriodRequest(req PeriodRequest) error {
	if err := checkIdentity(SubscribeRequest{UserID: req.UserID, RequestKey: req.RequestKey}); err != nil {
		return err
	}
	if err := checkActor(req.UserRequest); err != nil {
		return err
	}
	if req.PeriodID == "" || len(req.PeriodID) > maxUserID || !utf8.ValidString(req.PeriodID) ||
		strings.ContainsFunc(req.PeriodID, unicode.IsControl) {
		return requestField("PeriodID", req.PeriodID, "1 to %d bytes of UTF-8 without control characters required", maxUserID)
	}
	if c.cfg.History == nil {
		return fmt.Errorf("%w: an operator's call reads its request back from the history: Config.History is required", ErrInvalidRequest)
	}
	return nil
}

// periodOf reads the period req names and checks that it is the user's:
// a period of another user is not found, as an unknown ID is.
func (c *Collector) periodOf(ctx context.Context, req PeriodRequest) (Period, error) {
	s, err := c.cfg.Repository.GetByID(ctx, req.PeriodID)
	if err != nil {
		return Period{}, err
	}
	if s.UserID != req.UserID {
		return Period{}, fmt.Errorf("%w: user %s has no period %s", ErrNotFound, req.UserID, req.PeriodID)
	}
	return s, nil
}

// repeatOf answers whether req's key was answered before: the period as
// the latest history row recording the key left it. The key recorded for
// a request with other parameters (another call among them) is a
// [*RequestKeyError].
func (c *Collector) repeatOf(ctx context.Context, req PeriodRequest, kr keyedRequest) (Period, bool, error) {
	rows, err := c.cfg.History.ListByUser(ctx, req.UserID)
	if err != nil {
		return Period{}, false, fmt.Errorf("read the history: %w", err)
	}
	first, done := firstRequest(rows, req.RequestKey)
	if first == nil {
		return Period{}, false, nil
	}
	if err := kr.reused(req.UserID, *first); err != nil {
		return Period{}, false, err
	}
	var last *Period
	for i := range done {
		if done[i].After.SubscriptionID == req.PeriodID {
			last = &done[i].After
		}
	}
	if last == nil {
		return Period{}, false, nil
	}
	return *last, true, nil
}

// retryOutcomeOf is the outcome a history row of a retry records.
func retryOutcomeOf(s *Period) RetryOutcome {
	switch s.Status {
	case StatusCompleted:
		if s.Attempt == 0 {
			return RetryNotCharged
		}
		return RetryCollected
	case StatusError:
		return RetryDeclined
	case StatusACHSent:
		return RetryPending
	case StatusStale:
		return RetryStale
	}
	return RetryNotCharged
}

// retryOutcomeOfReport is the outcome of a retry that made rep and left
// the period after.
func retryOutcomeOfReport(rep *Report, after *Period) RetryOutcome {
	switch {
	case rep.Collected > 0:
		return RetryCollected
	case rep.Declined > 0:
		return RetryDeclined
	case rep.Pending > 0:
		return RetryPending
	case rep.Stale > 0:
		return RetryStale
	case rep.RateLimited > 0:
		return RetryRateLimited
	}
	return retryOutcomeOf(after)
}

// checkActor checks a request's Operator and Reason.
func checkActor(ur UserRequest) error {
	for _, f := range []struct {
		name, value string
		breaks      bool
	}{{"Operator", ur.Operator, false}, {"Reason", ur.Reason, true}} {
		bad := func(r rune) bool { return unicode.IsControl(r) && !(f.breaks && (r == '\n' || r == '\r' || r == '\t')) }
		if len(f.value) > MaxActorLen || !utf8.ValidString(f.value) || strings.ContainsFunc(f.value, bad) {
			return requestField(f.name, f.value, "at most %d bytes of UTF-8 without control characters", MaxActorLen)
		}
	}
	return nil
}

// withActor records who asks and why with the request. They are not among
// its fields (a repeat is not compared on them): the same form sent again
// with its reason typed anew is the same request, and the rows keep the
// first call's.
func withActor(kr keyedRequest, ur UserRequest) keyedRequest {
	if ur.Operator != "" {
		kr = kr.set("operator", ur.Operator)
	}
	if ur.Reason != "" {
		kr = kr.set("reason", ur.Reason)
	}
	return kr
}

// stampRequest sets on next, a version to write, the request its history
// row records (text, as keyedRequest encodes it; "" for none) and who made
// it and why.
func stampRequest(next *Period, text string) {
	next.Request = text
	if kr, ok := parseKeyedRequest(text); ok {
		next.Operator, next.Reason = kr.get("operator"), kr.get("reason")
	}
}

// attemptRequestKey carries in the context of an operator's retry the
// request the rows of its attempt record ([Periods.Retry]).
type attemptRequestKey struct{}

// stampAttemptRequest sets the request of an operator's retry, when ctx
// carries one, on next, a version the retry writes.
func stampAttemptRequest(ctx context.Context, next *Period) {
	if text, ok := ctx.Value(attemptRequestKey{}).(string); ok {
		stampRequest(next, text)
	}
}

// Periods holds the calls an operator makes on one billing period by its
// ID: collect or retry it now, waive it, cancel it, move its date, pause or
// resume it, change its tier. A host acting for its users calls the
// by-user methods of [Collector] instead ([Periods.Cancel],
// [Periods.Pause], ...); these are for a support console or a script
// that has looked the period up. [Collector.Periods] returns it.
type Periods struct{ c *Collector }

// Periods returns the operator's calls on single periods.
func (c *Collector) Periods() *Periods { return &Periods{c: c} }

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
		if cur.IsOneOff() && op != opWaive && op != opCancel {
			// It charges a change made already: forgiven or cancelled,
			// never changed.
			return fmt.Errorf("%s %s: %w", op, subscriptionID,
				refused(op, "it is a one-off charge of a plan change (billing_charge_of %s), not a period: waive or cancel it, or collect it", cur.ChargeOf))
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
	return c.admin(ctx, opPause, subscriptionID, pauseEdit(months))
}

// pauseEdit is the edit of a pause for months: an operator's, or the
// final action of a dunning ([FinalPause]).
func pauseEdit(months int) func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
	return func(_ context.Context, _, next *Period, _ time.Time) ([]*Period, error) {
		next.Status, next.PauseDurationMonths = StatusPaused, months
		next.UpdatedEvent = ""
		if months == 1 {
			next.UpdatedEvent = UpdatedPausePendingResume
		}
		return nil, nil
	}
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
	return c.admin(ctx, opChangeDate, subscriptionID, c.moveDate(date, ""))
}

// moveDate is the edit of a record's move to date ([Periods.Move]). With
// a request key (a move by user, [Collector.MoveBillingDate]) a SCHEDULED
// record may move into the paid period before it: the paid period's
// unused time from the new date on is credited on it (a proration
// [Adjustment] of that request) instead of the move being refused.
func (c *Collector) moveDate(date time.Time, prorateKey string) func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
	return c.moveInto(date, prorateKey != "", prorateKey, true)
}

// moveInto is moveDate, a move into the paid period allowed when intoPaid,
// which ends that period at date with a line of request creditKey: its
// unused time credited, or credit false, nothing (no proration).
func (c *Collector) moveInto(date time.Time, intoPaid bool, creditKey string, credit bool) func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
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
		prorate := intoPaid && cur.Status == StatusScheduled
		if err := checkDateMove(cur, d, recs, prorate); err != nil {
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
		if prorate && creditKey != "" {
			return nil, c.creditUnused(recs, cur, next, d, creditKey, credit)
		}
		return nil, nil
	}
}

// creditUnused adds to next (cur moved or changed, as read) the credit for
// the unused time from at on of the paid period before cur, if at is
// inside it: what a charge from at on bills again. Without credit the
// line is zero: it only ends the paid period at at ([Adjustment.EndsPeriod]).
func (c *Collector) creditUnused(recs []Period, cur, next *Period, at time.Time, key string, credit bool) error {
	line, ok, err := c.unusedCredit(recs, cur, at, key, credit)
	if err != nil || !ok {
		return err
	}
	next.Adjustments = append(slices.Clone(cur.Adjustments), line)
	return next.checkAdjustments()
}

// unusedCredit is the line that ends the paid period before cur at at
// ([Adjustment.EndsPeriod]): its unused time credited, or nothing when
// not credit. ok is false when at is inside no paid period.
func (c *Collector) unusedCredit(recs []Period, cur *Period, at time.Time, key string, credit bool) (Adjustment, bool, error) {
	pc, err := prorateChange(recs, cur, cur.ReceiptTierName, 0, at, centsPerMinorUnit(c.cfg.Invoicing.Currency))
	switch {
	case errors.Is(err, errNoProration):
		return Adjustment{}, false, nil
	case err != nil:
		return Adjustment{}, false, err
	}
	line := pc.lines[0]
	line.Request, line.EndsPeriod = key, true
	if !credit {
		line.Amount, line.Description = 0, line.Description+" (not credited)"
	}
	return line, true, nil
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
// record, or inside a paid period unless intoPaid (the move credits it).
// recs are the user's records ascending by billing date.
func checkDateMove(cur *Period, d time.Time, recs []Period, intoPaid bool) error {
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
	if paid, end := paidBefore(cur, recs); paid != nil && d.Before(end) && !intoPaid {
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
	return p.c.changeTier(ctx, subscriptionID, tier, amount, downgrade, nil, nil)
}

// changeTier is [Periods.ChangeTier], adding lines (a plan change's
// proration) to the record's adjustments with the new plan, after guard.
func (c *Collector) changeTier(ctx context.Context, subscriptionID, tier string, amount Amount, downgrade bool, lines []Adjustment, now *chargeNow, guard ...func(*Period) error) (Change, error) {
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
		if len(lines) > 0 && now != nil {
			// The lines are charged at once, by a record of their own
			// written with the change.
			o := oneOff(now.id, cur, tier, lines, now.date, nil)
			o.Change = adminOps[opChangeTier].change // written by the change
			return []*Period{o}, nil
		}
		if len(lines) > 0 {
			next.Adjustments = append(slices.Clone(cur.Adjustments), lines...)
			if err := next.checkAdjustments(); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}, guard...)
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
	carryTo(f, cur, carryForgiven)
	return []*Period{f}, nil
}

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
	opCoupon      opName = "apply coupon"        // [Collector.ApplyCoupon]
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
	opCoupon:      {[]Status{StatusScheduled}, EventCouponApplied},
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
			err = checkDateMove(s, d, ch.UserRecords, false)
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
		if r.Status != StatusCompleted || r.IsOneOff() {
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

// staleMargin is how much newer than the stale limit
// ([Config.OldSubscriptionDays] before now) a billing date must be for the
// engine to set it: a date a caller gives ([Collector.Subscribe],
// [Periods.Move], [Collector.Reactivate]) and the date a
// record too old to collect goes on at. The limit moves with the clock: a
// date accepted minutes inside it would be past it at the next run, marked
// STALE and not charged, and the period lost. With the margin, a run within
// a day of the date being set still collects it.
const staleMargin = 24 * time.Hour

// staleAge is the age (now minus billing date) past which a SCHEDULED or
// ERROR record is marked STALE instead of collected.
func (c *Collector) staleAge() time.Duration {
	return time.Duration(c.cfg.OldSubscriptionDays) * 24 * time.Hour
}

// oldestSettable is the oldest billing date the engine sets at now: the
// stale limit plus staleMargin.
func (c *Collector) oldestSettable(now time.Time) time.Time {
	return now.Add(-c.staleAge() + staleMargin)
}

// billingDay reads a date a caller gives for a billing date. A billing
// date is a wall-clock date and time in UTC: date's year, month, day and
// time of day are taken as written, in UTC, to the second, so an offset
// never moves the day (2024-04-16T09:30:00+14:00 is the 16th at 09:30
// UTC, not the 15th). It must be
//
//   - a date of the years 1 to 9999;
//   - at least staleMargin newer than [Config.OldSubscriptionDays]
//     before now: a record older than that is marked stale instead of
//     collected, so a date at or past the limit would lose the period (with
//     the default 30 days, a date may be up to 29 days old);
//   - no later than [MaxDateAhead] after now.
//
// Anything else is a [*FieldError] naming field and wrapping
// [ErrInvalidDate].
func (c *Collector) billingDay(field string, date, now time.Time) (time.Time, error) {
	refuse := func(why string, args ...any) (time.Time, error) {
		return time.Time{}, &FieldError{Field: field, Value: date.Format(time.RFC3339),
			Err: fmt.Errorf("%w: %s", ErrInvalidDate, fmt.Sprintf(why, args...))}
	}
	if date.IsZero() {
		return refuse("a date is required")
	}
	y, m, d := date.Date()
	if y < 1 || y > 9999 {
		return refuse("the year must be 1 to 9999")
	}
	h, mi, s := date.Clock()
	day := time.Date(y, m, d, h, mi, s, 0, time.UTC)
	oldest := c.oldestSettable(now)
	switch {
	case day.Before(oldest):
		return refuse("before %s: a record more than %d days old is marked stale, not collected, "+
			"so a billing date must be at least %g hours newer than that for the next run to collect it",
			oldest.UTC().Format(time.RFC3339), c.cfg.OldSubscriptionDays, staleMargin.Hours())
	case day.After(now.Add(MaxDateAhead)):
		return refuse("after %s: more than three years ahead", now.Add(MaxDateAhead).UTC().Format(time.DateOnly))
	}
	return day, nil
}
