package billing

import (
	"errors"
)

// CollisionPolicy makes the keys of a batch of records distinct before a
// batch write, which cannot hold two writes of one key. It returns the
// records to write (copies; the input is not modified) or an error when the
// collisions cannot be resolved.
//
// The stores default to the legacy rule, made deterministic: of the records
// of one user sharing a billing_date, the SCHEDULED one (else the first)
// keeps the date and every other moves to billing_date + N hours for the
// smallest free N >= 1 (two SCHEDULED records with one date are an error
// wrapping [ErrAlreadyExists]); records of one user sharing a last_run_date
// get + N nanoseconds the same way.
//
// The policy sees only the batch. Keys already taken in the store are the
// store's to resolve: a record onto a stored record's key replaces it
// (see [Repository.AddAll]), but a history row is never replaced: a
// record whose last_run_date another stored row holds moves on to a free
// one.
type CollisionPolicy func(subs []Period) ([]Period, error)

// IsConflict reports whether err is a lost race ([ErrConflict] or
// [ErrAlreadyExists]) rather than a failure: the caller re-reads and
// decides again.
func IsConflict(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrAlreadyExists)
}
