package billing

// This file is the notifier's part of trials and free periods: the
// reminder before a trial's first charge is a message of its own, and a
// period of zero is never announced as a charge.

// TrialEndingNotificationEvent is the event_type of the notification the
// [Worker] sends instead of the pre-billing one when the record is the
// first paid period after a trial, not attempted yet
// ([NotificationMessage.AfterTrial], or updated_event
// [UpdatedTrialConverted] on a message or record written before that
// marker existed): the trial ends and the first charge
// follows on the billing date, as Stripe's
// customer.subscription.trial_will_end. It goes out with the pre-billing
// notices, [NotificationLeadDays] before the trial's end (so three to four
// days before it), and at most once per trial: it is that record's
// reminder, claimed like any other (see [WorkerConfig.Reminders]). A
// [Notifier] tells it apart by [ThreeDayNotification.EventType].
const TrialEndingNotificationEvent = "trial_will_end"

// NotificationSkippedFree: the record's amount is zero (a free tier, or a
// trial period itself): nothing will be charged, so nothing is announced.
const NotificationSkippedFree NotificationOutcome = "skipped_free"

// notificationEventType is the event_type of the notification for m.
func notificationEventType(m *NotificationMessage) string {
	if m.AfterTrial || m.UpdatedEvent == UpdatedTrialConverted {
		return TrialEndingNotificationEvent
	}
	return ThreeDayNotificationEvent
}

// freeNotice reports whether m is about a period of zero, which the
// worker does not announce.
func freeNotice(m *NotificationMessage) bool { return m.Amount == 0 }
