package billingstripe

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dynabill/billing"
	"github.com/stripe/stripe-go/v85"
)

var (
	// ErrIdempotencyMismatch reports that Stripe refused a request because
	// its idempotency key was first used with other parameters (the
	// amount, customer or payment method changed since the attempt was
	// first presented). Stripe did nothing with this request, but the
	// first one may have charged: the outcome is unknown. Never retry such
	// an attempt with a new key; the collector looks the key up
	// ([Provider.LookupPayment]).
	ErrIdempotencyMismatch = errors.New("billingstripe: idempotency key was used with other parameters")

	// ErrRejected reports a request Stripe refused as invalid (HTTP 400,
	// 401, 403, 404 and the like, other than declines): it charged nothing
	// with this request, but the error is one of configuration (API key,
	// customer, payment method, account), not the customer's, so it is
	// not recorded as a decline. The attempt stays in flight until the
	// configuration is fixed and a replay is answered, or a lookup
	// settles it.
	ErrRejected = errors.New("billingstripe: Stripe rejected the request")

	// ErrUnexpectedAnswer reports an answer from Stripe the adapter does
	// not take as an outcome: an intent of another amount, currency or
	// idempotency key than asked for, or in a state a confirmed
	// off-session intent cannot be in (requires_capture). The outcome is
	// unknown.
	ErrUnexpectedAnswer = errors.New("billingstripe: unexpected answer from Stripe")
)

// classify maps Stripe's answer to a create-and-confirm request with
// idempotency key key, or a PaymentIntent found by a lookup (err nil), to
// the collector's terms, as documented on [Provider]. An error return
// means the outcome is unknown, except a [*billing.RateLimitedError],
// which means Stripe did nothing with this try. now reads a Retry-After
// header given as a date.
func classify(key string, pi *stripe.PaymentIntent, err error, now time.Time) (billing.PaymentResult, error) {
	if err == nil {
		if pi == nil {
			return billing.PaymentResult{}, fmt.Errorf("key %s: %w: no PaymentIntent in the answer", key, ErrUnexpectedAnswer)
		}
		return fromIntent(key, pi)
	}
	var se *stripe.Error
	if !errors.As(err, &se) {
		return billing.PaymentResult{}, fmt.Errorf("key %s: outcome unknown: %w", key, err)
	}
	switch {
	case se.HTTPStatusCode == http.StatusTooManyRequests:
		return billing.PaymentResult{}, &billing.RateLimitedError{RetryAfter: retryAfter(se, now), Err: fmt.Errorf("key %s: %w", key, err)}
	case se.HTTPStatusCode == http.StatusConflict || se.Code == stripe.ErrorCodeIdempotencyKeyInUse:
		return billing.PaymentResult{}, fmt.Errorf("key %s: %w: %w", key, billing.ErrKeyInUse, err)
	case se.Type == stripe.ErrorTypeIdempotency:
		return billing.PaymentResult{}, fmt.Errorf("key %s: %w: Stripe did nothing with this request, but the request first made with this key may have charged; "+
			"do not retry with a new key, look the key up: %w", key, ErrIdempotencyMismatch, err)
	case se.HTTPStatusCode >= http.StatusInternalServerError || se.HTTPStatusCode == 0:
		return billing.PaymentResult{}, fmt.Errorf("key %s: outcome unknown: %w", key, err)
	case se.Type == stripe.ErrorTypeCard:
		res := billing.PaymentResult{
			Outcome:       billing.OutcomeDeclined,
			DeclineReason: declineReason(se),
			Retryable:     declineRetryable(string(se.DeclineCode), string(se.Code)),
			Decline:       declineKind(string(se.DeclineCode), string(se.Code)),
		}
		if se.PaymentIntent != nil {
			res.TransactionID = se.PaymentIntent.ID
			account(&res, se.PaymentIntent.PaymentMethod)
			if res.Decline == billing.DeclineAuthenticationRequired {
				res.ActionURL = redirectURL(se.PaymentIntent)
			}
		}
		account(&res, se.PaymentMethod)
		return res, nil
	case se.PaymentIntent != nil && failed(se.PaymentIntent.Status):
		return fromIntent(key, se.PaymentIntent)
	}
	return billing.PaymentResult{}, fmt.Errorf("key %s: %w (HTTP %d %s %s: %s): nothing was charged by this request; fix the configuration",
		key, ErrRejected, se.HTTPStatusCode, se.Type, se.Code, se.Msg)
}

// failed reports whether an intent in status s cannot charge without
// someone acting on it again.
func failed(s stripe.PaymentIntentStatus) bool {
	switch s {
	case stripe.PaymentIntentStatusRequiresPaymentMethod, stripe.PaymentIntentStatusRequiresAction,
		stripe.PaymentIntentStatusRequiresConfirmation, stripe.PaymentIntentStatusCanceled:
		return true
	}
	return false
}

// fromIntent maps a PaymentIntent's status (see classify).
func fromIntent(key string, pi *stripe.PaymentIntent) (billing.PaymentResult, error) {
	res := billing.PaymentResult{TransactionID: pi.ID}
	account(&res, pi.PaymentMethod)
	if pi.LatestCharge != nil && pi.LatestCharge.PaymentMethodDetails != nil {
		chargeAccount(&res, pi.LatestCharge.PaymentMethodDetails)
	}
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		res.Outcome = billing.OutcomeSucceeded
	case stripe.PaymentIntentStatusProcessing:
		res.Outcome = billing.OutcomePending
	case stripe.PaymentIntentStatusRequiresPaymentMethod:
		res.Outcome = billing.OutcomeDeclined
		if e := pi.LastPaymentError; e != nil {
			res.DeclineReason = declineReason(e)
			res.Retryable = declineRetryable(string(e.DeclineCode), string(e.Code))
			res.Decline = declineKind(string(e.DeclineCode), string(e.Code))
			if res.Decline == billing.DeclineAuthenticationRequired {
				res.ActionURL = redirectURL(pi)
			}
		} else {
			res.DeclineReason = "payment failed (requires_payment_method)"
			res.Decline = billing.DeclineHard
		}
	case stripe.PaymentIntentStatusRequiresAction:
		res.Outcome = billing.OutcomeDeclined
		res.DeclineReason = "the customer must authenticate the payment (requires_action)"
		res.Decline = billing.DeclineAuthenticationRequired
		res.ActionURL = redirectURL(pi)
	case stripe.PaymentIntentStatusRequiresConfirmation:
		res.Outcome = billing.OutcomeDeclined
		res.DeclineReason = "the payment was never confirmed (requires_confirmation)"
		res.Decline = billing.DeclineHard
	case stripe.PaymentIntentStatusCanceled:
		res.Outcome = billing.OutcomeDeclined
		res.DeclineReason = "the payment was canceled"
		res.Decline = billing.DeclineHard
		if pi.CancellationReason != "" {
			res.DeclineReason += " (" + string(pi.CancellationReason) + ")"
		}
	default:
		return billing.PaymentResult{}, fmt.Errorf("key %s: %w: PaymentIntent %s is %q", key, ErrUnexpectedAnswer, pi.ID, pi.Status)
	}
	return res, nil
}

// maxActionURL is the longest confirmation link a decline carries: the
// collector keeps it on the period's record, which takes at most 2048
// bytes.
const maxActionURL = 2048

// redirectURL is the link Stripe gives for the customer to authenticate
// pi (next_action.redirect_to_url.url), "" when it gives none or one
// that is no absolute http(s) URL of at most [maxActionURL] bytes.
func redirectURL(pi *stripe.PaymentIntent) string {
	if pi == nil || pi.NextAction == nil || pi.NextAction.RedirectToURL == nil {
		return ""
	}
	return checkedURL(pi.NextAction.RedirectToURL.URL)
}

// checkedURL is u when it is an absolute http or https URL of at most
// [maxActionURL] bytes of UTF-8, else "".
func checkedURL(u string) string {
	if u == "" || len(u) > maxActionURL || !utf8.ValidString(u) {
		return ""
	}
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "https" && parsed.Scheme != "http") || parsed.Host == "" {
		return ""
	}
	return u
}

// declineReason is Stripe's message with its codes, e.g. "Your card has
// insufficient funds. (card_declined/insufficient_funds)".
func declineReason(e *stripe.Error) string {
	codes := string(e.Code)
	if e.DeclineCode != "" {
		codes += "/" + string(e.DeclineCode)
	}
	msg := strings.TrimSpace(e.Msg)
	switch {
	case msg == "":
		return codes
	case codes == "":
		return msg
	}
	return msg + " (" + codes + ")"
}

// paymentTypes names the receipt_payment_type of Stripe's payment method
// types; others are written upper-cased.
var paymentTypes = map[stripe.PaymentMethodType]string{
	stripe.PaymentMethodTypeCard:          "CARD",
	stripe.PaymentMethodTypeUSBankAccount: "ACH",
	stripe.PaymentMethodTypeSEPADebit:     "SEPA",
}

func paymentType(t string) string {
	if v, ok := paymentTypes[stripe.PaymentMethodType(t)]; ok {
		return v
	}
	return strings.ToUpper(t)
}

// account fills the account mask and payment type from an expanded
// payment method; an unexpanded one (an ID alone) leaves them as they are.
func account(res *billing.PaymentResult, pm *stripe.PaymentMethod) {
	if pm == nil || pm.Type == "" {
		return
	}
	res.PaymentType = paymentType(string(pm.Type))
	switch {
	case pm.Card != nil && pm.Card.Last4 != "":
		res.AccountMask = pm.Card.Last4
	case pm.USBankAccount != nil && pm.USBankAccount.Last4 != "":
		res.AccountMask = pm.USBankAccount.Last4
	case pm.SEPADebit != nil && pm.SEPADebit.Last4 != "":
		res.AccountMask = pm.SEPADebit.Last4
	}
}

// chargeAccount fills what account left empty from an expanded charge.
func chargeAccount(res *billing.PaymentResult, d *stripe.ChargePaymentMethodDetails) {
	if res.PaymentType == "" && d.Type != "" {
		res.PaymentType = paymentType(string(d.Type))
	}
	if res.AccountMask != "" {
		return
	}
	switch {
	case d.Card != nil:
		res.AccountMask = d.Card.Last4
	case d.USBankAccount != nil:
		res.AccountMask = d.USBankAccount.Last4
	}
}

// rateLimited reports whether err is Stripe's 429 and the wait it asks
// for. A rate-limited list does nothing, so a lookup may say so.
func rateLimited(err error, now time.Time) (time.Duration, bool) {
	var se *stripe.Error
	if errors.As(err, &se) && se.HTTPStatusCode == http.StatusTooManyRequests {
		return retryAfter(se, now), true
	}
	return 0, false
}

// retryAfter is the wait a 429 asks for in its Retry-After header
// (seconds or an HTTP date), 0 without one.
func retryAfter(se *stripe.Error, now time.Time) time.Duration {
	if se.LastResponse == nil {
		return 0
	}
	v := strings.TrimSpace(se.LastResponse.Header.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
