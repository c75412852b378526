package billing

import (
	"errors"
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

// refusal is a change refused for the status of the subscription or of
// one of its periods: nothing was written. It matches the change's own
// sentinel ([ErrPauseRefused], ...) and [ErrNotCollectible], and its
// message says what to do first.
type refusal struct {
	sentinel error
	msg      string
}

func (e *refusal) Error() string { return e.sentinel.Error() + ": " + e.msg }

// Unwrap returns the change's sentinel and [ErrNotCollectible].
func (e *refusal) Unwrap() []error {
	if e.sentinel == ErrNotCollectible {
		return []error{ErrNotCollectible}
	}
	return []error{e.sentinel, ErrNotCollectible}
}

// refusedSentinel is the sentinel of op's refusals: its own for a plan
// change, a pause and a resume, [ErrNotCollectible] for the others.
func refusedSentinel(op opName) error {
	switch op {
	case opChangeTier:
		return ErrPlanChangeRefused
	case opPause:
		return ErrPauseRefused
	case opResume:
		return ErrResumeRefused
	}
	return ErrNotCollectible
}

// refused returns op's refusal, the message formatted from format and args.
func refused(op opName, format string, args ...any) error {
	return &refusal{sentinel: refusedSentinel(op), msg: fmt.Sprintf(format, args...)}
}

// inFlightRefused adds op's own sentinel to err, an attempt in flight
// refusing op, with what to do: try again once the outcome is known.
// Any other error, and the error of an op without a sentinel of its own,
// is returned as it is.
func inFlightRefused(op opName, err error) error {
	s := refusedSentinel(op)
	if s == ErrNotCollectible || !errors.Is(err, ErrAttemptInFlight) {
		return err
	}
	return fmt.Errorf("%w: a payment of the subscription has no known outcome yet: try again once the processor "+
		"answers (the call resolves the payment first, as the next run does): %w", s, err)
}

// statusFix says what to do before op may act on a period in status st,
// a status op does not take: "" when nothing helps.
func statusFix(op opName, st Status) string {
	switch {
	case op == opResume && st != StatusPaused:
		return "it is not paused: nothing to resume"
	case st == StatusError:
		return "its charge was declined and is owed: collect it (Periods.Repay) or waive it (Periods.Waive) first"
	case st == StatusACHSent:
		return "its bank debit awaits settlement: try again once it settles"
	case st == StatusPaused:
		return "it is paused: resume it first (Collector.Resume, or Periods.Resume for this period)"
	case st.IsTerminal():
		return "it is closed: act on the subscription's open period (Collector.Subscription lists it)"
	}
	return ""
}

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

// OpenSubscriptionError reports a record refused because its user already
// has an open subscription on a layout that allows one per user. It wraps
// [ErrOpenSubscription].
type OpenSubscriptionError struct {
	// UserID is the user.
	UserID string
	// New is the key of the record refused.
	New string
	// Open is the key and Status the status of the user's open record.
	Open   string
	Status Status
}

// Error implements error.
func (e *OpenSubscriptionError) Error() string {
	return fmt.Sprintf("%s: %s not added: %s is %s", ErrOpenSubscription, e.New, e.Open, e.Status)
}

// Unwrap returns [ErrOpenSubscription].
func (e *OpenSubscriptionError) Unwrap() error { return ErrOpenSubscription }

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

// isHistoryKeyConflict reports whether err is a [*ConflictError] caused only
// by a taken history key (see [ConflictError.HistoryRow]).
func isHistoryKeyConflict(err error) bool {
	if err == nil {
		return false // without errors.As, whose target would escape
	}
	var ce *ConflictError
	return errors.As(err, &ce) && ce.HistoryRow
}

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
	// BillingDate and Status are the stored item's billing date and
	// status when those attributes decode although the item does not
	// (zero and "" otherwise): what a check of the user's records can
	// still tell of a record a per-user read skipped.
	BillingDate time.Time
	Status      Status
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

// invalidField returns the error of a value outside an enum: a
// [*FieldError] naming field and the value as given, wrapping sentinel.
func invalidField(field string, sentinel error) func(value string) error {
	return func(value string) error { return &FieldError{Field: field, Value: value, Err: sentinel} }
}
