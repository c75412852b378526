package billing

import (
	"context"
	"errors"
	"fmt"
)

// SettlementKind is what happened to a submitted or completed payment.
type SettlementKind string

// The settlement kinds.
const (
	// SettlementSettled: the ACH debit settled (ACHSENT → COMPLETED).
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

// ApplySettlement applies a settlement event under the user's lock. The
// event's transaction ID must be the one on the record
// ([ErrTransactionMismatch] otherwise; [ErrSettlementEarly] when the record
// is still waiting to be collected, so the event should be redelivered). Events are idempotent: a replay,
// or an event arriving after a later one (a settlement after the return of
// the same debit), changes nothing and returns changed=false. A change the
// transition table forbids (a return of a completed payment) is an error
// wrapping [ErrIllegalTransition].
func (c *Collector) ApplySettlement(ctx context.Context, s Settlement) (rec Subscription, changed bool, err error) {
	if s.SubscriptionID == "" || s.TransactionID == "" {
		return Subscription{}, false, fmt.Errorf("%w: settlement needs subscription and transaction IDs", ErrInvalidQuery)
	}
	found, err := c.cfg.Repository.GetByID(ctx, s.SubscriptionID)
	if err != nil {
		return Subscription{}, false, err
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
		case SettlementSettled:
			switch {
			case cur.Status == StatusCompleted, cur.Status == StatusRefunded, cur.Status == StatusError:
				return nil // replay, or the return of this debit came first
			case cur.Status == StatusStale && cur.UpdatedEvent != EventACHOverdue:
				return fmt.Errorf("%s event for %s: %w", s.Kind, s.SubscriptionID, &TransitionError{From: cur.Status, To: StatusCompleted})
			}
			to, ev = StatusCompleted, EventPaymentSucceeded
		case SettlementReturned:
			if cur.Status == StatusError || (cur.Status == StatusStale && cur.UpdatedEvent == EventACHOverdue) {
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
		if err := CheckTransition(cur.Status, to); err != nil {
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

// settle writes cur's move to status to (COMPLETED, ERROR, REFUNDED or,
// for an overdue ACH debit, STALE) with its history row, and emits ev.
func (c *Collector) settle(ctx context.Context, cur *Subscription, to Status, ev EventType, reason string) (Subscription, error) {
	now := c.cfg.Clock.Now()
	next := cur.Clone()
	next.Status = to
	next.LastRunDate = runTime(cur, now)
	switch to {
	case StatusCompleted:
		next.CompletionDate, next.PaymentError = next.LastRunDate, ""
	case StatusError:
		next.PaymentError = reason
		if next.PaymentError == "" {
			next.PaymentError = "ACH returned"
		}
	case StatusRefunded:
		next.CompletionDate = next.LastRunDate
	case StatusStale:
		next.CompletionDate, next.UpdatedEvent = next.LastRunDate, EventACHOverdue
	}
	if err := c.write(ctx, ev, cur, &next, nil); err != nil {
		return Subscription{}, err
	}
	e := eventFor(ev, &next, next.LastRunDate)
	e.Reason = reason
	c.emit(ctx, e)
	return next, nil
}

// achOverdue handles an ACHSENT record found by the retry run: past the
// settlement deadline it asks the processor (when the provider offers
// [PaymentLookup]) and records a settled or returned debit; otherwise it
// gives up on the debit: STALE (ach-overdue) and [EventPaymentACHOverdue].
func (c *Collector) achOverdue(ctx context.Context, cur *Subscription, rep *Report) error {
	now := c.cfg.Clock.Now()
	if c.PlanRecord(RunRetry, cur, now).Action != PlanACHOverdue {
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
