package notice

import "github.com/dynabill/billing"

// This file is the notifier's part of trials and free periods: the
// reminder before a trial's first charge is a message of its own, and a
// period of zero is never announced as a charge.

// notificationEventType is the event_type of the notification for m.
func notificationEventType(m *Message) string {
	if m.AfterTrial || m.UpdatedEvent == billing.UpdatedTrialConverted {
		return billing.TrialEndingNoticeEvent
	}
	return billing.RenewalNoticeEvent
}

// freeNotice reports whether m is about a period of zero, which the
// worker does not announce.
func freeNotice(m *Message) bool { return m.Amount == 0 }

// afterTrial reports whether p is the first paid period after a trial,
// not charged or attempted yet: the trial is still running (the engine's
// own test, [billing.Period.IsFirstAfterTrial]).
func afterTrial(p *billing.Period) bool { return p.IsFirstAfterTrial() }
