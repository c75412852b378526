package billingui

import (
	"fmt"
	"net/url"
	"strconv"
)

// maxPageNumber bounds a page number of the console's links: far beyond
// any timeline a user's history holds (DefaultHistoryPage rows a page),
// and small enough that no product of it overflows.
const maxPageNumber = 1 << 20

// paramError is a query parameter that is not a number the page takes: the
// page answers 400 with its sentence.
type paramError struct {
	name, value string
	min, max    int
}

func (e *paramError) Error() string {
	v := e.value
	if len(v) > 24 {
		v = v[:24] + "…"
	}
	return fmt.Sprintf("%s must be a whole number from %d to %d, not %q", e.name, e.min, e.max, v)
}

// intParam reads the query parameter name of q as a decimal whole number
// from lo to hi; absent or empty, it is def. Anything else (a sign where lo
// is 0, a fraction, a number out of range, however long) is a
// *paramError.
func intParam(q url.Values, name string, lo, hi, def int) (int, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	// Only digits (and a minus sign where negatives are allowed): Atoi
	// would take a plus sign and surrounding zeros of any length.
	ok := len(s) <= 20
	for i, c := range s {
		if !(c >= '0' && c <= '9' || c == '-' && i == 0 && lo < 0 && len(s) > 1) {
			ok = false
			break
		}
	}
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < lo || n > hi {
		return 0, &paramError{name: name, value: s, min: lo, max: hi}
	}
	return n, nil
}
