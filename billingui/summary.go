package billingui

import (
	"time"

	"github.com/dynabill/billing"
)

// owed sums what the user owes: the amounts of the open periods whose
// charge was declined (ERROR). A period being charged (ACHSENT) or not due
// yet is not owed.
func owed(v *billing.Subscription) billing.Amount {
	var sum billing.Amount
	for _, p := range v.Open {
		if p.Status == billing.StatusError {
			sum += p.Amount
		}
	}
	return sum
}

// resumeDate returns the date a paused user is charged again: the latest
// PAUSED period stands for the month on its billing date and carries the
// months left of the pause (this one included), so billing resumes that
// many calendar months after it ([billing.Schedule.AfterPause], as the pause
// run opens the periods). Zero when the user has no PAUSED period.
//
// The view does not carry this date; it is computed here from the view's
// open periods.
func resumeDate(v *billing.Subscription) time.Time {
	var last *billing.Period
	for i := range v.Open {
		if v.Open[i].Status == billing.StatusPaused {
			last = &v.Open[i]
		}
	}
	if last == nil {
		return time.Time{}
	}
	at, err := last.Schedule().AfterPause(last.BillingDate, max(last.PauseDurationMonths, 1))
	if err != nil {
		return time.Time{}
	}
	return at
}
