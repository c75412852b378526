package billing

import (
	"fmt"
	"time"
)

// staleMargin is how much newer than the stale limit
// ([Config.OldSubscriptionDays] before now) a billing date must be for the
// engine to set it: a date a caller gives ([Collector.Subscribe],
// [Periods.Move], [Collector.Reactivate]) and the date a
// record too old to collect goes on at. The limit moves with the clock: a
// date accepted minutes inside it would be past it at the next run, marked
// STALE and not charged, and the period lost. With the margin, a run within
// a day of the date being set still collects it.
const staleMargin = 24 * time.Hour

// staleAge is the age (now minus billing date) past which a SCHEDULED or
// ERROR record is marked STALE instead of collected.
func (c *Collector) staleAge() time.Duration {
	return time.Duration(c.cfg.OldSubscriptionDays) * 24 * time.Hour
}

// oldestSettable is the oldest billing date the engine sets at now: the
// stale limit plus staleMargin.
func (c *Collector) oldestSettable(now time.Time) time.Time {
	return now.Add(-c.staleAge() + staleMargin)
}

// billingDay reads a date a caller gives for a billing date. A billing
// date is a wall-clock date and time in UTC: date's year, month, day and
// time of day are taken as written, in UTC, to the second, so an offset
// never moves the day (2024-04-16T09:30:00+14:00 is the 16th at 09:30
// UTC, not the 15th). It must be
//
//   - a date of the years 1 to 9999;
//   - at least staleMargin newer than [Config.OldSubscriptionDays]
//     before now: a record older than that is marked stale instead of
//     collected, so a date at or past the limit would lose the period (with
//     the default 30 days, a date may be up to 29 days old);
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
	oldest := c.oldestSettable(now)
	switch {
	case day.Before(oldest):
		return refuse("before %s: a record more than %d days old is marked stale, not collected, "+
			"so a billing date must be at least %g hours newer than that for the next run to collect it",
			oldest.UTC().Format(time.RFC3339), c.cfg.OldSubscriptionDays, staleMargin.Hours())
	case day.After(now.Add(MaxDateAhead)):
		return refuse("after %s: more than three years ahead", now.Add(MaxDateAhead).UTC().Format(time.DateOnly))
	}
	return day, nil
}
