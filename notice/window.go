package notice

import (
	"fmt"
	"time"

	"github.com/dynabill/billing"
)

// Window returns the range of billing dates the daily pre-billing
// notifier looks at when it runs at now: [start, end), where start is
// midnight UTC of now's UTC date plus [billing.NoticeLeadDays] days and end
// is start plus one day. For a run at 2026-12-29T23:59Z the window is
// [2027-01-02, 2027-01-03).
//
// A non-empty override (the scheduler event's date field, used for manual
// backfill runs) replaces the computed start: it must be exactly eight digits
// "YYYYMMDD" naming a real date (year 0001..9999), and start is that date at
// 00:00 UTC; now is then ignored. The error is a [*billing.FieldError]
// wrapping [billing.ErrInvalidDate] for a malformed override, or for a zero
// now when there is no override (a clock that was never injected).
func Window(now time.Time, override string) (start, end time.Time, err error) {
	if override != "" {
		start, err = parseDay(override)
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
	} else {
		if now.IsZero() {
			return time.Time{}, time.Time{}, &billing.FieldError{Field: "now", Value: "0001-01-01T00:00:00Z",
				Err: fmt.Errorf("%w: zero time (clock not set)", billing.ErrInvalidDate)}
		}
		now = now.UTC()
		start = time.Date(now.Year(), now.Month(), now.Day()+billing.NoticeLeadDays, 0, 0, 0, 0, time.UTC)
	}
	return start, start.AddDate(0, 0, 1), nil
}

// parseDay parses a strict "YYYYMMDD" date to midnight UTC.
func parseDay(s string) (time.Time, error) {
	bad := func(why string) (time.Time, error) {
		return time.Time{}, &billing.FieldError{Field: "date", Value: s,
			Err: fmt.Errorf("%w: %s (want YYYYMMDD)", billing.ErrInvalidDate, why)}
	}
	if len(s) != 8 {
		return bad("malformed")
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return bad("malformed")
		}
	}
	num := func(d string) (n int) {
		for i := range len(d) {
			n = n*10 + int(d[i]-'0')
		}
		return n
	}
	y, m, d := num(s[0:4]), num(s[4:6]), num(s[6:8])
	if y < 1 || m < 1 || m > 12 || d < 1 {
		return bad("no such date")
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Day() != d { // the 31st of a 30-day month, 29 February of a common year
		return bad("no such date")
	}
	return t, nil
}
