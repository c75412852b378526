package billingstripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"
)

func card(last4 string) *stripe.PaymentMethod {
	return &stripe.PaymentMethod{ID: "pm_1", Type: stripe.PaymentMethodTypeCard, Card: &stripe.PaymentMethodCard{Last4: last4}}
}

func bank(last4 string) *stripe.PaymentMethod {
	return &stripe.PaymentMethod{ID: "pm_2", Type: stripe.PaymentMethodTypeUSBankAccount, USBankAccount: &stripe.PaymentMethodUSBankAccount{Last4: last4}}
}

func intent(status stripe.PaymentIntentStatus, pm *stripe.PaymentMethod) *stripe.PaymentIntent {
	return &stripe.PaymentIntent{ID: "pi_1", Status: status, PaymentMethod: pm}
}

func cardErr(code, decline, msg string) *stripe.Error {
	return &stripe.Error{
		HTTPStatusCode: 402, Type: stripe.ErrorTypeCard, Code: stripe.ErrorCode(code), DeclineCode: stripe.DeclineCode(decline), Msg: msg,
		PaymentIntent: intent(stripe.PaymentIntentStatusRequiresPaymentMethod, nil), PaymentMethod: card("4242"),
	}
}

func apiErr(status int, typ stripe.ErrorType, code string, header http.Header) *stripe.Error {
	e := &stripe.Error{HTTPStatusCode: status, Type: typ, Code: stripe.ErrorCode(code), Msg: "message from Stripe"}
	if header != nil {
		e.LastResponse = &stripe.APIResponse{Header: header, StatusCode: status}
	}
	return e
}

// redirecting is an intent that requires the customer's action at link.
func redirecting(link string) *stripe.PaymentIntent {
	pi := intent(stripe.PaymentIntentStatusRequiresAction, nil)
	pi.NextAction = &stripe.PaymentIntentNextAction{Type: stripe.PaymentIntentNextActionTypeRedirectToURL,
		RedirectToURL: &stripe.PaymentIntentNextActionRedirectToURL{URL: link}}
	return pi
}

// withIntentLink gives the intent e carries the redirect link.
func withIntentLink(e *stripe.Error, link string) *stripe.Error {
	e.PaymentIntent.NextAction = &stripe.PaymentIntentNextAction{Type: stripe.PaymentIntentNextActionTypeRedirectToURL,
		RedirectToURL: &stripe.PaymentIntentNextActionRedirectToURL{URL: link}}
	return e
}

// authErr is an off-session authentication_required decline whose intent
// carries the redirect link.
func authErr(link string) *stripe.Error {
	return withIntentLink(cardErr("authentication_required", "authentication_required", "Authenticate."), link)
}

func declinedIntent(code, decline string) *stripe.PaymentIntent {
	pi := intent(stripe.PaymentIntentStatusRequiresPaymentMethod, card("0005"))
	pi.LastPaymentError = &stripe.Error{Type: stripe.ErrorTypeCard, Code: stripe.ErrorCode(code), DeclineCode: stripe.DeclineCode(decline), Msg: "Your card was declined."}
	return pi
}

// TestClassify is the whole mapping of Stripe's answers, row by row.
func TestClassify(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	canceled := intent(stripe.PaymentIntentStatusCanceled, card("1111"))
	canceled.CancellationReason = stripe.PaymentIntentCancellationReasonRequestedByCustomer
	charge := intent(stripe.PaymentIntentStatusSucceeded, &stripe.PaymentMethod{ID: "pm_3"})
	charge.LatestCharge = &stripe.Charge{PaymentMethodDetails: &stripe.ChargePaymentMethodDetails{Type: "card", Card: &stripe.ChargePaymentMethodDetailsCard{Last4: "9999"}}}
	type want struct {
		res        billing.PaymentResult
		errIs      error // the error must match; res ignored
		rateLimit  time.Duration
		unknownErr bool // a plain error: outcome unknown
	}
	declined := func(reason string, retryable bool, mask, typ string, kind billing.DeclineKind) want {
		return want{res: billing.PaymentResult{Outcome: billing.OutcomeDeclined, TransactionID: "pi_1", DeclineReason: reason, Retryable: retryable,
			Decline: kind, AccountMask: mask, PaymentType: typ}}
	}
	withLink := func(w want, link string) want {
		w.res.ActionURL = link
		return w
	}
	const (
		other   = billing.DeclineOther
		ins     = billing.DeclineInsufficientFunds
		expired = billing.DeclineExpiredCard
		auth    = billing.DeclineAuthenticationRequired
		hard    = billing.DeclineHard
	)
	tests := []struct {
		name string
		pi   *stripe.PaymentIntent
		err  error
		want want
	}{
		{"succeeded card", intent(stripe.PaymentIntentStatusSucceeded, card("4242")), nil,
			want{res: billing.PaymentResult{Outcome: billing.OutcomeSucceeded, TransactionID: "pi_1", AccountMask: "4242", PaymentType: "CARD"}}},
		{"succeeded, mask from the expanded charge", charge, nil,
			want{res: billing.PaymentResult{Outcome: billing.OutcomeSucceeded, TransactionID: "pi_1", AccountMask: "9999", PaymentType: "CARD"}}},
		{"ACH processing is pending", intent(stripe.PaymentIntentStatusProcessing, bank("6789")), nil,
			want{res: billing.PaymentResult{Outcome: billing.OutcomePending, TransactionID: "pi_1", AccountMask: "6789", PaymentType: "ACH"}}},
		{"payment method not expanded: no mask", intent(stripe.PaymentIntentStatusSucceeded, &stripe.PaymentMethod{ID: "pm_1"}), nil,
			want{res: billing.PaymentResult{Outcome: billing.OutcomeSucceeded, TransactionID: "pi_1"}}},
		{"requires_payment_method, insufficient funds", declinedIntent("card_declined", "insufficient_funds"), nil,
			declined("Your card was declined. (card_declined/insufficient_funds)", true, "0005", "CARD", ins)},
		{"requires_payment_method, stolen card", declinedIntent("card_declined", "stolen_card"), nil,
			declined("Your card was declined. (card_declined/stolen_card)", false, "0005", "CARD", hard)},
		{"requires_payment_method without an error", intent(stripe.PaymentIntentStatusRequiresPaymentMethod, nil), nil,
			declined("payment failed (requires_payment_method)", false, "", "", hard)},
		{"requires_action off-session", intent(stripe.PaymentIntentStatusRequiresAction, card("3155")), nil,
			declined("the customer must authenticate the payment (requires_action)", false, "3155", "CARD", auth)},
		{"requires_confirmation", intent(stripe.PaymentIntentStatusRequiresConfirmation, nil), nil,
			declined("the payment was never confirmed (requires_confirmation)", false, "", "", hard)},
		{"canceled", canceled, nil, declined("the payment was canceled (requested_by_customer)", false, "1111", "CARD", hard)},
		{"requires_capture is unexpected", intent(stripe.PaymentIntentStatusRequiresCapture, nil), nil, want{errIs: ErrUnexpectedAnswer}},
		{"an unknown status is unexpected", intent("requires_something_new", nil), nil, want{errIs: ErrUnexpectedAnswer}},
		{"no intent and no error", nil, nil, want{errIs: ErrUnexpectedAnswer}},

		{"402 insufficient funds", nil, cardErr("card_declined", "insufficient_funds", "Your card has insufficient funds."),
			declined("Your card has insufficient funds. (card_declined/insufficient_funds)", true, "4242", "CARD", ins)},
		{"402 processing_error", nil, cardErr("processing_error", "", "An error occurred while processing your card."),
			declined("An error occurred while processing your card. (processing_error)", true, "4242", "CARD", other)},
		{"402 try_again_later", nil, cardErr("card_declined", "try_again_later", "Try again."),
			declined("Try again. (card_declined/try_again_later)", true, "4242", "CARD", other)},
		{"402 generic decline", nil, cardErr("card_declined", "generic_decline", "Your card was declined."),
			declined("Your card was declined. (card_declined/generic_decline)", true, "4242", "CARD", other)},
		{"402 card_declined without a decline code", nil, cardErr("card_declined", "", "Your card was declined."),
			declined("Your card was declined. (card_declined)", true, "4242", "CARD", other)},
		{"402 stolen_card", nil, cardErr("card_declined", "stolen_card", "Your card was declined."),
			declined("Your card was declined. (card_declined/stolen_card)", false, "4242", "CARD", hard)},
		{"402 lost_card", nil, cardErr("card_declined", "lost_card", "Your card was declined."),
			declined("Your card was declined. (card_declined/lost_card)", false, "4242", "CARD", hard)},
		{"402 fraudulent", nil, cardErr("card_declined", "fraudulent", "Your card was declined."),
			declined("Your card was declined. (card_declined/fraudulent)", false, "4242", "CARD", hard)},
		{"402 pickup_card", nil, cardErr("card_declined", "pickup_card", "x"), declined("x (card_declined/pickup_card)", false, "4242", "CARD", hard)},
		{"402 do_not_honor", nil, cardErr("card_declined", "do_not_honor", "x"), declined("x (card_declined/do_not_honor)", false, "4242", "CARD", hard)},
		{"402 restricted_card", nil, cardErr("card_declined", "restricted_card", "x"), declined("x (card_declined/restricted_card)", false, "4242", "CARD", hard)},
		{"402 security_violation", nil, cardErr("card_declined", "security_violation", "x"), declined("x (card_declined/security_violation)", false, "4242", "CARD", hard)},
		{"402 revocation_of_authorization", nil, cardErr("card_declined", "revocation_of_authorization", "x"),
			declined("x (card_declined/revocation_of_authorization)", false, "4242", "CARD", hard)},
		{"402 expired_card", nil, cardErr("expired_card", "", "Your card has expired."), declined("Your card has expired. (expired_card)", false, "4242", "CARD", expired)},
		{"402 an undocumented decline code", nil, cardErr("card_declined", "brand_new_reason", "x"), declined("x (card_declined/brand_new_reason)", false, "4242", "CARD", hard)},
		{"402 authentication_required off-session", nil, cardErr("authentication_required", "authentication_required", "This transaction requires authentication."),
			declined("This transaction requires authentication. (authentication_required/authentication_required)", false, "4242", "CARD", auth)},
		{"400 carrying an intent that requires action", nil,
			&stripe.Error{HTTPStatusCode: 400, Type: stripe.ErrorTypeInvalidRequest, Code: "payment_intent_authentication_failure", PaymentIntent: intent(stripe.PaymentIntentStatusRequiresAction, nil)},
			declined("the customer must authenticate the payment (requires_action)", false, "", "", auth)},
		{"requires_action with Stripe's link", redirecting("https://hooks.stripe.com/3d_secure_2/hosted?pi=pi_1"), nil,
			withLink(declined("the customer must authenticate the payment (requires_action)", false, "", "", auth), "https://hooks.stripe.com/3d_secure_2/hosted?pi=pi_1")},
		{"requires_action with a link that is no http(s) URL", redirecting("javascript:alert(1)"), nil,
			declined("the customer must authenticate the payment (requires_action)", false, "", "", auth)},
		{"requires_action with a link over 2048 bytes", redirecting("https://example.com/" + strings.Repeat("a", 2048)), nil,
			declined("the customer must authenticate the payment (requires_action)", false, "", "", auth)},
		{"402 authentication_required, its intent with Stripe's link", nil, authErr("https://hooks.stripe.com/redirect/authenticate/src_1"),
			withLink(declined("Authenticate. (authentication_required/authentication_required)", false, "4242", "CARD", auth), "https://hooks.stripe.com/redirect/authenticate/src_1")},
		{"402 insufficient funds, its intent with a link: no link", nil, withIntentLink(cardErr("card_declined", "insufficient_funds", "x"), "https://hooks.stripe.com/x"),
			declined("x (card_declined/insufficient_funds)", true, "4242", "CARD", ins)},

		{"429 rate_limit with Retry-After seconds", nil, apiErr(429, stripe.ErrorTypeInvalidRequest, "rate_limit", http.Header{"Retry-After": {"7"}}),
			want{errIs: billing.ErrRateLimited, rateLimit: 7 * time.Second}},
		{"429 with Retry-After as a date", nil, apiErr(429, stripe.ErrorTypeInvalidRequest, "rate_limit", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}),
			want{errIs: billing.ErrRateLimited, rateLimit: 90 * time.Second}},
		{"429 without Retry-After", nil, apiErr(429, stripe.ErrorTypeInvalidRequest, "rate_limit", nil), want{errIs: billing.ErrRateLimited}},
		{"429 lock_timeout is a refusal too", nil, apiErr(429, stripe.ErrorTypeInvalidRequest, "lock_timeout", http.Header{}), want{errIs: billing.ErrRateLimited}},
		{"409 idempotency key in use", nil, apiErr(409, stripe.ErrorTypeIdempotency, "idempotency_key_in_use", nil), want{errIs: billing.ErrKeyInUse}},
		{"400 idempotency_error", nil, apiErr(400, stripe.ErrorTypeIdempotency, "", nil), want{errIs: ErrIdempotencyMismatch}},
		{"500", nil, apiErr(500, stripe.ErrorTypeAPI, "", nil), want{unknownErr: true}},
		{"503", nil, apiErr(503, stripe.ErrorTypeAPI, "", nil), want{unknownErr: true}},
		{"timeout", nil, &url.Error{Op: "Post", URL: "https://api.stripe.com/v1/payment_intents", Err: context.DeadlineExceeded}, want{unknownErr: true}},
		{"dropped connection", nil, fmt.Errorf("read: %w", errors.New("connection reset by peer")), want{unknownErr: true}},
		{"context cancelled", nil, context.Canceled, want{unknownErr: true}},
		{"400 invalid request", nil, apiErr(400, stripe.ErrorTypeInvalidRequest, "resource_missing", nil), want{errIs: ErrRejected}},
		{"401 bad API key", nil, apiErr(401, stripe.ErrorTypeInvalidRequest, "", nil), want{errIs: ErrRejected}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := classify("dynabill:s1:1", tt.pi, tt.err, now)
			switch {
			case tt.want.errIs != nil:
				require.ErrorIs(t, err, tt.want.errIs)
				assert.Contains(t, err.Error(), "dynabill:s1:1", "the error names the key")
				assert.Equal(t, billing.PaymentResult{}, res)
				var rl *billing.RateLimitedError
				if errors.As(err, &rl) {
					assert.Equal(t, tt.want.rateLimit, rl.RetryAfter)
				} else {
					assert.NotErrorIs(t, err, billing.ErrRateLimited)
				}
			case tt.want.unknownErr:
				require.Error(t, err)
				assert.Contains(t, err.Error(), "outcome unknown")
				assert.NotErrorIs(t, err, billing.ErrRateLimited, "an unknown outcome is never a refusal")
				assert.Equal(t, billing.PaymentResult{}, res)
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want.res, res)
			}
		})
	}
}

func TestIdempotencyMismatchTellsTheOperator(t *testing.T) {
	_, err := classify("dynabill:s1:2", nil, apiErr(400, stripe.ErrorTypeIdempotency, "", nil), time.Now())
	require.ErrorIs(t, err, ErrIdempotencyMismatch)
	assert.Contains(t, err.Error(), "do not retry with a new key, look the key up")
}

func TestDeclineRetryable(t *testing.T) {
	tests := []struct {
		decline, code string
		want          bool
	}{
		{"insufficient_funds", "card_declined", true},
		{"", "insufficient_funds", true}, // ACH and some card answers give the reason as the code
		{"processing_error", "card_declined", true},
		{"", "processing_error", true},
		{"issuer_not_available", "card_declined", true},
		{"do_not_honor", "card_declined", false},
		{"revocation_of_all_authorizations", "card_declined", false},
		{"", "expired_card", false},
		{"", "incorrect_cvc", false},
		{"", "card_declined", true},
		{"", "some_new_code", false},
	}
	for _, tt := range tests {
		t.Run(tt.decline+"/"+tt.code, func(t *testing.T) {
			assert.Equal(t, tt.want, declineRetryable(tt.decline, tt.code))
		})
	}
}

// TestDeclineKind: the kind of every code the brief names, and the rule
// for the rest (not retryable is hard, retryable is other).
func TestDeclineKind(t *testing.T) {
	tests := []struct {
		decline, code string
		want          billing.DeclineKind
	}{
		{"insufficient_funds", "card_declined", billing.DeclineInsufficientFunds},
		{"", "insufficient_funds", billing.DeclineInsufficientFunds}, // ACH gives the reason as the code
		{"expired_card", "expired_card", billing.DeclineExpiredCard},
		{"", "expired_card", billing.DeclineExpiredCard},
		{"", "incorrect_number", billing.DeclineExpiredCard},
		{"incorrect_number", "card_declined", billing.DeclineExpiredCard},
		{"", "invalid_number", billing.DeclineExpiredCard},
		{"", "invalid_expiry_month", billing.DeclineExpiredCard},
		{"", "invalid_expiry_year", billing.DeclineExpiredCard},
		{"new_account_information_available", "card_declined", billing.DeclineExpiredCard},
		{"authentication_required", "authentication_required", billing.DeclineAuthenticationRequired},
		{"", "authentication_required", billing.DeclineAuthenticationRequired},
		{"lost_card", "card_declined", billing.DeclineHard},
		{"stolen_card", "card_declined", billing.DeclineHard},
		{"pickup_card", "card_declined", billing.DeclineHard},
		{"fraudulent", "card_declined", billing.DeclineHard},
		{"do_not_honor", "card_declined", billing.DeclineHard},
		{"do_not_try_again", "card_declined", billing.DeclineHard},
		{"revocation_of_all_authorizations", "card_declined", billing.DeclineHard},
		{"invalid_account", "card_declined", billing.DeclineHard},
		{"", "incorrect_cvc", billing.DeclineHard}, // not retryable, no kind of its own
		{"card_not_supported", "card_declined", billing.DeclineHard},
		{"brand_new_reason", "card_declined", billing.DeclineHard},
		{"", "some_new_code", billing.DeclineHard},
		{"generic_decline", "card_declined", billing.DeclineOther},
		{"try_again_later", "card_declined", billing.DeclineOther},
		{"", "processing_error", billing.DeclineOther},
		{"", "card_declined", billing.DeclineOther},
		{"generic_decline", "expired_card", billing.DeclineOther}, // the decline code wins
	}
	for _, tt := range tests {
		t.Run(tt.decline+"/"+tt.code, func(t *testing.T) {
			assert.Equal(t, tt.want, declineKind(tt.decline, tt.code))
		})
	}
	// Every code of a kind other than hard is one the schedule may
	// treat apart; every hard one is one the collector never retries.
	for code, k := range declineKinds {
		if k == billing.DeclineHard || k == billing.DeclineExpiredCard || k == billing.DeclineAuthenticationRequired {
			assert.False(t, declineRetryable(code, ""), "%s is %s but retryable", code, k)
		}
	}
}
