package billing

import (
	"errors"
	"fmt"
)

// Errors of bad values. Test for them with [errors.Is]; the errors returned
// by the package wrap them with the operation, the key and the offending
// value.
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

// invalidField returns the error of a value outside an enum: a
// [*FieldError] naming field and the value as given, wrapping sentinel.
func invalidField(field string, sentinel error) func(value string) error {
	return func(value string) error { return &FieldError{Field: field, Value: value, Err: sentinel} }
}
