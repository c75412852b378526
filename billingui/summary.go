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
			// What its next attempt asks: the plan less discounts, with
			// proration and balance (a one-off charge: its lines).
			due, _, _ := p.Due()
			sum += due
		}
	}
	return sum
}

// resumeDate returns the date a paused user is charged again: that of the
// latest PAUSED period ([billing.Period.ResumeDate]: its months from its
// billing date, or from the trial's end for a trial paused before its
// period was completed). Zero when the user has no PAUSED period. Unlike
// the view's NextChargeDate it is set for a free plan too.
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
	at, err := last.ResumeDate()
	if err != nil {
		return time.Time{}
	}
	return at
}
