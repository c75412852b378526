package billing

import (
	"fmt"
	"time"

	"github.com/dynabill/billing/internal/calendar"
)

// Schedule says when a subscription is billed. It is derived from a
// subscription record (its term, billing anchor day and billing week) and
// drives [Schedule.Next] and [addBillingPeriods]. All computations are in
// UTC and never read the clock: callers pass the times in.
//
// # Where the anchor day comes from, and why
//
// A monthly subscription started on the 31st cannot be billed on the 31st
// every month, so each period's billing_date is clamped to the last day of
// its month. Once clamped, the record has lost information: an item billed
// on Feb 28 cannot tell whether the user signed up on the 28th, 29th, 30th or
// 31st, and stepping "one month after Feb 28" would drift the subscription to
// the 28th for ever. The anchor is therefore carried on the record: the
// Subscription has an optional AnchorDay field, stored in the optional
// attribute billing_anchor_day. Legacy items written without it use the day
// of that record's billing_date as the anchor, which is exactly what the
// legacy service did (so old data keeps its old behaviour). With the anchor,
// a subscription started on Jan 31 is billed Jan 31 → Feb 29 (or 28) →
// Mar 31 → Apr 30 → May 31 and never drifts to the 28th.
//
// The zero Schedule is a monthly schedule anchored on the day of the date it
// is applied to.
type Schedule struct {
	// Term is the billing term: [TermMonthly] (one month between billing
	// dates), [TermYearly] (twelve months) or [TermWeekly] (seven days).
	// The empty Term is treated as [TermMonthly], matching how an empty
	// stored term decodes.
	Term Term

	// Interval is how many terms one period spans (attribute
	// billing_interval): 3 monthly is quarterly, 6 semi-annual, 2 weekly
	// bi-weekly. 0 means 1. The anchor-day rule applies to the whole
	// interval: Jan 31 every 3 months is billed Apr 30, then Jul 31. At
	// most [MaxInterval].
	Interval int

	// AnchorDay, 1..31, is the day of the month the subscription was
	// originally billed on (attribute billing_anchor_day). A billing date
	// falls on min(AnchorDay, days in its month). 0 means "use the day of
	// the date passed in", which is how legacy records without the
	// attribute behave. AnchorDay is ignored when BillingWeek is set.
	AnchorDay int

	// BillingWeek is the Friday billing week (attribute billing_week):
	// 0 means the subscription is not on Friday billing; 1..5 means it is
	// billed on the n-th Friday of the month. A month without a fifth Friday
	// bills week-5 subscriptions on its last (fourth) Friday.
	BillingWeek int
}

// maxPeriods bounds n in [addBillingPeriods] so month arithmetic cannot
// overflow; results must in any case fall in years 1..9999.
const maxPeriods = 12 * 10000

// validate checks the schedule and returns the length of one billing
// period: months, or for a weekly term days (weekly true).
func (s Schedule) validate() (length int, weekly bool, err error) {
	switch s.Term {
	case TermMonthly, "":
		length = 1
	case TermYearly:
		length = 12
	case TermWeekly:
		length, weekly = 7, true
	default:
		return 0, false, &FieldError{Field: "term", Value: string(s.Term), Err: ErrInvalidTerm}
	}
	if s.Interval < 0 || s.Interval > MaxInterval {
		return 0, false, &FieldError{Field: "billing_interval", Value: fmt.Sprint(s.Interval),
			Err: fmt.Errorf("%w: interval must be 0..%d", ErrInvalidDate, MaxInterval)}
	}
	length *= max(s.Interval, 1)
	if s.AnchorDay < 0 || s.AnchorDay > 31 {
		return 0, false, &FieldError{Field: "billing_anchor_day", Value: fmt.Sprint(s.AnchorDay),
			Err: fmt.Errorf("%w: anchor day must be 0..31", ErrInvalidDate)}
	}
	if s.BillingWeek < 0 || s.BillingWeek > 5 {
		return 0, false, &FieldError{Field: "billing_week", Value: fmt.Sprint(s.BillingWeek),
			Err: fmt.Errorf("%w: billing week must be 0..5", ErrInvalidDate)}
	}
	return length, weekly, nil
}

// Next returns the billing date one period after current under
// schedule s: Interval months later for a monthly (or empty) term,
// 12·Interval months for a yearly term, 7·Interval days for a weekly one
// (Interval 0 counting as 1). It is addBillingPeriods(current, s, 1).
//
// For monthly and yearly terms the day is min(anchor, days in the target month), where the anchor is
// s.AnchorDay or, when that is 0, the day of current; so with AnchorDay 31,
// Jan 31 → Feb 29 (leap year) → Mar 31 → Apr 30, and a yearly subscription
// anchored on Feb 29 is billed on Feb 28 in common years and Feb 29 in leap
// years. With s.BillingWeek set the result is the n-th Friday of the target
// month instead (its last Friday when there is no fifth). The time of day of
// current is kept and the result is in UTC; current is converted to UTC
// first, so the day and month are those of the UTC instant.
//
// The error wraps [ErrInvalidTerm] for an unknown term, and [ErrInvalidDate]
// for an AnchorDay outside 0..31, a BillingWeek outside 0..5 or a zero
// current.
func (s Schedule) Next(current time.Time) (time.Time, error) {
	return addBillingPeriods(current, s, 1)
}

// addBillingPeriods returns the billing date n periods after start under
// schedule s (n may be 0 or negative). It is computed directly from start's
// month and the anchor day, not by stepping one period at a time, so it never
// drifts: with AnchorDay 31 the 13th period after Jan 31 is Feb 28 of the
// following year regardless of the short months in between, and every
// quarter of a Jan 31 quarterly plan falls on its month's last day or the
// 31st. A weekly term adds 7·Interval·n days.
//
// The rules, time-of-day handling and errors are those of [Schedule.Next];
// in addition the result must fall in the years 1..9999.
func addBillingPeriods(start time.Time, s Schedule, n int) (time.Time, error) {
	step, weekly, err := s.validate()
	if err != nil {
		return time.Time{}, err
	}
	if start.IsZero() {
		return time.Time{}, &FieldError{Field: "billing_date", Value: "0001-01-01T00:00:00Z",
			Err: fmt.Errorf("%w: zero time", ErrInvalidDate)}
	}
	if n > maxPeriods || n < -maxPeriods {
		return time.Time{}, fmt.Errorf("%w: %d billing periods after %s is out of range",
			ErrInvalidDate, n, start.UTC().Format(time.RFC3339))
	}
	start = start.UTC()
	if weekly {
		t := start.AddDate(0, 0, n*step)
		if t.Year() < 1 || t.Year() > 9999 {
			return time.Time{}, fmt.Errorf("%w: %d billing periods after %s is out of range",
				ErrInvalidDate, n, start.Format(time.RFC3339))
		}
		return t, nil
	}
	// Month index counted from year 0, so the target year and month come
	// from one division and never depend on time.Date normalisation.
	idx := start.Year()*12 + int(start.Month()-1) + n*step
	year, month := floorDiv(idx, 12), time.Month(floorMod(idx, 12)+1)
	if year < 1 || year > 9999 {
		return time.Time{}, fmt.Errorf("%w: %d billing periods after %s is out of range",
			ErrInvalidDate, n, start.Format(time.RFC3339))
	}
	var day int
	if s.BillingWeek != 0 {
		day = calendar.NthFriday(year, month, s.BillingWeek).Day()
	} else {
		anchor := s.AnchorDay
		if anchor == 0 {
			anchor = start.Day()
		}
		day = min(anchor, daysIn(year, month))
	}
	return time.Date(year, month, day,
		start.Hour(), start.Minute(), start.Second(), start.Nanosecond(), time.UTC), nil
}

// AfterPause returns the billing date on which a subscription paused
// on its billing date paused for the given number of months is charged
// again: that many calendar months later on every term, so a yearly plan
// paused for two months resumes two months after paused (and is billed
// yearly from the resume date). The day follows s as in
// [addBillingPeriods]: min(anchor, days in the month), or the n-th Friday
// for a Friday-billing schedule; the time of day is kept.
//
// months must be at least 1 (an error wrapping [ErrInvalidQuery]
// otherwise); the other errors are those of [addBillingPeriods], including
// [ErrInvalidTerm] for an unknown term.
func (s Schedule) AfterPause(paused time.Time, months int) (time.Time, error) {
	if _, _, err := s.validate(); err != nil {
		return time.Time{}, err
	}
	if months < 1 {
		return time.Time{}, fmt.Errorf("%w: pause of %d months", ErrInvalidQuery, months)
	}
	s.Term, s.Interval = TermMonthly, 1
	return addBillingPeriods(paused, s, months)
}

// ResumeDate returns the billing date on which the subscription of s, a
// PAUSED record, is charged again: [Schedule.AfterPause] of its billing date
// and its months, or, for a trial paused before its period was completed,
// of the trial's end (the pause pushes the first charge). A record that is
// not PAUSED is an error wrapping [ErrInvalidQuery]. A host shows it as a
// paused subscription's resume date rather than the date skipped.
func (s *Period) ResumeDate() (time.Time, error) {
	if s.Status != StatusPaused {
		return time.Time{}, fmt.Errorf("%w: %s is %s, not PAUSED", ErrInvalidQuery, s.SubscriptionID, s.Status)
	}
	// As the pause run counts: a paused month is skipped even when its
	// months say 0; a trial's own period is no month of the pause.
	from, months := s.BillingDate, max(s.PauseDurationMonths, 1)
	if s.IsTrial() {
		from, months = s.TrialEnd, s.PauseDurationMonths
		if months <= 0 {
			return from, nil
		}
	}
	return s.Schedule().AfterPause(from, months)
}

// BillingPeriod returns the billing_period attribute value of t: its UTC
// month as "MM/YYYY", e.g. "01/2024".
func BillingPeriod(t time.Time) string {
	return t.UTC().Format("01/2006")
}

// parseBillingPeriod parses a billing_period value. The input must be exactly
// "MM/YYYY": a two-digit month 01..12, a slash and a four-digit year
// 0001..9999, nothing else (no spaces, signs or shorter forms). The error is
// a [*FieldError] for field billing_period wrapping [ErrInvalidDate].
func parseBillingPeriod(s string) (year int, month time.Month, err error) {
	bad := func(why string) (int, time.Month, error) {
		return 0, 0, &FieldError{Field: "billing_period", Value: s,
			Err: fmt.Errorf("%w: %s (want MM/YYYY)", ErrInvalidDate, why)}
	}
	if len(s) != 7 || s[2] != '/' {
		return bad("malformed")
	}
	m, ok := digits(s[0:2])
	if !ok {
		return bad("malformed month")
	}
	y, ok := digits(s[3:7])
	if !ok {
		return bad("malformed year")
	}
	if m < 1 || m > 12 {
		return bad("month out of range")
	}
	if y < 1 {
		return bad("year out of range")
	}
	return y, time.Month(m), nil
}

// digits parses s, which must consist only of ASCII digits, as a decimal.
func digits(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// daysIn returns the number of days in the month.
func daysIn(year int, month time.Month) int {
	return time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int) int { return a - floorDiv(a, b)*b }

// DueAt is the one rule of what is due: at instant now, s is due when its
// billing date is before now. A record is never charged before its billing
// date and time: a run at noon collects what is billed before noon, and a
// record billed at 18:00 is collected by the next run after 18:00. The
// scheduled and pause runs query by it (runQuery), single
// collections and the HTTP API's repayment check it, and `billingctl due`
// previews a run at an instant with it.
func (s *Period) DueAt(now time.Time) bool { return s.BillingDate.Before(now) }

// Clock tells the time. Everything in the library that needs "now" takes a
// Clock, so tests can drive time (billingtest.Clock) and runs are
// reproducible.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock in UTC. The zero value is ready to use and is
// the default wherever a Clock is optional.
type SystemClock struct{}

// Now returns time.Now in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// ClockFunc adapts a function to [Clock].
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }
