package billing

import (
	"context"
	"fmt"
	"time"
)

// PaymentProvider is the host's payment processor: the port the collector
// charges through.
//
// Collect asks for one collection. A nil error means the provider gave an
// answer ([PaymentResult.Outcome]). An error means the outcome is unknown
// (a timeout, a 5xx, a dropped connection): the money may or may not have
// moved. The collector then records nothing and leaves the attempt open; a
// later run presents the same [PaymentRequest.IdempotencyKey], and the
// provider must answer it with the first attempt's outcome instead of
// charging again. Every real processor used for recurring billing offers
// such keys; an adapter for one that does not must keep its own table of
// keys.
type PaymentProvider interface {
	Collect(ctx context.Context, req PaymentRequest) (PaymentResult, error)
}

// PaymentRequest is one collection attempt.
type PaymentRequest struct {
	UserID         string
	SubscriptionID string
	Amount         Amount
	BillingDate    time.Time
	// Tier is the record's receipt_tier_name, e.g. "Plus:v2".
	Tier    string
	Process Process
	// Attempt numbers the attempts of this billing period from 1. It
	// advances only when an attempt's outcome has been recorded.
	Attempt int
	// IdempotencyKey is the same for every try of one attempt, across
	// crashes and reruns: see [IdempotencyKey].
	IdempotencyKey string
}

// PaymentOutcome is what the provider answered.
type PaymentOutcome int

const (
	// OutcomePending: an ACH debit was submitted and awaits settlement.
	// The record becomes ACHSENT until a settlement event arrives.
	OutcomePending PaymentOutcome = iota + 1
	// OutcomeSucceeded: the money was collected. The record becomes
	// COMPLETED.
	OutcomeSucceeded
	// OutcomeDeclined: the collection failed (e.g. insufficient funds).
	// The record becomes ERROR; Retryable says whether a retry run should
	// try again.
	OutcomeDeclined
)

// String names the outcome.
func (o PaymentOutcome) String() string {
	switch o {
	case OutcomePending:
		return "pending"
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeDeclined:
		return "declined"
	}
	return fmt.Sprintf("PaymentOutcome(%d)", int(o))
}

// PaymentResult is the provider's answer to a [PaymentRequest].
type PaymentResult struct {
	Outcome PaymentOutcome
	// TransactionID is the processor's confirmation ID (transaction_id).
	TransactionID string
	// DeclineReason is the processor's message for a decline (usio_error).
	DeclineReason string
	// Retryable says whether a declined collection is worth retrying.
	Retryable bool
	// AccountMask is the last four digits of the charged account
	// (receipt_account_mask).
	AccountMask string
	// PaymentType is the payment method, e.g. "ACH" (receipt_payment_type).
	PaymentType string
}

// IdempotencyKey derives the key of attempt n of a subscription record:
// "dynabill:<subscription ID>:<n>".
//
// The collector uses derived keys rather than writing a key before each
// call: the attempt number lives on the record (billing_attempt) and
// advances in the same conditional write that records an outcome, so a
// crash or an unknown outcome leaves it unchanged and the rerun derives the
// same key. That costs no write beyond the one that records the outcome,
// where a key written before the call costs one more write per attempt.
func IdempotencyKey(subscriptionID string, attempt int) string {
	return fmt.Sprintf("dynabill:%s:%d", subscriptionID, attempt)
}
