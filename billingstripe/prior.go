package billingstripe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/dynabill/billing"
	"github.com/stripe/stripe-go/v85"
)

// Idempotency-Key suffixes of the requests an attempt makes on the
// period's earlier PaymentIntent: each request of one attempt has a key
// of its own, since Stripe ties a key to one endpoint and its parameters.
const (
	confirmKeySuffix = ":confirm"
	cancelKeySuffix  = ":cancel"
)

// fromPrior answers req from the period's earlier PaymentIntent
// (req.PriorPayment) before any new one is created, so that a retry never
// makes a second payment while the first can still succeed (see One
// payment per period on [billing.PaymentProvider]):
//
//   - succeeded (the customer confirmed it on session since the decline)
//     or processing: that intent is the answer, and nothing is charged;
//   - a card intent that needs a payment method, a confirmation or an
//     action: it is confirmed again, off-session with the customer's
//     saved payment method, under req's key plus ":confirm", and Stripe's
//     answer is the attempt's; Stripe lets an intent succeed once, so the
//     customer's confirmation and this one cannot both charge;
//   - any other intent that needs a payment method (a bank debit that
//     failed, or an intent of another amount than req's) is canceled
//     first, under req's key plus ":cancel", so that it can never
//     succeed; if Stripe refuses the cancel because the intent moved
//     meanwhile, the intent is read again and answered as above;
//   - canceled, or an intent this Stripe account does not hold: it can
//     never succeed, and a new intent may be created; so may one made for
//     another period (its [MetadataSubscriptionID]), which does not pay
//     this one.
//
// done is false when a new intent may be created. An error means the
// outcome is unknown. An intent that went through for another amount or
// currency than req's, or in a state the adapter does not expect
// (requires_capture), is an error wrapping [ErrUnexpectedAnswer].
func (p *Provider) fromPrior(ctx context.Context, req billing.PaymentRequest, cust Customer) (res billing.PaymentResult, done bool, err error) {
	id := req.PriorPayment
	if !strings.HasPrefix(id, "pi_") {
		return billing.PaymentResult{}, false, nil // not a PaymentIntent: it cannot succeed at Stripe
	}
	pi, found, err := p.retrieve(ctx, req, id)
	if err != nil || !found {
		return billing.PaymentResult{}, false, err
	}
	if !p.ofPeriod(ctx, req, pi) {
		return billing.PaymentResult{}, false, nil
	}
	for range 2 {
		if err := p.checkPrior(req, pi, false); err != nil {
			return billing.PaymentResult{}, false, err
		}
		switch pi.Status {
		case stripe.PaymentIntentStatusCanceled:
			return billing.PaymentResult{}, false, nil
		case stripe.PaymentIntentStatusSucceeded, stripe.PaymentIntentStatusProcessing:
			if err := p.checkPrior(req, pi, true); err != nil {
				return billing.PaymentResult{}, false, err
			}
			p.cfg.Logger.InfoContext(ctx, "billingstripe: the period's earlier PaymentIntent went through", "key", req.IdempotencyKey,
				"payment_intent", pi.ID, "status", pi.Status)
			res, err := fromIntent(req.IdempotencyKey, pi)
			return res, err == nil, err
		case stripe.PaymentIntentStatusRequiresPaymentMethod, stripe.PaymentIntentStatusRequiresConfirmation, stripe.PaymentIntentStatusRequiresAction:
		default:
			return billing.PaymentResult{}, false, fmt.Errorf("key %s: %w: the period's earlier PaymentIntent %s is %q", req.IdempotencyKey, ErrUnexpectedAnswer, pi.ID, pi.Status)
		}
		var moved *stripe.PaymentIntent
		if intentMethodType(pi) == stripe.PaymentMethodTypeCard && p.checkPrior(req, pi, true) == nil {
			res, done, moved, err = p.confirmPrior(ctx, req, cust, pi)
			if err != nil || moved == nil {
				return res, done, err
			}
		} else {
			canceled := false
			canceled, moved, err = p.cancelPrior(ctx, req, pi)
			switch {
			case err != nil:
				return billing.PaymentResult{}, false, err
			case canceled:
				return billing.PaymentResult{}, false, nil
			}
		}
		pi = moved // it went through, or changed, before our request: as it is now
	}
	return billing.PaymentResult{}, false, fmt.Errorf("key %s: %w: the period's earlier PaymentIntent %s keeps changing (%s)", req.IdempotencyKey, ErrUnexpectedAnswer, pi.ID, pi.Status)
}

// retrieve reads the PaymentIntent id, its payment method expanded.
// found is false when Stripe does not hold it (resource_missing). A 429
// is an unknown outcome, never a refusal (see Rate limits on [Provider]).
func (p *Provider) retrieve(ctx context.Context, req billing.PaymentRequest, id string) (*stripe.PaymentIntent, bool, error) {
	params := &stripe.PaymentIntentRetrieveParams{}
	params.AddExpand("payment_method")
	pi, err := p.cfg.Client.V1PaymentIntents.Retrieve(ctx, id, params)
	var se *stripe.Error
	switch {
	case err == nil:
		return pi, true, nil
	case errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound && se.Code == stripe.ErrorCodeResourceMissing:
		p.cfg.Logger.WarnContext(ctx, "billingstripe: the period's earlier payment is no PaymentIntent of this account", "key", req.IdempotencyKey, "payment_intent", id)
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("key %s: read the period's earlier PaymentIntent %s: outcome unknown: %w", req.IdempotencyKey, id, withoutRateLimit(err))
}

// ofPeriod reports whether pi, the record's earlier payment, was made
// for req's period ([MetadataSubscriptionID]). One of another period (a
// record written by hand, or by another program) does not pay this one,
// so it does not stop a new payment: it is logged.
func (p *Provider) ofPeriod(ctx context.Context, req billing.PaymentRequest, pi *stripe.PaymentIntent) bool {
	if pi.Metadata[MetadataSubscriptionID] == req.SubscriptionID {
		return true
	}
	p.cfg.Logger.WarnContext(ctx, "billingstripe: the record's earlier PaymentIntent is of another period", "key", req.IdempotencyKey,
		"payment_intent", pi.ID, "its_subscription_id", pi.Metadata[MetadataSubscriptionID])
	return false
}

// checkPrior refuses an earlier PaymentIntent that is not of req's
// period, and, with amount, one of another amount or currency than req.
func (p *Provider) checkPrior(req billing.PaymentRequest, pi *stripe.PaymentIntent, amount bool) error {
	switch {
	case pi.ID != req.PriorPayment:
		return fmt.Errorf("key %s: %w: asked for the period's earlier PaymentIntent %s, got %s", req.IdempotencyKey, ErrUnexpectedAnswer, req.PriorPayment, pi.ID)
	case pi.Metadata[MetadataSubscriptionID] != req.SubscriptionID:
		return fmt.Errorf("key %s: %w: the period's earlier PaymentIntent %s is of subscription %q, not %q",
			req.IdempotencyKey, ErrUnexpectedAnswer, pi.ID, pi.Metadata[MetadataSubscriptionID], req.SubscriptionID)
	case amount && (pi.Amount != req.Amount.MinorUnits() || !strings.EqualFold(string(pi.Currency), p.cfg.Currency)):
		return fmt.Errorf("key %s: %w: the period's earlier PaymentIntent %s is for %d %s, the attempt for %d %s",
			req.IdempotencyKey, ErrUnexpectedAnswer, pi.ID, pi.Amount, pi.Currency, req.Amount.MinorUnits(), p.cfg.Currency)
	}
	return nil
}

// confirmPrior confirms the period's earlier card PaymentIntent pi again,
// off-session with the customer's saved payment method, and maps Stripe's
// answer as Collect maps a create. An intent Stripe canceled for too many
// confirmations can never succeed: done is false, and a new one may be
// created. When Stripe refuses the confirmation because pi moved
// meanwhile (the customer confirmed it on session), moved is pi as it is
// now.
func (p *Provider) confirmPrior(ctx context.Context, req billing.PaymentRequest, cust Customer, pi *stripe.PaymentIntent) (res billing.PaymentResult, done bool, moved *stripe.PaymentIntent, err error) {
	key := req.IdempotencyKey + confirmKeySuffix
	params := &stripe.PaymentIntentConfirmParams{
		PaymentMethod: stripe.String(cust.PaymentMethod),
		OffSession:    stripe.Bool(true),
	}
	params.AddExpand("payment_method")
	params.SetIdempotencyKey(key)
	p.cfg.Logger.DebugContext(ctx, "billingstripe: confirm the period's earlier PaymentIntent again", "key", key, "payment_intent", pi.ID)
	got, callErr := p.cfg.Client.V1PaymentIntents.Confirm(ctx, pi.ID, params)
	if callErr != nil {
		got = nil
		var se *stripe.Error
		switch {
		case !errors.As(callErr, &se):
		case se.Code == stripe.ErrorCodePaymentIntentUnexpectedState:
			now, found, err := p.retrieve(ctx, req, pi.ID)
			switch {
			case err != nil:
				return billing.PaymentResult{}, false, nil, err
			case !found:
				return billing.PaymentResult{}, false, nil, fmt.Errorf("key %s: %w: PaymentIntent %s vanished", key, ErrUnexpectedAnswer, pi.ID)
			}
			return billing.PaymentResult{}, false, now, nil
		case se.PaymentIntent != nil && se.PaymentIntent.Status == stripe.PaymentIntentStatusCanceled:
			return billing.PaymentResult{}, false, nil, nil
		}
	}
	res, err = classify(key, got, callErr, p.cfg.Clock())
	if err == nil && got != nil {
		if got.Status == stripe.PaymentIntentStatusCanceled {
			return billing.PaymentResult{}, false, nil, nil
		}
		err = p.checkPrior(req, got, true)
	}
	if err != nil {
		// A 429 included: an earlier try of the confirmation may be
		// running, so it is an unknown outcome, never a refusal.
		return billing.PaymentResult{}, false, nil, withoutRateLimit(err)
	}
	if res.TransactionID == "" {
		res.TransactionID = pi.ID // a card error without the intent
	}
	if res.TransactionID != pi.ID {
		return billing.PaymentResult{}, false, nil, fmt.Errorf("key %s: %w: confirmed PaymentIntent %s, the answer is about %s", key, ErrUnexpectedAnswer, pi.ID, res.TransactionID)
	}
	p.withConfirmURL(ctx, &res, cmp.Or(got, errIntent(callErr), pi))
	return res, true, nil, nil
}

// cancelPrior cancels the period's earlier PaymentIntent pi so that it
// can never succeed. canceled is true when it is canceled; otherwise, when
// Stripe refused the cancel because pi moved meanwhile (the customer
// confirmed it), moved is pi as it is now.
func (p *Provider) cancelPrior(ctx context.Context, req billing.PaymentRequest, pi *stripe.PaymentIntent) (canceled bool, moved *stripe.PaymentIntent, err error) {
	key := req.IdempotencyKey + cancelKeySuffix
	params := &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String(string(stripe.PaymentIntentCancellationReasonAbandoned))}
	params.AddExpand("payment_method")
	params.SetIdempotencyKey(key)
	p.cfg.Logger.InfoContext(ctx, "billingstripe: cancel the period's earlier PaymentIntent before a new one", "key", key, "payment_intent", pi.ID)
	got, callErr := p.cfg.Client.V1PaymentIntents.Cancel(ctx, pi.ID, params)
	var se *stripe.Error
	switch {
	case callErr == nil && got != nil && got.Status == stripe.PaymentIntentStatusCanceled:
		return true, nil, nil
	case callErr == nil:
		return false, nil, fmt.Errorf("key %s: %w: canceled PaymentIntent %s, Stripe answered it %q", key, ErrUnexpectedAnswer, pi.ID, statusOf(got))
	case errors.As(callErr, &se) && se.Code == stripe.ErrorCodePaymentIntentUnexpectedState:
		now, found, err := p.retrieve(ctx, req, pi.ID)
		switch {
		case err != nil:
			return false, nil, err
		case !found:
			return false, nil, fmt.Errorf("key %s: %w: PaymentIntent %s vanished", key, ErrUnexpectedAnswer, pi.ID)
		case now.Status == stripe.PaymentIntentStatusCanceled:
			return true, nil, nil
		}
		return false, now, nil
	}
	return false, nil, fmt.Errorf("key %s: cancel the period's earlier PaymentIntent %s: outcome unknown: %w", key, pi.ID, withoutRateLimit(callErr))
}

func statusOf(pi *stripe.PaymentIntent) stripe.PaymentIntentStatus {
	if pi == nil {
		return ""
	}
	return pi.Status
}

// lookupPrior is LookupPayment's answer for an attempt whose key no
// intent carries: the attempt may have confirmed the period's earlier
// PaymentIntent again (which keeps the metadata of the attempt that
// created it). That intent succeeded or processing is the answer; in any
// other state nothing was charged with the key (found false), which the
// collector believes only once no request with it can still be running.
func (p *Provider) lookupPrior(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, bool, error) {
	if !strings.HasPrefix(req.PriorPayment, "pi_") {
		return billing.PaymentResult{}, false, nil
	}
	pi, found, err := p.retrieve(ctx, req, req.PriorPayment)
	if err != nil || !found {
		return billing.PaymentResult{}, false, err
	}
	if !p.ofPeriod(ctx, req, pi) {
		return billing.PaymentResult{}, false, nil
	}
	if pi.Status != stripe.PaymentIntentStatusSucceeded && pi.Status != stripe.PaymentIntentStatusProcessing {
		return billing.PaymentResult{}, false, nil
	}
	if err := p.checkPrior(req, pi, true); err != nil {
		return billing.PaymentResult{}, false, err
	}
	res, err := fromIntent(req.IdempotencyKey, pi)
	return res, err == nil, err
}
