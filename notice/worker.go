package notice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dynabill/billing"
)

// QueueMessage is one worker-queue record: the SQS message ID and body.
type QueueMessage struct {
	ID   string
	Body string
}

// Outcome says how [Worker.Handle] finished a message without
// error.
type Outcome string

// The outcomes.
const (
	// Sent: the notification was sent (AfterSend ran after it).
	Sent Outcome = "sent"
	// SkippedPendingCancellation: the record's updated_event is
	// PENDING_CANCELLATION.
	SkippedPendingCancellation Outcome = "skipped_pending_cancellation"
	// SkippedInactiveUser: the user's status is not ACTIVE.
	SkippedInactiveUser Outcome = "skipped_inactive_user"
	// SkippedTestEnvironment: WorkerConfig.AllowedEmailSuffixes
	// is set and does not allow the email's domain.
	SkippedTestEnvironment Outcome = "skipped_test_environment"
	// SkippedFree: the record's amount is zero (a free tier, or a
	// trial period itself): nothing will be charged, so nothing is announced.
	SkippedFree Outcome = "skipped_free"
	// With [WorkerConfig.Reminders]:
	// SkippedDuplicate: the reminder was claimed already (sent
	// by an earlier run or by another worker); nothing was sent.
	SkippedDuplicate Outcome = "skipped_duplicate"
	// SkippedRecordChanged: the record is gone, or no longer
	// in the message's status or subscription; nothing was sent.
	SkippedRecordChanged Outcome = "skipped_record_changed"
)

// WorkerConfig configures [NewWorker].
type WorkerConfig struct {
	// Users looks up the message's user. Required.
	Users billing.UserDirectory
	// Notifier sends the notification. Required.
	Notifier billing.Notifier
	// AccountMask returns the last four characters of the account the
	// user is charged from, for the notice's Account; "" when there is none
	// (the worker logs a warning and sends the notice without digits). Only
	// the last four characters of what it returns are ever sent. An error
	// fails the message, which SQS then redelivers. Defaults to nil: every
	// notice goes without digits (a host that does not debit bank accounts).
	// Package prenote's AccountMask adapts the legacy bank links.
	AccountMask func(ctx context.Context, userID string) (string, error)
	// AfterSend is called after a notice was sent to user, with the
	// message's context; it cannot fail the message (a step of its own
	// logs what goes wrong). Defaults to nil: nothing runs after the send.
	// Package prenote's Step.AfterSend is the legacy ACH prenote step.
	AfterSend func(ctx context.Context, user billing.User)
	// Reminders records on each record that its reminder was sent, so that
	// a rerun of the scheduler, a redelivered message or a second worker
	// never sends it twice (see [ReminderClaimer]): usually the Repository
	// the [Scheduler] reads. Defaults to nil: every message handled is
	// sent, as the legacy worker did.
	Reminders ReminderClaimer
	// Clock gives the time a reminder is claimed at. Defaults to
	// [billing.SystemClock].
	Clock billing.Clock
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
	// Logger receives a line per skipped or failed message. Defaults to
	// discarding logs.
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
// looks the user up, sends the notification and then runs the host's
// [WorkerConfig.AfterSend] step, if any.
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
	}
	if cfg.Clock == nil {
		cfg.Clock = billing.SystemClock{}
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
// the account mask's lookup, the reminder's claim or the send failed, all of
// which a redelivery may get past. Once ctx is done, the remaining messages
// fail without being tried.
//
// A message whose body cannot be parsed or decoded
// ([ParseMessage]: not a JSON object of strings, a wrong
// event_type, no user_id, a bad billing_date, billing_amount or
// billing_status) is dropped instead: no redelivery can change its body, so
// reporting it would have SQS deliver it again until it expires (or, with a
// redrive policy, moves it to the dead-letter queue). It is logged once at
// error level ("billing: notifier worker: invalid message dropped", with
// message_id, reason — the parse error, at most 200 bytes, never the body —
// field when a field is at fault, and body_bytes) and counted with outcome
// dropped_invalid in dynabill.notifier.messages; it is not returned.
func (w *Worker) HandleBatch(ctx context.Context, msgs []QueueMessage) (failedIDs []string) {
	for _, msg := range msgs {
		log := w.cfg.Logger.With("message_id", msg.ID)
		if err := ctx.Err(); err != nil {
			log.WarnContext(ctx, "billing: notifier worker: not tried", "error", err)
			w.tel.countMessage(ctx, messageFailed)
			failedIDs = append(failedIDs, msg.ID)
			continue
		}
		m, err := ParseMessage([]byte(msg.Body))
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
func (w *Worker) dropInvalid(ctx context.Context, log *slog.Logger, msg *QueueMessage, err error) {
	reason := err.Error()
	if len(reason) > maxReasonBytes {
		reason = strings.ToValidUTF8(reason[:maxReasonBytes], "") + "…"
	}
	attrs := []any{"reason", reason, "body_bytes", len(msg.Body)}
	if fe := (*billing.FieldError)(nil); errors.As(err, &fe) {
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
//     name (LITE when the record has none) and, with AccountMask set, the
//     last four characters of the account charged; its error is returned.
//     A user without one (or a worker without AccountMask) is notified
//     without the digits.
//  6. With Reminders set, the reminder is claimed on the record (see
//     [ReminderClaimer]): a reminder claimed already is skipped as a
//     duplicate, a record gone or no longer in the message's status or
//     subscription is skipped as changed, and another error is returned.
//  7. It is sent to the user's email; an error is returned, after the
//     claim is released (even when ctx is done, within 10 seconds) so that
//     the retry can send. A release that fails is joined to the error and
//     logged: that reminder is then never sent.
//  8. With AfterSend set, it runs (package prenote's step submits an ACH
//     prenote). It returns nothing: a failure there does not undo the
//     notification that was delivered.
//
// Skips return their outcome and a nil error.
func (w *Worker) Handle(ctx context.Context, m Message) (Outcome, error) {
	ctx, span := w.tel.startMessage(ctx, &m)
	out, err := w.handle(ctx, m)
	w.tel.endMessage(ctx, span, out, err)
	return out, err
}

func (w *Worker) handle(ctx context.Context, m Message) (Outcome, error) {
	log := w.cfg.Logger.With("user_id", m.UserID, "subscription_id", m.SubscriptionID)
	if m.UpdatedEvent == billing.UpdatedPendingCancellation {
		log.InfoContext(ctx, "User is pending cancellation")
		return SkippedPendingCancellation, nil
	}
	if freeNotice(&m) {
		log.InfoContext(ctx, "billing: notifier worker: free period, nothing to announce")
		return SkippedFree, nil
	}
	user, err := w.cfg.Users.GetUser(ctx, m.UserID)
	if err != nil {
		return "", fmt.Errorf("billing: notifier worker: get user %s: %w", m.UserID, err)
	}
	if user.Status != billing.UserStatusActive {
		log.InfoContext(ctx, "User is not active, skipping", "user_status", user.Status)
		return SkippedInactiveUser, nil
	}
	if !w.emailAllowed(user.Email) {
		log.InfoContext(ctx, "User email is not allowed in this environment, skipping")
		return SkippedTestEnvironment, nil
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
		return "", w.releaseReminder(ctx, claim, fmt.Errorf("billing: notifier worker: send %s: %w", billing.RenewalNoticeEvent, err))
	}
	log.InfoContext(ctx, "billing: notifier worker: notification sent")
	if w.cfg.AfterSend != nil {
		w.cfg.AfterSend(ctx, user)
	}
	return Sent, nil
}

// notification builds the payload of m (the legacy buildNotification).
func (w *Worker) notification(ctx context.Context, m *Message, log *slog.Logger) (billing.RenewalNotice, error) {
	var account string
	if w.cfg.AccountMask != nil {
		mask, err := w.cfg.AccountMask(ctx, m.UserID)
		if err != nil {
			return billing.RenewalNotice{}, fmt.Errorf("billing: notifier worker: account of %s: %w", m.UserID, err)
		}
		if account = lastFour(mask); account == "" {
			log.WarnContext(ctx, "billing: notifier worker: no account to show, notifying without account digits")
		}
	}
	tier := m.Tier()
	if tier == "" {
		tier = DefaultTierName
	}
	return billing.RenewalNotice{
		EventType:      notificationEventType(m),
		UserID:         m.UserID,
		BillingDate:    m.BillingDate.UTC().Format(DateLayout),
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
