package stripetest

import (
	"errors"
	"fmt"
)

// ErrNoSuchIntent is returned (wrapped, with the ID) for a PaymentIntent
// the fake does not hold.
var ErrNoSuchIntent = errors.New("stripetest: no such payment intent")

// ErrIntentState is returned (wrapped, with the ID and status) for a move
// or an event the intent's current state does not allow: settling an
// intent that is not processing, the succeeded event of a declined
// intent, and so on.
var ErrIntentState = errors.New("stripetest: payment intent is not in a state for this")

// ConfirmOnSession confirms again the intent id, which needs a payment
// method (a declined card, an authentication the issuer asked for, a
// failed bank debit), as its customer does on-session: Stripe's standard
// recovery of a decline. With [Succeed] the intent moves to succeeded (a
// card) or processing (a bank debit) and its last payment error is
// cleared; with a failed outcome it stays requires_payment_method with
// that outcome as its last payment error. Either way a new charge is its
// latest. Retrieve and list see the move; a replay of the request that
// created the intent still answers what that request answered.
func (s *Server) ConfirmOnSession(id string, o Outcome) error {
	return s.move(id, "confirm payment intent %s on-session", "requires_payment_method", func(in *intent) error {
		s.confirmAgain(in, o)
		return nil
	})
}

// confirmAgain confirms in again with outcome o. The caller holds s.mu.
func (s *Server) confirmAgain(in *intent, o Outcome) {
	s.seq++
	in.Charge = fmt.Sprintf("ch_%06d", s.seq)
	if o.Action {
		s.await(in, o)
		return
	}
	if o.Code != "" {
		s.fail(in, o)
		return
	}
	in.LastError = nil
	in.Status = s.goneThrough(in)
}

// Settle settles the processing bank debit id: it becomes succeeded, as
// an ACH debit does days after it was made.
func (s *Server) Settle(id string) error {
	return s.move(id, "settle payment intent %s", "processing", func(in *intent) error {
		in.Status = "succeeded"
		return nil
	})
}

// FailProcessing fails the processing bank debit id with the failed
// outcome o (see [BankDebitFailed]): it becomes requires_payment_method
// with o as its last payment error, as an ACH debit the bank returned.
func (s *Server) FailProcessing(id string, o Outcome) error {
	if o.Code == "" {
		return fmt.Errorf("stripetest: fail payment intent %s: the outcome has no failure code", id)
	}
	return s.move(id, "fail payment intent %s", "processing", func(in *intent) error {
		s.fail(in, o)
		return nil
	})
}

// Refund refunds the latest charge of the succeeded intent id in full.
// The intent stays succeeded, as at Stripe; its charge.refunded event is
// then available from [Server.Event].
func (s *Server) Refund(id string) error {
	return s.move(id, "refund payment intent %s", "succeeded", func(in *intent) error {
		if in.Refunded {
			return fmt.Errorf("%w: refund payment intent %s: charge %s is already refunded", ErrIntentState, id, in.Charge)
		}
		in.Refunded = true
		return nil
	})
}

// move applies fn to the intent id, under s.mu, when its status is want;
// otherwise the error names the move (what, formatted with id) and
// wraps [ErrNoSuchIntent] or [ErrIntentState].
func (s *Server) move(id, what, want string, fn func(in *intent) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.intentLocked(id)
	if err != nil {
		return err
	}
	if in.Status != want {
		return fmt.Errorf("%w: %s: it is %s, not %s", ErrIntentState, fmt.Sprintf(what, id), in.Status, want)
	}
	return fn(in)
}

// intentLocked is the intent id; the caller holds s.mu.
func (s *Server) intentLocked(id string) (*intent, error) {
	in, ok := s.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchIntent, id)
	}
	return in, nil
}

// goneThrough is the status of in once a confirmation goes through:
// succeeded for a card, processing for a bank debit. The caller holds s.mu.
func (s *Server) goneThrough(in *intent) string {
	if s.methods[in.Method].Type == "us_bank_account" {
		return "processing"
	}
	return "succeeded"
}

// fail records the failed outcome o on in: requires_payment_method, with
// the error Stripe puts in last_payment_error (and in a 402's body). The
// caller holds s.mu.
func (s *Server) fail(in *intent, o Outcome) {
	in.Status = "requires_payment_method"
	e := apiError("card_error", o.Code, o.Message)
	if o.DeclineCode != "" {
		e["decline_code"] = o.DeclineCode
	}
	e["charge"] = in.Charge
	e["payment_method"] = s.renderMethod(in.Method, in.Customer)
	in.LastError = e
}

// await leaves in waiting for the customer's action, the Action outcome
// o (see [RequiresAction]). The caller holds s.mu.
func (s *Server) await(in *intent, o Outcome) {
	in.Status = "requires_action"
	in.LastError = nil
	in.Redirect = o.RedirectURL
}
