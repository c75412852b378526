package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/prenote"
)

// Stubs for the ports a real service implements against its own systems.
// Each logs what it is asked. Replace them: the worker cannot notify anyone
// until stubUsers returns real users.

var (
	_ billing.UserDirectory   = stubUsers{}
	_ prenote.BankAccounts    = stubBankAccounts{}
	_ prenote.Payments        = stubPayments{}
	_ prenote.FeatureFlags    = stubFlags{}
	_ prenote.Submitter       = stubSubmitter{}
	_ billing.Notifier        = logNotifier{}
	_ prenote.Metrics         = logMetrics{}
	_ billing.PaymentProvider = stubProvider{}
	_ billing.EventSink       = logEvents{}
)

// errNotWired fails the worker's messages until a user service is wired,
// so that nothing is silently dropped: they go back to the queue, then to
// its DLQ.
var errNotWired = errors.New("stub: wire your user service in hostports.go")

// stubUsers stands in for the user service (legacy: FMSDK user client).
type stubUsers struct{ log *slog.Logger }

func (s stubUsers) GetUser(ctx context.Context, userID string) (billing.User, error) {
	s.log.WarnContext(ctx, "stub user service: GetUser", "user_id", userID)
	return billing.User{}, errNotWired
}

// stubBankAccounts stands in for the bank links (legacy: txn service
// /plaid-accounts and the payments service's bank account).
type stubBankAccounts struct{ log *slog.Logger }

func (s stubBankAccounts) BankLink(ctx context.Context, userID string) (prenote.BankLink, error) {
	s.log.InfoContext(ctx, "stub bank accounts: BankLink", "user_id", userID)
	return prenote.BankLink{}, nil
}

// stubPayments stands in for the payments history (legacy:
// GetPaymentsByUserID).
type stubPayments struct{ log *slog.Logger }

func (s stubPayments) Payments(ctx context.Context, userID string) ([]prenote.Payment, error) {
	s.log.InfoContext(ctx, "stub payments: Payments", "user_id", userID)
	return nil, nil
}

// stubFlags stands in for GrowthBook: every flag off, every value empty, so
// prenotes stay disabled.
type stubFlags struct{ log *slog.Logger }

func (s stubFlags) Enabled(ctx context.Context, flag, userID string) (bool, error) {
	s.log.InfoContext(ctx, "stub flags: Enabled", "flag", flag, "user_id", userID)
	return false, nil
}

func (s stubFlags) Value(ctx context.Context, flag, userID string) (string, error) {
	s.log.InfoContext(ctx, "stub flags: Value", "flag", flag, "user_id", userID)
	return "", nil
}

// stubSubmitter stands in for the payments service's prenote endpoints
// (legacy: SubmitJpmPrenoteWithResponse / SubmitUsioPrenoteWithResponse).
type stubSubmitter struct{ log *slog.Logger }

func (s stubSubmitter) Submit(ctx context.Context, provider string, req prenote.Request) (int, error) {
	s.log.InfoContext(ctx, "stub prenote: Submit", "provider", provider, "user_id", req.UserID)
	return http.StatusCreated, nil
}

// logNotifier logs the notification instead of sending it (legacy: an
// Iterable track event three_day_notification keyed by the email).
type logNotifier struct{ log *slog.Logger }

func (n logNotifier) Send(ctx context.Context, email string, note billing.RenewalNotice) error {
	n.log.InfoContext(ctx, "notification", "event", note.EventType, "user_id", note.UserID,
		"billing_date", note.BillingDate, "amount", note.Amount.String(), "tier", note.MembershipTier)
	return nil
}

// logMetrics writes counters as log lines (legacy: ddlambda.Metric; with the
// Datadog extension a host would call its client here).
type logMetrics struct{ log *slog.Logger }

func (m logMetrics) Count(ctx context.Context, name string, value int64, tags []string) {
	m.log.InfoContext(ctx, "metric", "name", name, "value", value, "tags", tags)
}

// errNoProcessor makes every collection "outcome unknown" until a payment
// processor is wired: nothing is recorded, and the attempts stay open with
// their idempotency keys.
var errNoProcessor = errors.New("stub: wire your payment processor in hostports.go")

// stubProvider stands in for the payment processor (legacy: JPM / USIO
// through the payments service).
type stubProvider struct{ log *slog.Logger }

func (s stubProvider) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	s.log.WarnContext(ctx, "stub payment processor: Collect", "user_id", req.UserID,
		"subscription_id", req.SubscriptionID, "amount", req.Amount.String(), "idempotency_key", req.IdempotencyKey)
	return billing.PaymentResult{}, errNoProcessor
}

// logEvents logs the events it is given: the collector's in-process ones
// (best effort), and, in the events function, the history stream's (at
// least once, Event.ID set). A real service sends receipts, grants or
// revokes access and forwards user_subscription_payment_failed to its
// notification channel from the stream's, dropping repeats by Event.ID;
// an error it returns makes Lambda retry from that event.
type logEvents struct{ log *slog.Logger }

func (l logEvents) Emit(ctx context.Context, e billing.Event) error {
	l.log.InfoContext(ctx, "billing event", "id", e.ID, "type", e.Type, "user_id", e.UserID, "subscription_id", e.SubscriptionID)
	return nil
}
