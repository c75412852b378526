package billing

import (
	"fmt"
	"time"
)

// InFlightError reports an operation refused, or a record left alone,
// because the record's attempt [Period.LastAttempt] is in flight and
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
