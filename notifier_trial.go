package billing

// This file is the notifier's part of trials and free periods: the
// reminder before a trial's first charge is a message of its own, and a
// period of zero is never announced as a charge.

// notificationEventType is the event_type of the notification for m.
func notificationEventType(m *NotificationMessage) string {
	if m.AfterTrial || m.UpdatedEvent == UpdatedTrialConverted {
		return TrialEndingNoticeEvent
	}
	return RenewalNoticeEvent
}

// freeNotice reports whether m is about a period of zero, which the
// worker does not announce.
func freeNotice(m *NotificationMessage) bool { return m.Amount == 0 }
