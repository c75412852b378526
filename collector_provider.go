package billing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// PaymentProvider is the host's payment processor: the port the collector
// charges through.
//
// Collect asks for one collection. A nil error means the provider gave an
// answer ([PaymentResult.Outcome]). An error means the outcome is unknown
// (a timeout, a 5xx, a dropped connection): the money may or may not have
// moved.
//
// # Attempts in flight
//
// Before it calls Collect the collector records the attempt on the record
// (its key, amount, tier, process and start: [Period.LastAttempt]).
// Until the outcome is recorded the record is in flight: runs, single
// collections and every operator action (waive, cancel, pause, tier and
// date changes, stale marking) first resolve the attempt, by presenting
// exactly the recorded request again — the same
// [PaymentRequest.IdempotencyKey] and amount, which the provider must
// answer with the first call's outcome instead of charging again — or, when
// the provider implements [PaymentLookup], by asking what became of the
// key. While neither gives an answer the record is left as it is and the
// operation fails with an [*InFlightError] ([ErrAttemptInFlight]). Every
// real processor used for recurring billing offers such keys; an adapter
// for one that does not must keep its own table of keys.
//
// A processor that forgets keys after a while (Stripe keeps them for 24
// hours) must say so by implementing [ReplayWindow]: past the window a
// replay could charge again, so the collector only resolves such an
// attempt through [PaymentLookup], never by calling Collect with the old
// key.
//
// # One payment per period
//
// A retry must not create a payment while an earlier payment of the same
// period can still succeed: a card declined off-session can be confirmed
// by the customer on session later (Stripe's standard recovery of a
// decline), and the processor's word of that may reach the host only
// after the next retry run. So every attempt after the period's first
// names, in [PaymentRequest.PriorPayment], the processor payment the
// period's earlier attempts left on the record (its transaction_id), and
// the provider must answer from that payment before it makes a new one:
// one that succeeded (or is pending) is the answer, with its transaction
// ID, and nothing is charged again; one that can still succeed is retried
// itself (on Stripe: the same PaymentIntent confirmed again, which
// succeeds at most once) or ended first (canceled) so that it never can;
// only a payment that can no longer succeed lets a new one be made. The
// processor serialises these, so no race is left between the customer's
// confirmation and the retry: whichever comes second finds the payment
// succeeded. A provider for a processor whose payments cannot succeed
// after a decline may ignore the field.
//
// # Rate limits
//
// When the processor refuses a request for its rate limit before acting on
// it (an HTTP 429 from Stripe, for one), Collect returns an error wrapping
// [ErrRateLimited], ideally a [*RateLimitedError] with the wait the
// processor asked for. Nothing was charged: the collector withdraws the
// attempt it recorded (the record is as it was, the attempt not counted),
// waits, and tries again within [ProcessorBudget.RateLimitRetries] or
// leaves the record to a later run. Only say rate-limited when the
// processor guarantees it did nothing; any other error keeps the attempt
// in flight. A rate-limited answer that guarantees nothing (an earlier try
// of the same call may have acted) is such an other error; when it has a
// method ProcessorThrottled() time.Duration (the wait asked for, 0 when
// unknown) anywhere in its chain, the collector slows down for it as for
// [ErrRateLimited], and still keeps the attempt in flight.
type PaymentProvider interface {
	Collect(ctx context.Context, req PaymentRequest) (PaymentResult, error)
}

// RateLimitedError is a rate-limited answer from the processor. It
// matches [ErrRateLimited] with [errors.Is].
type RateLimitedError struct {
	// RetryAfter is how long the processor asked callers to wait; 0 when
	// it did not say ([ProcessorBudget.Backoff] applies then).
	RetryAfter time.Duration
	// Err is the processor's error, if any.
	Err error
}

func (e *RateLimitedError) Error() string {
	msg := ErrRateLimited.Error()
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns [ErrRateLimited] and the processor's error.
func (e *RateLimitedError) Unwrap() []error { return []error{ErrRateLimited, e.Err} }

// retryAfter is the wait a rate-limited error asks for, 0 when it names
// none.
func retryAfter(err error) time.Duration {
	var rl *RateLimitedError
	if errors.As(err, &rl) {
		return rl.RetryAfter
	}
	return 0
}

// PaymentLookup is implemented by providers that can tell what became of
// an earlier request by its idempotency key, without charging.
type PaymentLookup interface {
	// LookupPayment returns the outcome of the request with
	// req.IdempotencyKey (req is the request as first made). found is false
	// when the processor certainly has no payment for that key, so nothing
	// was charged: the collector then counts the attempt as made and the
	// next attempt takes a new key. An error means the processor could not
	// tell; the attempt stays in flight.
	LookupPayment(ctx context.Context, req PaymentRequest) (res PaymentResult, found bool, err error)
}

// ReplayWindow is implemented by providers whose processor forgets
// idempotency keys: a request replayed after the window may be charged as
// a new one. The collector replays an attempt in flight only while
// it is younger than the window (by the collector's clock, from
// [Attempt.Started]); older ones are resolved only through
// [PaymentLookup]. A provider that does not implement it, or returns 0,
// is taken to keep its keys for ever.
type ReplayWindow interface {
	ReplayWindow() time.Duration
}

// RequestTimeout is implemented by providers that know the longest a
// request can keep running at the processor once sent: the HTTP client's
// timeout times the tries the client makes with one key, plus their
// backoff (Stripe's Go client: 80 seconds a try, 3 tries by default). A
// lookup that finds no payment for a key proves nothing while a request
// with that key may still be running (a holder that lost its lease
// mid-call, a replay answered [ErrKeyInUse]): the collector counts the
// attempt as never made only once its latest presentation
// ([Attempt.LastPresented]) is older than this; until then the attempt
// stays in flight. Providers that do not implement it, or return 0, get
// [DefaultRequestTimeout].
type RequestTimeout interface {
	RequestTimeout() time.Duration
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
	// Started is when the attempt was recorded, before its first
	// presentation, by the collector's clock ([Attempt.Started]); no
	// request with the key reached the processor earlier. Zero when the
	// caller does not know.
	Started time.Time
	// PriorPayment is the processor's ID of the payment the period's
	// earlier attempts left on the record (its transaction_id, e.g. a
	// declined PaymentIntent), or "" for the period's first attempt and
	// records that name none. A provider must not create a new payment
	// while this one can still succeed (see One payment per period on
	// [PaymentProvider]). It is the same for every presentation of one
	// attempt: the record does not change while the attempt is in
	// flight.
	PriorPayment string
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
// Attempt n is made only after the outcomes of attempts 1..n-1 are
// recorded (billing_attempt), and it is written on the record with its key
// before the call (billing_attempt_number, billing_attempt_key), so a
// crash or an unknown outcome leaves the same key for the rerun to replay.
func IdempotencyKey(subscriptionID string, attempt int) string {
	return "dynabill:" + subscriptionID + ":" + strconv.Itoa(attempt)
}
