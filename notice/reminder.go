package notice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dynabill/billing"
)

// Reminder returns the reminder m is about.
func (m *Message) Reminder() Reminder {
	return Reminder{UserID: m.UserID, BillingDate: m.BillingDate, SubscriptionID: m.SubscriptionID, Status: m.Status}
}

// reminderReleaseTimeout bounds the release that follows a failed send; it
// runs even when the message's context is done (a timed-out send is the
// usual failure), so that a retry can send.
const reminderReleaseTimeout = 10 * time.Second

// claimReminder claims m's reminder. It returns the claim, or the outcome
// of a message that must not be sent, or an error to retry the message.
func (w *Worker) claimReminder(ctx context.Context, m *Message) (*ReminderClaim, Outcome, error) {
	if w.cfg.Reminders == nil {
		return nil, "", nil
	}
	c, err := w.cfg.Reminders.ClaimReminder(ctx, m.Reminder(), w.cfg.Clock.Now())
	switch {
	case err == nil:
		return &c, "", nil
	case errors.Is(err, billing.ErrReminderClaimed):
		return nil, SkippedDuplicate, nil
	case errors.Is(err, billing.ErrConflict):
		return nil, SkippedRecordChanged, nil
	}
	return nil, "", fmt.Errorf("billing: notifier worker: claim reminder (%s): %w", m.Reminder().Key(), err)
}

// releaseReminder undoes c after the send failed with sendErr and returns
// the message's error: sendErr, joined with the release's error if it
// failed too (the reminder is then lost: a retry finds it claimed).
func (w *Worker) releaseReminder(ctx context.Context, c *ReminderClaim, sendErr error) error {
	if c == nil {
		return sendErr
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reminderReleaseTimeout)
	defer cancel()
	if err := w.cfg.Reminders.ReleaseReminder(rctx, *c); err != nil {
		w.cfg.Logger.ErrorContext(ctx, "billing: notifier worker: cannot release the reminder after a failed send; it will not be sent",
			"user_id", c.UserID, "billing_date", c.BillingDate, "error", err)
		return errors.Join(sendErr, fmt.Errorf("billing: notifier worker: release reminder (%s): %w", c.Key(), err))
	}
	return sendErr
}
