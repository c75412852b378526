package billing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SettlementKind is what happened to a submitted or completed payment.
type SettlementKind string

// The settlement kinds.
const (
	// SettlementSettled: the payment settled, the money arrived: an ACH
	// debit (ACHSENT → COMPLETED), or a payment recorded as declined or
	// given up on that succeeded after all (ERROR or STALE → COMPLETED).
	// See [Collector.ApplySettlement].
	SettlementSettled SettlementKind = "settled"
	// SettlementReturned: the ACH debit came back (ACHSENT → ERROR), and
	// the host is told to send user_subscription_payment_failed.
	SettlementReturned SettlementKind = "returned"
	// SettlementRefunded: a completed payment was refunded (COMPLETED →
	// REFUNDED).
	SettlementRefunded SettlementKind = "refunded"
)

// Settlement is a payment event from the processor (the site-payments
// stream in the legacy service).
type Settlement struct {
	SubscriptionID string         `json:"subscription_id"`
	TransactionID  string         `json:"transaction_id"`
	Kind           SettlementKind `json:"kind"`
	// Reason is the return reason (e.g. "R01 insufficient funds").
	Reason string `json:"reason,omitempty"`
}

// ApplySettlement applies a settlement event under the user's lock.
// Events are idempotent: a replay changes nothing and returns
// changed=false. An event about an attempt still in flight first records
// that attempt's outcome (a replay or lookup); when it stays unknown the
// event is early ([ErrSettlementEarly]: deliver it again later).
//
// A settled event (money taken) is the processor's word on money, and wins
// over what the record says whenever that keeps the customer from paying
// twice:
//
//   - For the record's own transaction it completes an ACHSENT record, and
//     also an ERROR or STALE one: a card declined off-session and
//     confirmed by the customer on-session, or an ACH debit that the
//     retry run's lookup saw fail, or gave up on, and that settled after
//     all. The record becomes COMPLETED once (its history row,
//     [EventPaymentSucceeded], the error cleared), so no retry charges the
//     period again. The legacy ACH stream can deliver the settlement of a
//     debit after its return (a debit settles, then comes back); such a
//     late settlement completes the record as well: the event cannot be
//     told from a recovery, and a period recorded paid for a debit that
//     came back costs the business one period, while a recovery left
//     unrecorded charges the customer twice. (Stripe, where a
//     PaymentIntent that succeeded never fails afterwards, has no such
//     ambiguity; its webhook handler ignores a failure reported after the
//     success.)
//   - For another transaction of a record that is not paid (ERROR,
//     ACHSENT, STALE): an earlier attempt's payment the record no longer
//     carries, e.g. an intent declined, retried with a new one, then
//     confirmed. The record is completed with that transaction (its
//     earlier transactions stay in its history rows). An ACH debit of the
//     record that is still pending is reported in the log: if it settles
//     too, that is a duplicate payment (below).
//   - For another transaction of a record already paid (COMPLETED or
//     REFUNDED): the period was paid twice. Nothing is written; the
//     collector logs a warning, emits [EventDuplicatePayment] naming the
//     duplicate transaction (to refund), and returns an error wrapping
//     [ErrDuplicatePayment] and [ErrTransactionMismatch]; a redelivery
//     reports it again.
//   - For another transaction of a record still SCHEDULED: early, as the
//     record may not have recorded the attempt yet.
//   - For a record forgiven or cancelled after a charge was attempted
//     (WAIVED or CANCELLED, [Period.Attempted]): the customer paid
//     for a period no longer owed. Nothing is written; it is reported as a
//     duplicate payment (below: the warning, [EventDuplicatePayment] to
//     refund, [ErrDuplicatePayment]).
//   - For another record closed without payment (never attempted, PAUSED,
//     PAUSED_SKIPPED): an error, wrapping [ErrIllegalTransition] for its
//     own transaction and [ErrTransactionMismatch] for another.
//
// A settlement that completes an ERROR or STALE record also looks for
// later periods of the user that start before the paid period ends (a
// reactivation after the record was given up on): each is logged and
// reported as [EventPeriodsOverlap], for the host to refund or waive one
// of the two.
//
// A return or refund must name the record's transaction
// ([ErrTransactionMismatch] otherwise; [ErrSettlementEarly] while the
// record is waiting to be collected). A return after the record's return
// changes nothing; a return of a completed payment, and any change the
// transition table forbids, is an error wrapping [ErrIllegalTransition].
func (c *Collector) ApplySettlement(ctx context.Context, s Settlement) (rec Period, changed bool, err error) {
	if s.SubscriptionID == "" || s.TransactionID == "" {
		return Period{}, false, fmt.Errorf("%w: settlement needs subscription and transaction IDs", ErrInvalidQuery)
	}
	found, err := c.cfg.Repository.GetByID(ctx, s.SubscriptionID)
	if err != nil {
		return Period{}, false, err
	}
	_, err = c.single(ctx, "settlement", found.UserID, s.SubscriptionID, func(ctx context.Context, _ *Report) error {
		cur, err := c.reread(ctx, &found)
		if err != nil {
			return err
		}
		// An event about an attempt still in flight: record the attempt's
		// outcome first (a replay or lookup), then apply the event to it.
		if resolved, err := c.resolve(ctx, &cur, &Report{}); err == nil {
			cur = resolved
		} else if !errors.Is(err, ErrAttemptInFlight) {
			return err
		}
		rec = cur
		if s.Kind == SettlementSettled {
			var err error
			rec, changed, err = c.settled(ctx, &cur, s)
			return err
		}
		if cur.TransactionID != s.TransactionID {
			if cur.Status == StatusScheduled || cur.Status == StatusError {
				return fmt.Errorf("%w: %w: %s %s event for %s, record is %s with %q", ErrSettlementEarly, ErrTransactionMismatch,
					s.SubscriptionID, s.Kind, s.TransactionID, cur.Status, cur.TransactionID)
			}
			return fmt.Errorf("%w: %s %s event for %s, record has %q", ErrTransactionMismatch, s.SubscriptionID, s.Kind, s.TransactionID, cur.TransactionID)
		}
		var to Status
		var ev EventType
		switch s.Kind {
		case SettlementReturned:
			if cur.Status == StatusError || (cur.Status == StatusStale && cur.UpdatedEvent == UpdatedACHOverdue) {
				return nil // replay, or the return of a debit given up on: nothing was collected
			}
			to, ev = StatusError, EventPaymentReturned
		case SettlementRefunded:
			if cur.Status == StatusRefunded {
				return nil // replay
			}
			to, ev = StatusRefunded, EventPaymentRefunded
		default:
			return fmt.Errorf("%w: settlement kind %q", ErrInvalidQuery, s.Kind)
		}
		if err := checkTransition(cur.Status, to); err != nil {
			return fmt.Errorf("%s event for %s: %w", s.Kind, s.SubscriptionID, err)
		}
		next, err := c.settle(ctx, &cur, to, ev, s.Reason)
		if err != nil {
			return err
		}
		rec, changed = next, true
		return nil
	})
	return rec, changed, err
}

// settled applies a settled event s to cur (re-read under the user's
// lock, its attempt resolved if it could be) as [Collector.ApplySettlement]
// documents, and returns the record as stored afterwards (cur itself when
// nothing was written) and whether it wrote.
func (c *Collector) settled(ctx context.Context, cur *Period, s Settlement) (Period, bool, error) {
	own := cur.TransactionID == s.TransactionID
	switch {
	case cur.InFlight():
		// Whatever the event is about, the record cannot change before its
		// attempt's outcome is known.
		err := inFlightErr(cur, errors.New("the record's attempt is not resolved"))
		if !own {
			err = fmt.Errorf("%w: record has %q: %w", ErrTransactionMismatch, cur.TransactionID, err)
		}
		return *cur, false, fmt.Errorf("%w: %s %s event for %s: %w", ErrSettlementEarly, s.SubscriptionID, s.Kind, s.TransactionID, err)
	case cur.Status == StatusCompleted || cur.Status == StatusRefunded:
		if own {
			return *cur, false, nil // replay
		}
		return *cur, false, c.duplicatePayment(ctx, cur, s)
	case (cur.Status == StatusWaived || cur.Status == StatusCancelled) && cur.Attempted():
		// A period forgiven or cancelled after a charge was attempted: the
		// customer paid for a period that is no longer owed.
		return *cur, false, c.duplicatePayment(ctx, cur, s)
	case !own && cur.Status == StatusScheduled:
		return *cur, false, fmt.Errorf("%w: %w: %s %s event for %s, record is %s with %q", ErrSettlementEarly, ErrTransactionMismatch,
			s.SubscriptionID, s.Kind, s.TransactionID, cur.Status, cur.TransactionID)
	case !own && cur.Status != StatusError && cur.Status != StatusACHSent && cur.Status != StatusStale:
		return *cur, false, fmt.Errorf("%w: %s %s event for %s, record is %s with %q", ErrTransactionMismatch,
			s.SubscriptionID, s.Kind, s.TransactionID, cur.Status, cur.TransactionID)
	}
	if err := checkTransition(cur.Status, StatusCompleted); err != nil {
		return *cur, false, fmt.Errorf("%s event for %s: %w", s.Kind, s.SubscriptionID, err)
	}
	// A recovery of a period given up on or declined: read the user's later
	// periods before the write, so that an overlap is reported whatever
	// happens after it (a redelivery would find the record paid).
	var overlaps []Period
	if cur.Status == StatusError || cur.Status == StatusStale {
		var err error
		if overlaps, err = c.overlapping(ctx, cur); err != nil {
			return *cur, false, fmt.Errorf("%s event for %s: read the user's later periods: %w", s.Kind, s.SubscriptionID, err)
		}
	}
	next, err := c.settleAs(ctx, cur, StatusCompleted, EventPaymentSucceeded, "", s.TransactionID)
	if err != nil {
		return *cur, false, err
	}
	switch {
	case !own:
		c.cfg.Logger.WarnContext(ctx, "billing: payment of another transaction recorded", "subscription_id", cur.SubscriptionID,
			"transaction_id", s.TransactionID, "previous_status", cur.Status, "previous_transaction_id", cur.TransactionID)
		if cur.Status == StatusACHSent {
			c.cfg.Logger.WarnContext(ctx, "billing: the period's ACH debit is still pending; its settlement would pay the period twice",
				"subscription_id", cur.SubscriptionID, "pending_transaction_id", cur.TransactionID)
		}
	case cur.Status != StatusACHSent:
		c.cfg.Logger.InfoContext(ctx, "billing: payment recorded after the record gave up on it", "subscription_id", cur.SubscriptionID,
			"transaction_id", s.TransactionID, "previous_status", cur.Status, "previous_error", cur.PaymentError)
	}
	for i := range overlaps {
		c.reportOverlap(ctx, &next, &overlaps[i])
	}
	return next, true, nil
}

// duplicatePayment reports a settled payment s for the period cur, which
// another transaction paid already, and returns the error for it.
func (c *Collector) duplicatePayment(ctx context.Context, cur *Period, s Settlement) error {
	c.cfg.Logger.WarnContext(ctx, "billing: duplicate payment", "user_id", cur.UserID, "subscription_id", cur.SubscriptionID,
		"transaction_id", s.TransactionID, "paid_by", cur.TransactionID, "status", cur.Status)
	e := eventFor(EventDuplicatePayment, cur, c.cfg.Clock.Now())
	e.TransactionID = s.TransactionID
	e.Reason = fmt.Sprintf("period %s (%s) was paid by transaction %q", cur.SubscriptionID, cur.Status, cur.TransactionID)
	what := fmt.Sprintf("already paid by %q", cur.TransactionID)
	if cur.Status == StatusWaived || cur.Status == StatusCancelled {
		e.Reason = fmt.Sprintf("period %s was closed without payment (%s)", cur.SubscriptionID, cur.Status)
		what = "closed without payment"
	}
	c.emit(ctx, e)
	return fmt.Errorf("%w: %w: %s settled by %s, %s (%s)", ErrDuplicatePayment, ErrTransactionMismatch,
		cur.SubscriptionID, s.TransactionID, what, cur.Status)
}

// overlapping returns the user's periods after cur that start before cur's
// period ends and are billed or may still be: the periods a payment of cur
// would pay twice.
func (c *Collector) overlapping(ctx context.Context, cur *Period) ([]Period, error) {
	if cur.IsOneOff() {
		return nil, nil // it pays a change, not time
	}
	end, err := followingDate(cur)
	if err != nil {
		return nil, err
	}
	later, _, err := c.later(ctx, cur)
	if err != nil {
		return nil, err
	}
	var out []Period
	for _, r := range later {
		if r.SubscriptionID == cur.SubscriptionID || !r.BillingDate.Before(end) || r.IsOneOff() {
			continue
		}
		switch r.Status {
		case StatusScheduled, StatusError, StatusACHSent, StatusCompleted, StatusPaused:
			out = append(out, r)
		}
	}
	return out, nil
}

// reportOverlap logs and emits [EventPeriodsOverlap] for the period later,
// which starts inside the period paid recorded as paid.
func (c *Collector) reportOverlap(ctx context.Context, paid, later *Period) {
	c.cfg.Logger.WarnContext(ctx, "billing: paid period overlaps a later one", "user_id", paid.UserID,
		"subscription_id", paid.SubscriptionID, "transaction_id", paid.TransactionID,
		"later_subscription_id", later.SubscriptionID, "later_billing_date", later.BillingDate, "later_status", later.Status)
	e := eventFor(EventPeriodsOverlap, paid, paid.LastRunDate)
	e.RelatedSubscriptionID = later.SubscriptionID
	e.Reason = fmt.Sprintf("period %s billed %s (%s) starts inside the period %s paid by transaction %q",
		later.SubscriptionID, later.BillingDate.UTC().Format(time.RFC3339), later.Status, paid.SubscriptionID, paid.TransactionID)
	c.emit(ctx, e)
}

// settle writes cur's move to status to (COMPLETED, ERROR, REFUNDED or,
// for an overdue ACH debit, STALE) with its history row, and emits ev.
func (c *Collector) settle(ctx context.Context, cur *Period, to Status, ev EventType, reason string) (Period, error) {
	return c.settleAs(ctx, cur, to, ev, reason, cur.TransactionID)
}

// settleAs is settle recording txn as the record's transaction.
func (c *Collector) settleAs(ctx context.Context, cur *Period, to Status, ev EventType, reason, txn string) (Period, error) {
	now := c.cfg.Clock.Now()
	next := cur.Clone()
	next.Status = to
	next.TransactionID = txn
	next.LastRunDate = runTime(cur, now)
	switch to {
	case StatusCompleted:
		next.CompletionDate, next.PaymentError, next.NoRetry = next.LastRunDate, "", false
	case StatusError:
		next.PaymentError = reason
		if next.PaymentError == "" {
			next.PaymentError = "ACH returned"
		}
	case StatusRefunded:
		next.CompletionDate = next.LastRunDate
	case StatusStale:
		next.CompletionDate, next.UpdatedEvent = next.LastRunDate, UpdatedACHOverdue
	}
	// A return is the decline of the attempt that submitted the debit.
	ended := c.dunningMove(cur, &next, cur.LastAttempt.Process, DeclineOther, "", next.LastRunDate)
	if err := c.write(ctx, ev, cur, &next, nil); err != nil {
		return Period{}, err
	}
	e := eventFor(ev, &next, next.LastRunDate)
	e.Reason = reason
	c.emit(ctx, e)
	if ended {
		c.emitDunningEnded(ctx, &next)
	}
	return next, nil
}

// achOverdue handles an ACHSENT record found by the retry run: past the
// settlement deadline it asks the processor (when the provider offers
// [PaymentLookup]) and records a settled or returned debit; otherwise it
// gives up on the debit: STALE (ach-overdue) and [EventPaymentACHOverdue].
func (c *Collector) achOverdue(ctx context.Context, cur *Period, rep *Report) error {
	now := c.cfg.Clock.Now()
	if c.planRecord(RunRetry, cur, now).Action != planACHOverdue {
		rep.count(&rep.NotEligible)
		return nil
	}
	reason := fmt.Sprintf("no settlement within %v of the debit", c.cfg.ACHSettlementDeadline)
	if lookup, ok := c.cfg.Provider.(PaymentLookup); ok {
		a := cur.LastAttempt
		if a.Number != cur.Attempt || a.Key == "" {
			// Recorded before attempts were written: the attempt is derived.
			a = Attempt{Number: cur.Attempt, Key: IdempotencyKey(cur.SubscriptionID, cur.Attempt), Amount: cur.Amount,
				Tier: cur.ReceiptTierName, Process: cur.Process}
		}
		req := a.Request(cur)
		res, found, err := c.lookup(ctx, lookup, req, rep)
		switch {
		case errors.Is(err, ErrRateLimited):
			// Ask again in a later run rather than give up on the debit.
			return nil
		case err != nil:
			reason += fmt.Sprintf("; lookup failed: %v", err)
		case !found:
			reason += "; the processor has no payment for key " + req.IdempotencyKey
		case res.Outcome == OutcomeSucceeded:
			if _, err := c.settle(ctx, cur, StatusCompleted, EventPaymentSucceeded, ""); err != nil {
				return fmt.Errorf("settle overdue ACH debit of %s: %w", cur.SubscriptionID, err)
			}
			rep.count(&rep.Collected)
			return nil
		case res.Outcome == OutcomeDeclined:
			if _, err := c.settle(ctx, cur, StatusError, EventPaymentReturned, res.DeclineReason); err != nil {
				return fmt.Errorf("return overdue ACH debit of %s: %w", cur.SubscriptionID, err)
			}
			rep.count(&rep.Declined)
			return nil
		default:
			reason += "; the processor still reports it pending"
		}
	}
	if _, err := c.settle(ctx, cur, StatusStale, EventPaymentACHOverdue, reason); err != nil {
		return fmt.Errorf("mark overdue ACH debit of %s: %w", cur.SubscriptionID, err)
	}
	rep.count(&rep.ACHOverdue)
	return nil
}
