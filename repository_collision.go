package billing

import (
	"errors"
)

// CollisionPolicy makes the keys of a batch of records distinct before a
// batch write, which cannot hold two writes of one key. It returns the
// records to write (copies; the input is not modified) or an error when the
// collisions cannot be resolved. DefaultCollisionPolicy is the legacy rule.
type CollisionPolicy func(subs []Subscription) ([]Subscription, error)

// IsConflict reports whether err is a lost race ([ErrConflict] or
// [ErrAlreadyExists]) rather than a failure: the caller re-reads and
// decides again.
func IsConflict(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrAlreadyExists)
}
