package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Prenote names: the legacy feature flags and metric, the providers and
// the metric's submitted_reason values.
const (
	// PrenotesFlag turns prenotes on per user (GrowthBook, boolean).
	PrenotesFlag = "subscriptions.prenotes"
	// PaymentsProviderFlag picks the prenote provider per user (GrowthBook,
	// string): "usio" submits through Usio, anything else through JPM.
	PaymentsProviderFlag = "subscriptions.payments.provider"

	// PrenoteMetricName is the prenote counter (a Datadog custom metric in
	// the legacy service), tagged submitted:true|false,
	// submitted_reason:<reason> when not submitted, and provider:jpm|usio
	// once a provider was picked.
	PrenoteMetricName = "subscriptions.notifier.prenotes"

	// PrenoteProviderJPM is the default prenote provider.
	PrenoteProviderJPM = "jpm"
	// PrenoteProviderUsio is the provider PaymentsProviderFlag may pick.
	PrenoteProviderUsio = "usio"
	// UsioPrenoteAccount is the Usio account prenotes are submitted under.
	UsioPrenoteAccount = "subscription"

	// GoodPaymentProvider and GoodPaymentStatus are what a "good" recent
	// payment must have.
	GoodPaymentProvider = "jpm"
	GoodPaymentStatus   = "COMPLETED"

	// DefaultNewUserDays: users younger than this many days submit a
	// prenote without the payment check.
	DefaultNewUserDays = 30
	// DefaultGoodPaymentDays: a good payment completed within this many days.
	DefaultGoodPaymentDays = 40
)

// The reasons of a prenote decision. The not-submitted ones are the
// metric's submitted_reason tag; the submitted ones are only logged.
const (
	// PrenoteReasonFeatureFlagDisabled: PrenotesFlag is off for the user.
	PrenoteReasonFeatureFlagDisabled = "feature_flag_disabled"
	// PrenoteReasonNoGoodPlaidItem: no primary account or no accounts linked.
	PrenoteReasonNoGoodPlaidItem = "no_good_plaid_item"
	// PrenoteReasonNoGoodPayment: an older user without a good payment.
	PrenoteReasonNoGoodPayment = "no_good_payment"
	// PrenoteReasonBadResponseCode: the provider answered other than 201.
	PrenoteReasonBadResponseCode = "bad_response_code"
	// PrenoteReasonError: a lookup or the submission failed (this library's
	// addition: the legacy service only logged these).
	PrenoteReasonError = "error"

	// PrenoteReasonNewUser: submitted for a user younger than NewUserDays.
	PrenoteReasonNewUser = "new_user"
	// PrenoteReasonGoodPayment: submitted for a user with a good payment.
	PrenoteReasonGoodPayment = "good_payment"
)

// PrenoteDecision is what a [PrenotePolicy] decided for a user.
type PrenoteDecision struct {
	// Submit is true when a prenote should be submitted.
	Submit bool
	// Reason explains the decision, one of the PrenoteReason… constants
	// (or the policy's own). When Submit is false it is the metric's
	// submitted_reason tag.
	Reason string
	// Provider is the provider to submit through, when Submit is true.
	Provider string
}

// PrenotePolicy decides whether the worker submits an ACH prenote (a
// zero-dollar test debit that validates the bank account before the real
// collection) for a user it just notified. The worker submits and meters.
// [DefaultPrenotePolicy] is the legacy service's rule.
type PrenotePolicy interface {
	// Decide returns the decision for user. An error is logged and metered
	// as submitted_reason:error; it never fails the message.
	Decide(ctx context.Context, user User) (PrenoteDecision, error)
}

// PrenotePolicyFunc adapts a function to [PrenotePolicy].
type PrenotePolicyFunc func(ctx context.Context, user User) (PrenoteDecision, error)

// Decide calls f.
func (f PrenotePolicyFunc) Decide(ctx context.Context, user User) (PrenoteDecision, error) {
	return f(ctx, user)
}

// FeatureFlags evaluates the host's feature flags (GrowthBook in the legacy
// service) for a user.
type FeatureFlags interface {
	// Enabled reports whether a boolean flag is on for the user.
	Enabled(ctx context.Context, flag, userID string) (bool, error)
	// Value returns a string flag's value for the user ("" when unset).
	Value(ctx context.Context, flag, userID string) (string, error)
}

// UserPayment is a payment from the host's payment history.
type UserPayment struct {
	// ID identifies the payment.
	ID string
	// Provider processed it, e.g. "jpm".
	Provider string
	// Status is the payment's status, e.g. "COMPLETED".
	Status string
	// CompletionDate is when it completed; zero when it has not.
	CompletionDate time.Time
}

// UserPayments looks up users' payments.
type UserPayments interface {
	// Payments returns the user's recent payments, in any order.
	Payments(ctx context.Context, userID string) ([]UserPayment, error)
}

// PrenoteRequest is a prenote submission, filled per provider as the legacy
// service did: JPM gets the names and user ID; Usio also the email and
// [UsioPrenoteAccount].
type PrenoteRequest struct {
	UserID    string
	FirstName string
	LastName  string
	Email     string // Usio only
	Account   string // Usio only
}

// PrenoteSubmitter submits prenotes through the host's payments service.
type PrenoteSubmitter interface {
	// Submit submits req through provider and returns the HTTP status the
	// payments service answered; anything but 201 Created is a failed
	// submission.
	Submit(ctx context.Context, provider string, req PrenoteRequest) (statusCode int, err error)
}

// Metrics counts events for the host's metrics system.
type Metrics interface {
	// Count adds value to the counter name with tags "key:value". It cannot
	// fail: an adapter drops what it cannot deliver.
	Count(ctx context.Context, name string, value int64, tags []string)
}

// discardMetrics is the default Metrics.
type discardMetrics struct{}

func (discardMetrics) Count(context.Context, string, int64, []string) {}

// PrenotePolicyConfig configures [NewDefaultPrenotePolicy].
type PrenotePolicyConfig struct {
	// Flags evaluates EnabledFlag and ProviderFlag. Required.
	Flags FeatureFlags
	// Accounts gives the user's bank link. Required.
	Accounts BankAccounts
	// Payments gives the user's recent payments. Required.
	Payments UserPayments
	// Clock tells the user's age and the payments' age. Defaults to
	// [SystemClock].
	Clock Clock
	// EnabledFlag turns prenotes on per user. Defaults to [PrenotesFlag].
	EnabledFlag string
	// ProviderFlag picks the provider. Defaults to [PaymentsProviderFlag].
	ProviderFlag string
	// NewUserDays: younger users skip the payment check. Defaults to
	// [DefaultNewUserDays] (30).
	NewUserDays int
	// GoodPaymentDays: how recent a good payment must be. Defaults to
	// [DefaultGoodPaymentDays] (40).
	GoodPaymentDays int
}

// DefaultPrenotePolicy is the legacy service's prenote rule. Its gates, in
// order (the first that fails decides):
//
//  1. EnabledFlag must be on for the user, else feature_flag_disabled.
//  2. The user's bank link must be usable, a primary account ID and at
//     least one account ([BankLink.Usable]), else no_good_plaid_item: a
//     prenote needs an account to validate.
//  3. A user who joined less than NewUserDays ago submits without a payment
//     check (reason new_user): new users have no payment history yet.
//  4. Otherwise the user needs a good payment, else no_good_payment: one
//     with provider jpm, status COMPLETED and a completion date within the
//     last GoodPaymentDays (reason good_payment).
//
// The provider is usio when ProviderFlag's value is "usio", jpm otherwise.
// A failed lookup is returned as an error. Safe for concurrent use.
type DefaultPrenotePolicy struct {
	cfg PrenotePolicyConfig
}

var _ PrenotePolicy = (*DefaultPrenotePolicy)(nil)

// NewDefaultPrenotePolicy returns the legacy prenote rule, or an error
// naming the missing or bad config field.
func NewDefaultPrenotePolicy(cfg PrenotePolicyConfig) (*DefaultPrenotePolicy, error) {
	switch {
	case cfg.Flags == nil:
		return nil, errors.New("billing: PrenotePolicyConfig.Flags is required")
	case cfg.Accounts == nil:
		return nil, errors.New("billing: PrenotePolicyConfig.Accounts is required")
	case cfg.Payments == nil:
		return nil, errors.New("billing: PrenotePolicyConfig.Payments is required")
	case cfg.NewUserDays < 0:
		return nil, fmt.Errorf("billing: PrenotePolicyConfig.NewUserDays: negative %d", cfg.NewUserDays)
	case cfg.GoodPaymentDays < 0:
		return nil, fmt.Errorf("billing: PrenotePolicyConfig.GoodPaymentDays: negative %d", cfg.GoodPaymentDays)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.EnabledFlag == "" {
		cfg.EnabledFlag = PrenotesFlag
	}
	if cfg.ProviderFlag == "" {
		cfg.ProviderFlag = PaymentsProviderFlag
	}
	if cfg.NewUserDays == 0 {
		cfg.NewUserDays = DefaultNewUserDays
	}
	if cfg.GoodPaymentDays == 0 {
		cfg.GoodPaymentDays = DefaultGoodPaymentDays
	}
	return &DefaultPrenotePolicy{cfg: cfg}, nil
}

// Decide implements [PrenotePolicy].
func (p *DefaultPrenotePolicy) Decide(ctx context.Context, user User) (PrenoteDecision, error) {
	on, err := p.cfg.Flags.Enabled(ctx, p.cfg.EnabledFlag, user.ID)
	if err != nil {
		return PrenoteDecision{}, fmt.Errorf("billing: prenote: flag %s: %w", p.cfg.EnabledFlag, err)
	}
	if !on {
		return PrenoteDecision{Reason: PrenoteReasonFeatureFlagDisabled}, nil
	}
	link, err := p.cfg.Accounts.BankLink(ctx, user.ID)
	if err != nil {
		return PrenoteDecision{}, fmt.Errorf("billing: prenote: bank link: %w", err)
	}
	if !link.Usable() {
		return PrenoteDecision{Reason: PrenoteReasonNoGoodPlaidItem}, nil
	}
	now := p.cfg.Clock.Now()
	reason := PrenoteReasonNewUser
	if user.DateJoined.IsZero() || now.Sub(user.DateJoined) >= time.Duration(p.cfg.NewUserDays)*24*time.Hour {
		payments, err := p.cfg.Payments.Payments(ctx, user.ID)
		if err != nil {
			return PrenoteDecision{}, fmt.Errorf("billing: prenote: payments: %w", err)
		}
		if !p.hasGoodPayment(payments, now) {
			return PrenoteDecision{Reason: PrenoteReasonNoGoodPayment}, nil
		}
		reason = PrenoteReasonGoodPayment
	}
	provider, err := p.cfg.Flags.Value(ctx, p.cfg.ProviderFlag, user.ID)
	if err != nil {
		return PrenoteDecision{}, fmt.Errorf("billing: prenote: flag %s: %w", p.cfg.ProviderFlag, err)
	}
	if provider != PrenoteProviderUsio {
		provider = PrenoteProviderJPM
	}
	return PrenoteDecision{Submit: true, Reason: reason, Provider: provider}, nil
}

// hasGoodPayment reports whether one payment is jpm, COMPLETED and
// completed no earlier than GoodPaymentDays before now.
func (p *DefaultPrenotePolicy) hasGoodPayment(payments []UserPayment, now time.Time) bool {
	since := now.Add(-time.Duration(p.cfg.GoodPaymentDays) * 24 * time.Hour)
	for _, pay := range payments {
		if pay.Provider == GoodPaymentProvider && pay.Status == GoodPaymentStatus &&
			!pay.CompletionDate.IsZero() && !pay.CompletionDate.Before(since) {
			return true
		}
	}
	return false
}

// prenote runs the worker's prenote step for a notified user: decide,
// submit, meter. Nothing here fails the message.
func (w *Worker) prenote(ctx context.Context, user User, log *slog.Logger) {
	meter := func(submitted bool, reason, provider string) {
		tags := []string{fmt.Sprintf("submitted:%t", submitted)}
		if !submitted {
			tags = append(tags, "submitted_reason:"+reason)
		}
		if provider != "" {
			tags = append(tags, "provider:"+provider)
		}
		w.cfg.Metrics.Count(ctx, w.cfg.PrenoteMetric, 1, tags)
	}
	d, err := w.cfg.Prenote.Decide(ctx, user)
	if err != nil {
		log.ErrorContext(ctx, "billing: prenote: cannot decide", "error", err)
		meter(false, PrenoteReasonError, "")
		return
	}
	if !d.Submit {
		log.InfoContext(ctx, "billing: prenote: not submitted", "reason", d.Reason)
		meter(false, d.Reason, "")
		return
	}
	req := PrenoteRequest{UserID: user.ID, FirstName: user.FirstName, LastName: user.LastName}
	if d.Provider == PrenoteProviderUsio {
		req.Email = user.Email
		req.Account = UsioPrenoteAccount
	}
	log = log.With("provider", d.Provider, "reason", d.Reason)
	code, err := w.cfg.Submitter.Submit(ctx, d.Provider, req)
	switch {
	case err != nil:
		log.ErrorContext(ctx, "billing: prenote: submission failed", "error", err)
		meter(false, PrenoteReasonError, d.Provider)
	case code != http.StatusCreated:
		log.ErrorContext(ctx, "billing: prenote: submission refused", "status_code", code)
		meter(false, PrenoteReasonBadResponseCode, d.Provider)
	default:
		log.InfoContext(ctx, "billing: prenote: submitted")
		meter(true, "", d.Provider)
	}
}
