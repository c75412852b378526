package billing

import (
	"context"
	"time"
)

// This file holds the ports of the pre-billing notifier: what the host
// plugs in (a [Notifier], a [UserDirectory]), what its Notifier receives
// (a [RenewalNotice]) and what the stores implement for the notifier (notice.ReminderClaimer).
// The notifier itself, a daily scheduler and a queue worker, is package
// [github.com/dynabill/billing/notice].

// The pre-billing notice: its lead, its event names and what it shows.
const (
	// NoticeLeadDays is how many days ahead of a billing date the
	// pre-billing notification is sent: the notifier runs daily and looks for
	// subscriptions whose billing_date falls on today (UTC) + NoticeLeadDays,
	// which gives users about four days' notice (see package notice's
	// Window).
	NoticeLeadDays = 4

	// RenewalNoticeEvent is the event name (and event_type) of the
	// pre-billing notification and of the worker messages.
	RenewalNoticeEvent = "three_day_notification"

	// TrialEndingNoticeEvent is the event_type of the notification the
	// notifier's worker sends instead of the pre-billing one when the record
	// is the first paid period after a trial, not attempted yet (a message
	// with AfterTrial set, or updated_event [UpdatedTrialConverted] on a
	// message or record written before that marker existed): the trial ends
	// and the first charge follows on the billing date, as Stripe's
	// customer.subscription.trial_will_end. It goes out with the pre-billing
	// notices, [NoticeLeadDays] before the trial's end (so three to four
	// days before it), and at most once per trial: it is that record's
	// reminder, claimed like any other (see notice.ReminderClaimer). A
	// [Notifier] tells it apart by [RenewalNotice.EventType].
	TrialEndingNoticeEvent = "trial_will_end"

	// UserStatusActive is the user-service status of a user who is notified.
	UserStatusActive = "ACTIVE"
)

// User is what the notifier's worker needs from the host's user service.
type User struct {
	// ID is the user's ID, the records' user_id.
	ID string
	// Email identifies the user to the [Notifier].
	Email string
	// FirstName and LastName are for the host's step after a send (the
	// worker's AfterSend, the legacy prenote submission).
	FirstName, LastName string
	// Status is the user-service status; only [UserStatusActive] users are
	// notified.
	Status string
	// DateJoined is when the user signed up, for the host's AfterSend step
	// (the legacy prenote policy skips its payment check for users younger
	// than 30 days). Zero means unknown.
	DateJoined time.Time
}

// UserDirectory looks users up in the host's user service.
type UserDirectory interface {
	// GetUser returns the user with the ID. Any error (including "no such
	// user") fails the message, which SQS then redelivers.
	GetUser(ctx context.Context, userID string) (User, error)
}

// RenewalNotice is the notice a user gets before a charge: the notifier
// picks the periods billed [NoticeLeadDays] (4) days ahead, so it arrives
// about four days before the charge. On the wire it keeps the legacy
// ThreeDaySubNotification's shape and event name (three_day_notification,
// sent as the properties of a messaging platform's track event).
type RenewalNotice struct {
	// EventType is [RenewalNoticeEvent], or
	// [TrialEndingNoticeEvent] for the first charge after a trial.
	EventType string `json:"event_type"`
	// UserID is the record's user_id.
	UserID string `json:"user_id"`
	// BillingDate is the record's billing date as MM/DD/YYYY (notice.DateLayout).
	BillingDate string `json:"billing_date"`
	// Amount is the record's billing_amount (JSON "4.99"): before tax,
	// which is fixed only when the charge is attempted ([Config.Tax]).
	Amount Amount `json:"amount"`
	// MembershipTier is the record's tier name, notice.DefaultTierName ("LITE") when it
	// has none.
	MembershipTier string `json:"membership_tier"`
	// Account is the last four characters of the account the user is
	// charged from (the worker's AccountMask), empty when there is none
	// or the worker has no AccountMask.
	Account string `json:"account"`

	// The fields below are set on the notices of dunning alone
	// ([PaymentFailedNoticeEvent], [PaymentActionRequiredNoticeEvent],
	// [PaymentFinalNoticeEvent]), whose Amount is what the period owes
	// (its [Period.Due], tax included) and whose BillingDate is the owed
	// period's; absent from the pre-billing notices, whose shape they
	// leave as it was.

	// Reason is why the charge was declined, in words for the customer
	// (see [DeclineReasonText]).
	Reason string `json:"reason,omitempty"`
	// Attempt is the declined attempt the notice is about.
	Attempt int `json:"attempt,omitempty"`
	// UpdatePaymentURL is the host's page to update the payment method
	// ([DunningPolicy.UpdatePaymentURL]).
	UpdatePaymentURL string `json:"update_payment_url,omitempty"`
	// ActionURL is the processor's page where the customer confirms the
	// payment (an action-required notice).
	ActionURL string `json:"action_url,omitempty"`
	// NextRetry is the day of the next try (MM/DD/YYYY), when one is
	// scheduled; FinalDate the day of the final action, and FinalAction
	// the action ([FinalAction]).
	NextRetry   string `json:"next_retry,omitempty"`
	FinalDate   string `json:"final_date,omitempty"`
	FinalAction string `json:"final_action,omitempty"`
}

// Notifier delivers notifications through the host's channel (the legacy
// service sent a messaging platform's track event keyed by the email).
type Notifier interface {
	// Send delivers n to the user with the email. An error fails the
	// message, which SQS then redelivers.
	Send(ctx context.Context, email string, n RenewalNotice) error
}
