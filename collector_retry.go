package billing

import "time"

// RetryPolicy decides whether the retry run attempts an ERROR record now.
type RetryPolicy interface {
	// ShouldRetry reports whether sub (status ERROR) should be attempted at
	// now. Records declined as not retryable (NoRetry) never reach it.
	ShouldRetry(sub *Period, now time.Time) bool
}

// DefaultRetryPolicy attempts an ERROR record once a day (UTC calendar
// days: not again on the day of its last run) while its billing date is
// within Window of now.
type DefaultRetryPolicy struct {
	// Window is how long after the billing date retries go on. Defaults to
	// 30 days.
	Window time.Duration
}

// ShouldRetry implements [RetryPolicy].
func (p DefaultRetryPolicy) ShouldRetry(sub *Period, now time.Time) bool {
	window := p.Window
	if window <= 0 {
		window = 30 * 24 * time.Hour
	}
	if now.Sub(sub.BillingDate) > window {
		return false
	}
	if sub.LastRunDate.IsZero() {
		return true
	}
	return utcDay(now).After(utcDay(sub.LastRunDate))
}

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
