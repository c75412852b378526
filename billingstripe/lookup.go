package billingstripe

import (
	"context"
	"fmt"

	"github.com/dynabill/billing"
	"github.com/stripe/stripe-go/v85"
)

// LookupPayment finds the PaymentIntent made with req.IdempotencyKey: it
// lists the PaymentIntents of the user's Stripe customer created since the
// attempt started (req.Started less Config.LookupMargin; every intent
// when req.Started is zero), all pages, and picks the one whose
// [MetadataIdempotencyKey] is the key. The list API reads its own writes;
// the search API, which can lag by minutes or, in outages, an hour, is
// never used.
//
// A found intent is mapped as Collect maps an answer: succeeded,
// processing (pending), or declined for an intent that failed, needs the
// customer's authentication, was never confirmed or was canceled. An
// intent of another amount or currency than req, two intents with the key,
// or one in an unexpected state (requires_capture) are errors: the
// outcome stays unknown.
//
// An intent that has not been through a confirmation yet
// (requires_confirmation, or requires_payment_method with no failed
// payment) is what a create-and-confirm request still running leaves
// visible: an error, never a decline, since the confirmation may yet
// charge.
//
// An attempt that confirmed the period's earlier intent again
// (req.PriorPayment) left no intent with its key: when none carries it,
// that intent is read, and its success or processing is the answer (in
// any other state nothing was charged with the key: found false).
//
// found is false when the customer has no intent with the key. That alone
// does not prove nothing was charged while a request with the key may
// still be running; the collector only believes it after
// [Provider.RequestTimeout] has passed since the key was last presented.
func (p *Provider) LookupPayment(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, bool, error) {
	key := req.IdempotencyKey
	cust, err := p.cfg.Customers.StripeCustomer(ctx, req.UserID)
	if err != nil {
		return billing.PaymentResult{}, false, fmt.Errorf("billingstripe: lookup of key %s: Stripe customer of user %s: %w", key, req.UserID, err)
	}
	params := &stripe.PaymentIntentListParams{Customer: stripe.String(cust.ID)}
	params.Limit = stripe.Int64(100)
	if !req.Started.IsZero() {
		params.CreatedRange = &stripe.RangeQueryParams{GreaterThanOrEqual: req.Started.Add(-p.cfg.LookupMargin).Unix()}
	}
	params.AddExpand("data.payment_method")
	var match *stripe.PaymentIntent
	for pi, err := range p.cfg.Client.V1PaymentIntents.List(ctx, params).All(ctx) {
		if err != nil {
			err = fmt.Errorf("billingstripe: lookup of key %s: list the PaymentIntents of customer %s: %w", key, cust.ID, err)
			if ra, limited := rateLimited(err, p.cfg.Clock()); limited {
				return billing.PaymentResult{}, false, &billing.RateLimitedError{RetryAfter: ra, Err: err}
			}
			return billing.PaymentResult{}, false, err
		}
		if pi.Metadata[MetadataIdempotencyKey] != key {
			continue
		}
		if match != nil {
			return billing.PaymentResult{}, false, fmt.Errorf("billingstripe: lookup of key %s: %w: PaymentIntents %s and %s both carry the key", key, ErrUnexpectedAnswer, match.ID, pi.ID)
		}
		match = pi
	}
	if match == nil {
		p.cfg.Logger.DebugContext(ctx, "billingstripe: lookup found no PaymentIntent", "key", key, "customer", cust.ID)
		res, found, err := p.lookupPrior(ctx, req)
		if err != nil {
			return billing.PaymentResult{}, false, fmt.Errorf("billingstripe: lookup: %w", err)
		}
		return res, found, nil
	}
	if err := p.check(req, match); err != nil {
		return billing.PaymentResult{}, false, fmt.Errorf("billingstripe: lookup: %w", err)
	}
	if unconfirmed(match) {
		return billing.PaymentResult{}, false, fmt.Errorf("billingstripe: lookup of key %s: %w: PaymentIntent %s is %s without a failed payment: "+
			"its create-and-confirm request may still be running", key, ErrUnexpectedAnswer, match.ID, match.Status)
	}
	res, err := fromIntent(key, match)
	if err != nil {
		return billing.PaymentResult{}, false, fmt.Errorf("billingstripe: lookup: %w", err)
	}
	p.withConfirmURL(ctx, &res, match)
	p.cfg.Logger.DebugContext(ctx, "billingstripe: lookup found", "key", key, "payment_intent", match.ID, "outcome", res.Outcome.String())
	return res, true, nil
}

// unconfirmed reports whether pi was created but not (yet) confirmed: no
// confirmation has failed on it and none has succeeded.
func unconfirmed(pi *stripe.PaymentIntent) bool {
	switch pi.Status {
	case stripe.PaymentIntentStatusRequiresConfirmation:
		return true
	case stripe.PaymentIntentStatusRequiresPaymentMethod:
		return pi.LastPaymentError == nil
	}
	return false
}
