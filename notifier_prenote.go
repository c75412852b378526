package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Prenote names: the default feature flags and metric, the default
// provider names and the metric's submitted_reason values.
const (
	// PrenotesFlag turns prenotes on per user (a boolean flag).
	PrenotesFlag = "subscriptions.prenotes"
	// PaymentsProviderFlag picks the prenote provider per user (a string
	// flag): its value names the alternate provider or anything else, which
	// means the main provider.
	PaymentsProviderFlag = "subscriptions.payments.provider"

	// PrenoteMetricName is the prenote counter, tagged submitted:true|false,
	// submitted_reason:<reason> when not submitted, and
	// provider:<provider> once a provider was picked.
	PrenoteMetricName = "subscriptions.notifier.prenotes"

	// PrenoteProviderDefault is the default name of the main prenote
	// provider ([PrenotePolicyConfig.Provider]).
	PrenoteProviderDefault = "default"
	// PrenoteProviderAlternate is the default name of the provider the
	// provider flag may pick instead ([PrenotePolicyConfig.AlternateProvider]).
	PrenoteProviderAlternate = "alternate"
	// DefaultAlternatePrenoteAccount is the default account prenotes through
	// the alternate provider are submitted under
	// ([PrenotePolicyConfig.AlternateAccount]).
	DefaultAlternatePrenoteAccount = "subscription"

	// GoodPaymentStatus is the status a "good" recent payment must have.
	GoodPaymentStatus = "COMPLETED"

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
	// PrenoteReasonNoUsableBankLink: no primary account or no accounts
	// linked (the wire value keeps its legacy spelling).
	PrenoteReasonNoUsableBankLink = "no_good_plaid_item"
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
	// Account is the provider account to submit under, for a provider that
	// takes one. A decision with an Account also sends the user's email
	// ([PrenoteRequest]); without one the request carries only the user's
	// ID and names.
	Account string
}

// PrenotePolicy decides whether the worker submits an ACH prenote (a
// zero-dollar test debit that validates the bank account before the real
// collection) for a user it just notified. The worker submits and meters.
// [DefaultPrenotePolicy] is the rule this library ships.
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

// FeatureFlags evaluates the host's feature flags for a user.
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
	// Provider is the name of the processor that handled it.
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

// PrenoteRequest is a prenote submission: the user's ID and names, and,
// when the decision names a provider account ([PrenoteDecision.Account]),
// the user's email and that account.
type PrenoteRequest struct {
	UserID    string
	FirstName string
	LastName  string
	Email     string // only with Account
	Account   string // the decision's Account, if any
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
	// ProviderFlag picks the provider: a value equal to AlternateProvider
	// picks it, anything else (or unset) picks Provider. Defaults to
	// [PaymentsProviderFlag].
	ProviderFlag string
	// Provider is the name of the main prenote provider, passed to the
	// [PrenoteSubmitter] and tagged on the metric. Defaults to
	// [PrenoteProviderDefault] ("default").
	Provider string
	// AlternateProvider is the name of the provider ProviderFlag may pick
	// instead. Defaults to [PrenoteProviderAlternate] ("alternate").
	AlternateProvider string
	// AlternateAccount is the account prenotes through AlternateProvider
	// are submitted under ([PrenoteDecision.Account]); those requests also
	// carry the user's email. Defaults to [DefaultAlternatePrenoteAccount]
	// ("subscription").
	AlternateAccount string
	// GoodPaymentProvider is the provider a good recent payment must have
	// gone through. Defaults to Provider.
	GoodPaymentProvider string
	// NewUserDays: younger users skip the payment check. Defaults to
	// [DefaultNewUserDays] (30).
	NewUserDays int
	// GoodPaymentDays: how recent a good payment must be. Defaults to
	// [DefaultGoodPaymentDays] (40).
	GoodPaymentDays int
}

// DefaultPrenotePolicy is the library's prenote rule. Its gates, in order
// (the first that fails decides):
//
//  1. EnabledFlag must be on for the user, else feature_flag_disabled.
//  2. The user's bank link must be usable, a primary account ID and at
//     least one account ([BankLink.Usable]), else no_good_plaid_item: a
//     prenote needs an account to validate.
//  3. A user who joined less than NewUserDays ago submits without a payment
//     check (reason new_user): new users have no payment history yet.
//  4. Otherwise the user needs a good payment, else no_good_payment: one
//     through GoodPaymentProvider, with status COMPLETED and a completion
//     date within the last GoodPaymentDays (reason good_payment).
//
// The provider is AlternateProvider, submitted under AlternateAccount, when
// ProviderFlag's value for the user equals AlternateProvider; it is
// Provider otherwise. A failed lookup is returned as an error. Safe for
// concurrent use.
type DefaultPrenotePolicy struct {
	cfg PrenotePolicyConfig
}

var _ PrenotePolicy = (*DefaultPrenotePolicy)(nil)

// NewDefaultPrenotePolicy returns the default prenote rule, or an error
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
	if cfg.Provider == "" {
		cfg.Provider = PrenoteProviderDefault
	}
	if cfg.AlternateProvider == "" {
		cfg.AlternateProvider = PrenoteProviderAlternate
	}
	if cfg.AlternateAccount == "" {
		cfg.AlternateAccount = DefaultAlternatePrenoteAccount
	}
	if cfg.GoodPaymentProvider == "" {
		cfg.GoodPaymentProvider = cfg.Provider
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
		return PrenoteDecision{Reason: PrenoteReasonNoUsableBankLink}, nil
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
	picked, err := p.cfg.Flags.Value(ctx, p.cfg.ProviderFlag, user.ID)
	if err != nil {
		return PrenoteDecision{}, fmt.Errorf("billing: prenote: flag %s: %w", p.cfg.ProviderFlag, err)
	}
	if picked == p.cfg.AlternateProvider {
		return PrenoteDecision{Submit: true, Reason: reason, Provider: picked, Account: p.cfg.AlternateAccount}, nil
	}
	return PrenoteDecision{Submit: true, Reason: reason, Provider: p.cfg.Provider}, nil
}

// hasGoodPayment reports whether one payment went through
// GoodPaymentProvider, is COMPLETED and completed no earlier than
// GoodPaymentDays before now.
func (p *DefaultPrenotePolicy) hasGoodPayment(payments []UserPayment, now time.Time) bool {
	since := now.Add(-time.Duration(p.cfg.GoodPaymentDays) * 24 * time.Hour)
	for _, pay := range payments {
		if pay.Provider == p.cfg.GoodPaymentProvider && pay.Status == GoodPaymentStatus &&
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
	if d.Account != "" {
		req.Email = user.Email
		req.Account = d.Account
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
