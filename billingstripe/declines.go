package billingstripe

import "github.com/dynabill/billing"

// retryableDecline says, for each decline code Stripe documents (and the
// error codes it gives instead of one), whether collecting again later can
// succeed without the customer doing anything; the reasons are on
// [Provider] (Declines). A code missing from the table is not retryable.
var retryableDecline = map[string]bool{
	"insufficient_funds":              true,
	"processing_error":                true,
	"try_again_later":                 true,
	"issuer_not_available":            true,
	"reenter_transaction":             true,
	"approve_with_id":                 true,
	"card_velocity_exceeded":          true,
	"withdrawal_count_limit_exceeded": true,
	"duplicate_transaction":           true,
	"generic_decline":                 true,
	"call_issuer":                     true,
	"no_action_taken":                 true,

	"stolen_card":                       false,
	"lost_card":                         false,
	"pickup_card":                       false,
	"fraudulent":                        false,
	"merchant_blacklist":                false,
	"restricted_card":                   false,
	"security_violation":                false,
	"revocation_of_authorization":       false,
	"revocation_of_all_authorizations":  false,
	"stop_payment_order":                false,
	"do_not_honor":                      false,
	"do_not_try_again":                  false,
	"expired_card":                      false,
	"incorrect_number":                  false,
	"invalid_number":                    false,
	"invalid_account":                   false,
	"new_account_information_available": false,
	"card_not_supported":                false,
	"currency_not_supported":            false,
	"transaction_not_allowed":           false,
	"service_not_allowed":               false,
	"not_permitted":                     false,
	"invalid_amount":                    false,
	"incorrect_cvc":                     false,
	"incorrect_pin":                     false,
	"incorrect_zip":                     false,
	"invalid_cvc":                       false,
	"invalid_expiry_month":              false,
	"invalid_expiry_year":               false,
	"invalid_pin":                       false,
	"offline_pin_required":              false,
	"online_or_offline_pin_required":    false,
	"pin_try_exceeded":                  false,
	"authentication_required":           false,
	"testmode_decline":                  false,
	"live_mode_test_card":               false,
}

// declineRetryable says whether a decline with the given decline code
// (Stripe's decline_code) and error code (its code, e.g. card_declined or
// expired_card) is worth collecting again. The decline code is the
// issuer's reason and wins; the error code stands in when there is none.
// card_declined without a decline code is an unexplained decline:
// retryable, like generic_decline.
func declineRetryable(declineCode, code string) bool {
	if declineCode != "" {
		return retryableDecline[declineCode]
	}
	if code == "card_declined" {
		return true
	}
	return retryableDecline[code]
}

// declineKinds names the dunning kind ([billing.PaymentResult.Decline]) of
// the codes that say more than "declined": a lack of funds, a card whose
// details the customer must update, a payment the customer must confirm,
// and the codes Stripe says never to retry (a card gone or suspected, an
// authorization withdrawn, an issuer that said never again). A code
// missing here is [billing.DeclineOther] when retryable and
// [billing.DeclineHard] when not, as the collector takes a decline that
// is not retryable.
var declineKinds = map[string]billing.DeclineKind{
	"insufficient_funds": billing.DeclineInsufficientFunds,

	"expired_card":                      billing.DeclineExpiredCard,
	"incorrect_number":                  billing.DeclineExpiredCard,
	"invalid_number":                    billing.DeclineExpiredCard,
	"invalid_expiry_month":              billing.DeclineExpiredCard,
	"invalid_expiry_year":               billing.DeclineExpiredCard,
	"new_account_information_available": billing.DeclineExpiredCard,

	"authentication_required": billing.DeclineAuthenticationRequired,

	"stolen_card":                      billing.DeclineHard,
	"lost_card":                        billing.DeclineHard,
	"pickup_card":                      billing.DeclineHard,
	"fraudulent":                       billing.DeclineHard,
	"merchant_blacklist":               billing.DeclineHard,
	"restricted_card":                  billing.DeclineHard,
	"security_violation":               billing.DeclineHard,
	"revocation_of_authorization":      billing.DeclineHard,
	"revocation_of_all_authorizations": billing.DeclineHard,
	"stop_payment_order":               billing.DeclineHard,
	"do_not_honor":                     billing.DeclineHard,
	"do_not_try_again":                 billing.DeclineHard,
	"invalid_account":                  billing.DeclineHard,
}

// declineKind is the dunning kind of a decline with the given decline
// code and error code, read as [declineRetryable] reads them: the decline
// code wins, the error code stands in when there is none.
func declineKind(declineCode, code string) billing.DeclineKind {
	c := declineCode
	if c == "" {
		c = code
	}
	if k, ok := declineKinds[c]; ok {
		return k
	}
	if !declineRetryable(declineCode, code) {
		return billing.DeclineHard
	}
	return billing.DeclineOther
}
