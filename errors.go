package billing

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Test for them with [errors.Is]; the errors returned by the
// package wrap them with the operation, the key and the offending value.
var (
	// ErrInvalidAmount reports a money amount that is not an exact,
	// non-negative decimal with at most two fraction digits.
	ErrInvalidAmount = errors.New("billing: invalid amount")

	// ErrInvalidStatus reports a billing_status value the library does not know.
	ErrInvalidStatus = errors.New("billing: invalid status")

	// ErrInvalidTerm reports a term value other than MONTHLY or YEARLY.
	ErrInvalidTerm = errors.New("billing: invalid term")

	// ErrInvalidDate reports a malformed or out-of-range date or timestamp.
	ErrInvalidDate = errors.New("billing: invalid date")

	// ErrInvalidItem reports a stored item that cannot be decoded into a
	// [Subscription]. The error is always a [*FieldError] naming the attribute.
	ErrInvalidItem = errors.New("billing: invalid item")

	// ErrAttemptInFlight reports a record whose latest collection attempt
	// has no known outcome: the processor may have charged it, and neither a
	// replay nor a lookup could tell. Nothing was changed; try again later.
	// The error is an [*InFlightError] naming the key.
	ErrAttemptInFlight = errors.New("billing: attempt in flight, outcome unknown")

	// ErrIllegalTransition reports a status change the transition table
	// forbids. The error is a [*TransitionError] carrying both statuses.
	ErrIllegalTransition = errors.New("billing: illegal status transition")
)

// FieldError reports bad input and names where it was found: the field or
// attribute, the value, and (for stored items) the item's key.
type FieldError struct {
	// Field is the attribute or field name, e.g. "billing_amount".
	Field string
	// Value is the offending value as text (truncated when long).
	Value string
	// Key identifies the item, e.g. "user_id=u1 billing_date=2024-01-31T00:00:00Z".
	// Empty when the input was not a stored item.
	Key string
	// Err is the underlying cause, usually wrapping one of the sentinels.
	Err error
}

// Error implements error.
func (e *FieldError) Error() string {
	v := e.Value
	if len(v) > 64 {
		v = v[:64] + "…"
	}
	if e.Key != "" {
		return fmt.Sprintf("%s: attribute %s=%q of item (%s)", e.Err, e.Field, v, e.Key)
	}
	return fmt.Sprintf("%s: %s=%q", e.Err, e.Field, v)
}

// Unwrap returns the underlying cause.
func (e *FieldError) Unwrap() error { return e.Err }

// Lock errors.
var (
	// ErrAlreadyLocked reports that another holder has the user's billing
	// lock. It is returned at once, without waiting: the caller skips the
	// user and leaves the record untouched.
	ErrAlreadyLocked = errors.New("billing: user's billing is locked")

	// ErrLeaseLost reports that a lease expired or could not be renewed
	// before it was released: another process may have taken the lock since.
	ErrLeaseLost = errors.New("billing: lock lease lost")
)

// Storage errors. The storage implementations translate DynamoDB's
// exceptions into these; callers never match SDK types or strings.
var (
	// ErrNotFound reports that no record has the requested key or ID.
	ErrNotFound = errors.New("billing: not found")

	// ErrConflict reports a conditional write that failed because the stored
	// record is not what the writer read: someone else wrote first, or the
	// record is gone. The error is a [*ConflictError].
	ErrConflict = errors.New("billing: conflict")

	// ErrAlreadyExists reports an add whose key is already taken.
	ErrAlreadyExists = errors.New("billing: already exists")

	// ErrInvalidCursor reports a continuation token that is malformed,
	// edited, or belongs to another query. A run never restarts from the top
	// on such a token: it fails.
	ErrInvalidCursor = errors.New("billing: invalid cursor")

	// ErrInvalidQuery reports query parameters that contradict each other or
	// are missing (e.g. no status).
	ErrInvalidQuery = errors.New("billing: invalid query")
)

// ConflictError reports a failed conditional write. It wraps [ErrConflict],
// or [ErrAlreadyExists] when the write was an add whose key exists.
type ConflictError struct {
	// Op is the operation: "add", "update", "admin update", "history add".
	Op string
	// Key identifies the record.
	Key string
	// Reason says which condition failed, e.g. "status or last_run_date
	// changed" or "record does not exist", as far as the store can tell.
	Reason string
	// HistoryRow is set when the failed condition was the history row's key
	// (another row of the user already has this last_run_date), not the
	// record itself: the record's condition held, and the same write with a
	// later last_run_date may succeed.
	HistoryRow bool
	// Taken is set when the failed condition was that the new key of a
	// moved record is taken by another record (an AdminUpdate onto a
	// billing date the user already has). The error then also matches
	// [ErrAlreadyExists].
	Taken bool
	// Err is ErrConflict or ErrAlreadyExists.
	Err error
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: %s (%s): %s", e.Err, e.Op, e.Key, e.Reason)
}

// Unwrap returns ErrConflict or ErrAlreadyExists, and ErrAlreadyExists as
// well when Taken is set.
func (e *ConflictError) Unwrap() []error {
	if e.Taken && e.Err != ErrAlreadyExists {
		return []error{e.Err, ErrAlreadyExists}
	}
	return []error{e.Err}
}

// BatchError reports a batch add that did not write every item. Unwritten
// lists the keys of the records not written to the primary table or the
// history table (or both); everything else was written exactly once.
type BatchError struct {
	// Unwritten names the records not (completely) written.
	Unwritten []string
	// Err is the last error seen.
	Err error
}

// Error implements error.
func (e *BatchError) Error() string {
	return fmt.Sprintf("billing: batch add: %d record(s) not written %v: %v", len(e.Unwritten), e.Unwritten, e.Err)
}

// Unwrap returns the last error seen.
func (e *BatchError) Unwrap() error { return e.Err }

// IsHistoryKeyConflict reports whether err is a [*ConflictError] caused only
// by a taken history key (see [ConflictError.HistoryRow]).
func IsHistoryKeyConflict(err error) bool {
	var ce *ConflictError
	return errors.As(err, &ce) && ce.HistoryRow
}

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
