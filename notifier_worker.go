package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// UserStatusActive is the user-service status of a user who is notified.
const UserStatusActive = "ACTIVE"

// NotificationDateLayout formats the billing date in the notification:
// "01/02/2006" (MM/DD/YYYY).
const NotificationDateLayout = "01/02/2006"

// DefaultTierName is the membership tier of the notification when the
// record has no receipt_tier_name.
const DefaultTierName = "LITE"

// User is what the worker needs from the host's user service.
type User struct {
	// ID is the user's ID, the records' user_id.
	ID string
	// Email identifies the user to the [Notifier].
	Email string
	// FirstName and LastName go into a prenote submission.
	FirstName, LastName string
	// Status is the user-service status; only [UserStatusActive] users are
	// notified.
	Status string
	// DateJoined is when the user signed up; the default prenote policy
	// skips the payment check for users younger than 30 days. Zero means
	// unknown (the user counts as old).
	DateJoined time.Time
}

// UserDirectory looks users up in the host's user service.
type UserDirectory interface {
	// GetUser returns the user with the ID. Any error (including "no such
	// user") fails the message, which SQS then redelivers.
	GetUser(ctx context.Context, userID string) (User, error)
}

// BankAccount is one linked bank account.
type BankAccount struct {
	// ID identifies the account in its link.
	ID string
	// Mask is the end of the account number as the link reports it; only its last four characters are ever put in a notification.
	Mask string
}

// BankLink is a user's linked bank (an account aggregator's item): the
// primary account that is charged and every linked account.
type BankLink struct {
	// PrimaryAccountID is the ID of the account collections debit (the
	// legacy main_account_id / primary_account_id); empty when none is set.
	PrimaryAccountID string
	// Accounts are the linked accounts.
	Accounts []BankAccount
}

// Primary returns the primary account, if the link has it.
func (l BankLink) Primary() (BankAccount, bool) {
	if l.PrimaryAccountID == "" {
		return BankAccount{}, false
	}
	for _, a := range l.Accounts {
		if a.ID == l.PrimaryAccountID {
			return a, true
		}
	}
	return BankAccount{}, false
}

// Usable reports whether the link can take a prenote: it has a primary
// account ID and at least one account.
func (l BankLink) Usable() bool { return l.PrimaryAccountID != "" && len(l.Accounts) > 0 }

// BankAccounts looks up users' linked bank accounts.
type BankAccounts interface {
	// BankLink returns the user's link; a user without one gets the zero
	// BankLink and a nil error. An error fails the message when the
	// notification needs the account, and is a prenote error in the
	// prenote policy.
	BankLink(ctx context.Context, userID string) (BankLink, error)
}

// ThreeDayNotification is the pre-billing notification's payload (the
// legacy ThreeDaySubNotification, sent as the properties of a messaging
// platform's track event named three_day_notification). The name is the
// legacy event's: the scheduler picks the records billed
// [NotificationLeadDays] (4) days ahead, so the notice arrives three to
// four days before the charge.
type ThreeDayNotification struct {
	// EventType is [ThreeDayNotificationEvent], or
	// [TrialEndingNotificationEvent] for the first charge after a trial.
	EventType string `json:"event_type"`
	// UserID is the record's user_id.
	UserID string `json:"user_id"`
	// BillingDate is the record's billing date as [NotificationDateLayout].
	BillingDate string `json:"billing_date"`
	// Amount is the record's billing_amount (JSON "4.99").
	Amount Amount `json:"amount"`
	// MembershipTier is the record's tier name, [DefaultTierName] when it
	// has none.
	MembershipTier string `json:"membership_tier"`
	// Account is the last four characters of the primary account's number,
	// empty when the user has no primary account.
	Account string `json:"account"`
}

// Notifier delivers notifications through the host's channel (the legacy
// service sent a messaging platform's track event keyed by the email).
type Notifier interface {
	// Send delivers n to the user with the email. An error fails the
	// message, which SQS then redelivers.
	Send(ctx context.Context, email string, n ThreeDayNotification) error
}

// Message is one worker-queue record: the SQS message ID and body.
type Message struct {
	ID   string
	Body string
}

// NotificationOutcome says how [Worker.Handle] finished a message without
// error.
type NotificationOutcome string

// The outcomes.
const (
	// NotificationSent: the notification was sent (the prenote step ran after it).
	NotificationSent NotificationOutcome = "sent"
	// NotificationSkippedPendingCancellation: the record's updated_event is
	// PENDING_CANCELLATION.
	NotificationSkippedPendingCancellation NotificationOutcome = "skipped_pending_cancellation"
	// NotificationSkippedInactiveUser: the user's status is not ACTIVE.
	NotificationSkippedInactiveUser NotificationOutcome = "skipped_inactive_user"
	// NotificationSkippedTestEnvironment: WorkerConfig.AllowedEmailSuffixes
	// is set and does not allow the email's domain.
	NotificationSkippedTestEnvironment NotificationOutcome = "skipped_test_environment"
)

// WorkerConfig configures [NewWorker].
type WorkerConfig struct {
	// Users looks up the message's user. Required.
	Users UserDirectory
	// Notifier sends the notification. Required.
	Notifier Notifier
	// Accounts gives the primary account's last four digits. Required.
	Accounts BankAccounts
	// Prenote decides whether to submit an ACH prenote after the
	// notification, usually a [*DefaultPrenotePolicy]. Defaults to nil: no
	// prenote step, and no prenote metric.
	Prenote PrenotePolicy
	// Submitter submits the prenotes Prenote decides on. Required when
	// Prenote is set.
	Submitter PrenoteSubmitter
	// Reminders records on each record that its reminder was sent, so that
	// a rerun of the scheduler, a redelivered message or a second worker
	// never sends it twice (see [ReminderClaimer]): usually the Repository
	// the [Scheduler] reads. Defaults to nil: every message handled is
	// sent, as the legacy worker did.
	Reminders ReminderClaimer
	// Clock gives the time a reminder is claimed at. Defaults to
	// [SystemClock].
	Clock Clock
	// Metrics receives the prenote metric. Defaults to discarding it.
	Metrics Metrics
	// PrenoteMetric names the prenote metric. Defaults to
	// [PrenoteMetricName] ("subscriptions.notifier.prenotes").
	PrenoteMetric string
	// AllowedEmailSuffixes, when not empty, restricts notifications to
	// users whose email domain one of its entries allows; other users are
	// skipped. Set it in test environments, e.g. to "test.example.com" and
	// "qa.example.org". An entry names a domain, compared case-insensitively
	// with the whole domain of the address (what follows its "@"), so it
	// never matches part of a label:
	//
	//   - "example.com" allows the domain and its subdomains: a@example.com
	//     and a@mail.example.com, not a@notexample.com or
	//     a@example.com.evil.org;
	//   - "@example.com" allows the domain only: a@example.com, not
	//     a@mail.example.com;
	//   - ".example.com" allows its subdomains only: a@mail.example.com,
	//     not a@example.com.
	//
	// An email without exactly one "@", with nothing before it, or whose
	// domain is not a plain domain name (empty, a leading or trailing dot,
	// "..", characters other than letters, digits and hyphens) is never
	// allowed. [NewWorker] rejects an entry that is not a domain, "@domain"
	// or ".domain" in that sense. Defaults to nil: everyone (production).
	AllowedEmailSuffixes []string
	// Logger receives a line per skipped or failed message and per prenote
	// decision. Defaults to discarding logs.
	Logger *slog.Logger
	// MeterProvider makes the handled-messages metric (see
	// dynabill.notifier.messages). Defaults to otel.GetMeterProvider(), a
	// no-op unless the host installs a global provider.
	MeterProvider metric.MeterProvider
	// TracerProvider makes a span per message (see dynabill.notifier.message).
	// Defaults to otel.GetTracerProvider(), a no-op unless the host
	// installs a global provider.
	TracerProvider trace.TracerProvider
}

// Worker is the second half of the pre-billing notifier (the legacy
// notifier-worker Lambda): for each message the [Scheduler] enqueued it
// looks the user up, sends the notification and then tries an ACH prenote.
// Safe for concurrent use.
type Worker struct {
	cfg        WorkerConfig
	emailRules []emailDomainRule
	tel        *telemetry
}

// NewWorker returns a Worker, or an error naming the missing config field.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	switch {
	case cfg.Users == nil:
		return nil, errors.New("billing: WorkerConfig.Users is required")
	case cfg.Notifier == nil:
		return nil, errors.New("billing: WorkerConfig.Notifier is required")
	case cfg.Accounts == nil:
		return nil, errors.New("billing: WorkerConfig.Accounts is required")
	case cfg.Prenote != nil && cfg.Submitter == nil:
		return nil, errors.New("billing: WorkerConfig.Submitter is required with Prenote")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = discardMetrics{}
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.PrenoteMetric == "" {
		cfg.PrenoteMetric = PrenoteMetricName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Worker{cfg: cfg, tel: newTelemetry(cfg.MeterProvider, cfg.TracerProvider)}
	for _, s := range cfg.AllowedEmailSuffixes {
		if s == "" {
			return nil, errors.New("billing: WorkerConfig.AllowedEmailSuffixes: empty suffix")
		}
		r, err := parseEmailDomainRule(s)
		if err != nil {
			return nil, err
		}
		w.emailRules = append(w.emailRules, r)
	}
	return w, nil
}

// HandleBatch handles a batch of worker-queue messages one after the other
// and returns the IDs of those that failed, for SQS to redeliver (the
// ReportBatchItemFailures response); the others are done: sent, skipped or
// dropped.
//
// A message fails when [Worker.Handle] returns an error: the user lookup,
// the bank account lookup, the reminder's claim or the send failed, all of
// which a redelivery may get past. Once ctx is done, the remaining messages
// fail without being tried.
//
// A message whose body cannot be parsed or decoded
// ([ParseNotificationMessage]: not a JSON object of strings, a wrong
// event_type, no user_id, a bad billing_date, billing_amount or
// billing_status) is dropped instead: no redelivery can change its body, so
// reporting it would have SQS deliver it again until it expires (or, with a
// redrive policy, moves it to the dead-letter queue). It is logged once at
// error level ("billing: notifier worker: invalid message dropped", with
// message_id, reason — the parse error, at most 200 bytes, never the body —
// field when a field is at fault, and body_bytes) and counted with outcome
// dropped_invalid in dynabill.notifier.messages; it is not returned.
func (w *Worker) HandleBatch(ctx context.Context, msgs []Message) (failedIDs []string) {
	for _, msg := range msgs {
		log := w.cfg.Logger.With("message_id", msg.ID)
		if err := ctx.Err(); err != nil {
			log.WarnContext(ctx, "billing: notifier worker: not tried", "error", err)
			w.tel.countMessage(ctx, messageFailed)
			failedIDs = append(failedIDs, msg.ID)
			continue
		}
		m, err := ParseNotificationMessage([]byte(msg.Body))
		if err != nil {
			w.dropInvalid(ctx, log, &msg, err)
			continue
		}
		if _, err := w.Handle(ctx, m); err != nil {
			log.ErrorContext(ctx, "billing: notifier worker: failed", "user_id", m.UserID,
				"subscription_id", m.SubscriptionID, "error", err)
			failedIDs = append(failedIDs, msg.ID)
		}
	}
	return failedIDs
}

// maxReasonBytes bounds the reason logged for a dropped message.
const maxReasonBytes = 200

// dropInvalid logs and counts a message [Worker.HandleBatch] acknowledges
// without handling, because err, its parse error, would recur on every
// delivery.
func (w *Worker) dropInvalid(ctx context.Context, log *slog.Logger, msg *Message, err error) {
	reason := err.Error()
	if len(reason) > maxReasonBytes {
		reason = strings.ToValidUTF8(reason[:maxReasonBytes], "") + "…"
	}
	attrs := []any{"reason", reason, "body_bytes", len(msg.Body)}
	if fe := (*FieldError)(nil); errors.As(err, &fe) {
		attrs = append(attrs, "field", fe.Field)
	}
	log.ErrorContext(ctx, "billing: notifier worker: invalid message dropped", attrs...)
	w.tel.countMessage(ctx, messageDroppedInvalid)
}

// Handle notifies the user of one due record, in the legacy worker's order:
//
//  1. A record whose updated_event is PENDING_CANCELLATION is skipped: the
//     user has started cancelling and gets no billing reminder.
//  2. The user is looked up; an error is returned (the message is retried).
//  3. A user whose status is not ACTIVE is skipped.
//  4. With AllowedEmailSuffixes set (test environments), a user whose email
//     domain none of them allows is skipped, so tests never mail real
//     users.
//  5. The notification is built: billing date as MM/DD/YYYY, amount, tier
//     name (LITE when the record has none) and the primary account's last
//     four digits; a bank account lookup error is returned. A user without
//     a primary account is notified without the digits.
//  6. With Reminders set, the reminder is claimed on the record (see
//     [ReminderClaimer]): a reminder claimed already is skipped as a
//     duplicate, a record gone or no longer in the message's status or
//     subscription is skipped as changed, and another error is returned.
//  7. It is sent to the user's email; an error is returned, after the
//     claim is released (even when ctx is done, within 10 seconds) so that
//     the retry can send. A release that fails is joined to the error and
//     logged: that reminder is then never sent.
//  8. The prenote step runs (see [PrenotePolicy]). Its errors are logged
//     and metered, never returned: a prenote failure does not undo the
//     notification that was delivered.
//
// Skips return their outcome and a nil error.
func (w *Worker) Handle(ctx context.Context, m NotificationMessage) (NotificationOutcome, error) {
	ctx, span := w.tel.startMessage(ctx, &m)
	out, err := w.handle(ctx, m)
	w.tel.endMessage(ctx, span, out, err)
	return out, err
}

func (w *Worker) handle(ctx context.Context, m NotificationMessage) (NotificationOutcome, error) {
	log := w.cfg.Logger.With("user_id", m.UserID, "subscription_id", m.SubscriptionID)
	if m.UpdatedEvent == UpdatedPendingCancellation {
		log.InfoContext(ctx, "User is pending cancellation")
		return NotificationSkippedPendingCancellation, nil
	}
	if freeNotice(&m) {
		log.InfoContext(ctx, "billing: notifier worker: free period, nothing to announce")
		return NotificationSkippedFree, nil
	}
	user, err := w.cfg.Users.GetUser(ctx, m.UserID)
	if err != nil {
		return "", fmt.Errorf("billing: notifier worker: get user %s: %w", m.UserID, err)
	}
	if user.Status != UserStatusActive {
		log.InfoContext(ctx, "User is not active, skipping", "user_status", user.Status)
		return NotificationSkippedInactiveUser, nil
	}
	if !w.emailAllowed(user.Email) {
		log.InfoContext(ctx, "User email is not allowed in this environment, skipping")
		return NotificationSkippedTestEnvironment, nil
	}
	n, err := w.notification(ctx, &m, log)
	if err != nil {
		return "", err
	}
	claim, skip, err := w.claimReminder(ctx, &m)
	if err != nil {
		return "", err
	}
	if skip != "" {
		log.InfoContext(ctx, "billing: notifier worker: reminder not sent", "outcome", skip)
		return skip, nil
	}
	if err := w.cfg.Notifier.Send(ctx, user.Email, n); err != nil {
		return "", w.releaseReminder(ctx, claim, fmt.Errorf("billing: notifier worker: send %s: %w", ThreeDayNotificationEvent, err))
	}
	log.InfoContext(ctx, "billing: notifier worker: notification sent")
	if w.cfg.Prenote != nil {
		w.prenote(ctx, user, log)
	}
	return NotificationSent, nil
}

// notification builds the payload of m (the legacy buildNotification).
func (w *Worker) notification(ctx context.Context, m *NotificationMessage, log *slog.Logger) (ThreeDayNotification, error) {
	link, err := w.cfg.Accounts.BankLink(ctx, m.UserID)
	if err != nil {
		return ThreeDayNotification{}, fmt.Errorf("billing: notifier worker: bank account of %s: %w", m.UserID, err)
	}
	var account string
	if a, ok := link.Primary(); ok {
		account = lastFour(a.Mask)
	} else {
		log.WarnContext(ctx, "billing: notifier worker: no primary bank account, notifying without account digits")
	}
	tier := m.Tier()
	if tier == "" {
		tier = DefaultTierName
	}
	return ThreeDayNotification{
		EventType:      notificationEventType(m),
		UserID:         m.UserID,
		BillingDate:    m.BillingDate.UTC().Format(NotificationDateLayout),
		Amount:         m.Amount,
		MembershipTier: tier,
		Account:        account,
	}, nil
}

// lastFour returns the last four characters of s.
func lastFour(s string) string {
	r := []rune(s)
	if len(r) > 4 {
		r = r[len(r)-4:]
	}
	return string(r)
}
