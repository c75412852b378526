package billing

import (
	"fmt"
	"time"
)

// MaxDateAhead is how far after now an operator may set a billing date
// ([Collector.ChangeBillingDate], [Collector.Reactivate]): three years. A
// date further out is nearly always a typing error ("2205" for "2025")
// that would leave a user unbilled for ever.
const MaxDateAhead = 3 * 366 * 24 * time.Hour

// billingDay reads a date a caller gives for a billing date. A billing
// date is a wall-clock date and time in UTC: date's year, month, day and
// time of day are taken as written, in UTC, to the second, so an offset
// never moves the day (2024-04-16T09:30:00+14:00 is the 16th at 09:30
// UTC, not the 15th). It must be
//
//   - a date of the years 1 to 9999;
//   - no older than [Config.OldSubscriptionDays] before now: a record
//     older than that is marked stale instead of collected, so a date in
//     the past could only lose the period;
//   - no later than [MaxDateAhead] after now.
//
// Anything else is a [*FieldError] naming field and wrapping
// [ErrInvalidDate].
func (c *Collector) billingDay(field string, date, now time.Time) (time.Time, error) {
	refuse := func(why string, args ...any) (time.Time, error) {
		return time.Time{}, &FieldError{Field: field, Value: date.Format(time.RFC3339),
			Err: fmt.Errorf("%w: %s", ErrInvalidDate, fmt.Sprintf(why, args...))}
	}
	if date.IsZero() {
		return refuse("a date is required")
	}
	y, m, d := date.Date()
	if y < 1 || y > 9999 {
		return refuse("the year must be 1 to 9999")
	}
	h, mi, s := date.Clock()
	day := time.Date(y, m, d, h, mi, s, 0, time.UTC)
	oldest := now.Add(-time.Duration(c.cfg.OldSubscriptionDays) * 24 * time.Hour)
	switch {
	case day.Before(oldest):
		return refuse("before %s: older than %d days, a record of that date would be marked stale, not collected",
			oldest.UTC().Format(time.DateOnly), c.cfg.OldSubscriptionDays)
	case day.After(now.Add(MaxDateAhead)):
		return refuse("after %s: more than three years ahead", now.Add(MaxDateAhead).UTC().Format(time.DateOnly))
	}
	return day, nil
}
