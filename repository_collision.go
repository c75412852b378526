package billing

import (
	"errors"
)

// IsConflict reports whether err is a lost race ([ErrConflict] or
// [ErrAlreadyExists]) rather than a failure: the caller re-reads and
// decides again.
func IsConflict(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrAlreadyExists)
}
