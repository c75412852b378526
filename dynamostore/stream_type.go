package dynamostore

import (
	"fmt"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// historyEventType is the event type of a history row: its Change, or the
// type derived from the row by the table on [StreamDecoder].
func historyEventType(row *billing.Period) (billing.EventType, error) {
	if row.Change != "" {
		return row.Change, nil
	}
	opening := !row.CreatedDate.IsZero() && row.CreatedDate.Equal(row.LastRunDate)
	subscribed := row.UpdatedEvent == billing.UpdatedUserSubscribed || row.Process == billing.ProcessSubscribe
	switch row.Status {
	case billing.StatusCompleted:
		if row.IsTrial() {
			return billing.EventTrialEnded, nil
		}
		return billing.EventPaymentSucceeded, nil
	case billing.StatusACHSent:
		return billing.EventPaymentPending, nil
	case billing.StatusError:
		return billing.EventPaymentDeclined, nil
	case billing.StatusRefunded:
		return billing.EventPaymentRefunded, nil
	case billing.StatusStale:
		if row.UpdatedEvent == billing.UpdatedACHOverdue {
			return billing.EventPaymentACHOverdue, nil
		}
		return billing.EventStale, nil
	case billing.StatusPausedSkipped:
		return billing.EventPauseMonthSkipped, nil
	case billing.StatusWaived:
		return billing.EventWaived, nil
	case billing.StatusCancelled:
		return billing.EventCancelled, nil
	case billing.StatusPaused:
		switch {
		case opening && subscribed:
			return billing.EventSubscriptionCreated, nil
		case opening:
			return billing.EventPeriodOpened, nil
		}
		return billing.EventPaused, nil
	case billing.StatusScheduled:
		switch {
		case opening && subscribed && row.IsTrial():
			return billing.EventTrialStarted, nil
		case opening && subscribed:
			return billing.EventSubscriptionCreated, nil
		case opening && row.IsAfterTrial():
			return billing.EventTrialConverted, nil
		case opening && row.UpdatedEvent == billing.UpdatedUserReactivated:
			return billing.EventSubscriptionReactivated, nil
		case opening:
			return billing.EventPeriodOpened, nil
		case row.UpdatedEvent == billing.UpdatedPauseResume:
			return billing.EventResumed, nil
		}
		return billing.EventChanged, nil
	}
	return "", &billing.FieldError{
		Field: layout.AttrBillingStatus, Value: string(row.Status), Key: row.Key(),
		Err: fmt.Errorf("%w: a history row in status %q records no known change", billing.ErrInvalidItem, row.Status),
	}
}
