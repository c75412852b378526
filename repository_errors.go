package billing

import (
	"errors"
	"fmt"
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
