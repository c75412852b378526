package billing

import (
	"errors"
	"fmt"
	"time"
)

// InFlightError reports an operation refused, or a record left alone,
// because the record's attempt [Subscription.LastAttempt] is in flight and
// its outcome could not be resolved. It wraps [ErrAttemptInFlight] and the
// reason the outcome is unknown.
type InFlightError struct {
	// SubscriptionID and Key identify the record and the attempt's
	// idempotency key; Amount is the amount it asked for.
	SubscriptionID string
	Key            string
	Amount         Amount
	// Started is when the attempt was recorded.
	Started time.Time
	// Err says why the outcome is unknown (the provider's error, or that
	// the processor's replay window has passed and it offers no lookup).
	Err error
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("%s: %s key %s (%s, started %s): %v", ErrAttemptInFlight, e.SubscriptionID, e.Key, e.Amount,
		e.Started.UTC().Format(time.RFC3339), e.Err)
}

// Unwrap returns [ErrAttemptInFlight] and the reason.
func (e *InFlightError) Unwrap() []error { return []error{ErrAttemptInFlight, e.Err} }

// Collector errors.
var (
	// ErrNotCollectible reports a single collection of a record that is not
	// eligible now (already collected, not due, paused, cancelled, ...).
	ErrNotCollectible = errors.New("billing: record not collectible")

	// ErrDateMove reports a billing date move that would take a record onto or
	// across another period of its user (see [Collector.ChangeBillingDate]).
	// The error is a [*DateMoveError].
	ErrDateMove = errors.New("billing: billing date move out of order")

	// ErrTransactionMismatch reports a settlement event whose transaction ID is
	// not the one recorded on the subscription record: nothing is written.
	ErrTransactionMismatch = errors.New("billing: transaction ID does not match the record")

	// ErrSettlementEarly reports a settlement event for a record that is still
	// waiting to be collected (SCHEDULED or ERROR) and does not carry the
	// event's transaction: most likely the attempt that created the
	// transaction ended with an unknown outcome and has not been recorded yet.
	// Nothing is written; the host should deliver the event again later (the
	// next run replays the attempt's idempotency key and records it). The error
	// also wraps [ErrTransactionMismatch].
	ErrSettlementEarly = errors.New("billing: settlement arrived before its attempt was recorded")

	// ErrRateLimited reports a request the processor refused for its rate
	// limit before acting on it: nothing was charged. See [PaymentProvider].
	ErrRateLimited = errors.New("billing: processor rate limit")

	// ErrAttemptInFlight reports a record whose latest collection attempt
	// has no known outcome: the processor may have charged it, and neither a
	// replay nor a lookup could tell. Nothing was changed; try again later.
	// The error is an [*InFlightError] naming the key.
	ErrAttemptInFlight = errors.New("billing: attempt in flight, outcome unknown")
)
