package billingstripe

// retryableDecline says, for each decline code Stripe documents (and the
// error codes it gives instead of one), whether collecting again later can
// succeed without the customer doing anything.
//
// Retryable: the issuer or network failed or the account lacks funds or
// limit for now (insufficient_funds, processing_error, try_again_later,
// issuer_not_available, reenter_transaction, approve_with_id,
// card_velocity_exceeded, withdrawal_count_limit_exceeded,
// duplicate_transaction) and the unexplained declines that dunning
// conventionally retries (generic_decline, call_issuer, no_action_taken).
//
// Not retryable: the card is gone or suspected (stolen_card, lost_card,
// pickup_card, fraudulent, merchant_blacklist, restricted_card,
// security_violation), the customer withdrew the authorization
// (revocation_of_authorization, revocation_of_all_authorizations,
// stop_payment_order), the issuer said never to try again (do_not_honor,
// do_not_try_again), or the card needs the customer: new details
// (expired_card, incorrect_number, invalid_account,
// new_account_information_available, card_not_supported,
// currency_not_supported, transaction_not_allowed, service_not_allowed,
// not_permitted, invalid_amount), a PIN, CVC or ZIP (incorrect_cvc,
// incorrect_pin, incorrect_zip, invalid_cvc, invalid_expiry_month,
// invalid_expiry_year, invalid_pin, offline_pin_required,
// online_or_offline_pin_required, pin_try_exceeded) or authentication
// (authentication_required). Test-mode declines (testmode_decline,
// live_mode_test_card) are not retryable either.
//
// A code missing from the table is not retryable: card networks penalise
// merchants who retry declines the issuer meant as final, and an operator
// can still collect such a record by hand (ManualRepayment).
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
