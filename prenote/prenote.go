package prenote

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dynabill/billing"
)

// The default feature flags and metric, the default provider names and
// the other defaults of [PolicyConfig].
const (
	// EnabledFlag turns prenotes on per user (a boolean flag).
	EnabledFlag = "subscriptions.prenotes"
	// ProviderFlag picks the prenote provider per user (a string flag): its
	// value names the alternate provider or anything else, which means the
	// main provider.
	ProviderFlag = "subscriptions.payments.provider"

	// MetricName is the prenote counter, tagged submitted:true|false,
	// submitted_reason:<reason> when not submitted, and provider:<provider>
	// once a provider was picked.
	MetricName = "subscriptions.notifier.prenotes"

	// ProviderDefault is the default name of the main prenote provider
	// ([PolicyConfig.Provider]).
	ProviderDefault = "default"
	// ProviderAlternate is the default name of the provider the provider
	// flag may pick instead ([PolicyConfig.AlternateProvider]).
	ProviderAlternate = "alternate"
	// DefaultAlternateAccount is the default account prenotes through the
	// alternate provider are submitted under ([PolicyConfig.AlternateAccount]).
	DefaultAlternateAccount = "subscription"

	// GoodPaymentStatus is the status a "good" recent payment must have.
	GoodPaymentStatus = "COMPLETED"

	// DefaultNewUserDays: users younger than this many days submit a
	// prenote without the payment check.
	DefaultNewUserDays = 30
	// DefaultGoodPaymentDays: a good payment completed within this many days.
	DefaultGoodPaymentDays = 40
)

// The reasons of a decision. The not-submitted ones are the metric's
// submitted_reason tag; the submitted ones are only logged.
const (
	// ReasonFeatureFlagDisabled: the enabled flag is off for the user.
	ReasonFeatureFlagDisabled = "feature_flag_disabled"
	// ReasonNoUsableBankLink: no primary account or no accounts linked (the
	// wire value keeps its legacy spelling).
	ReasonNoUsableBankLink = "no_good_plaid_item"
	// ReasonNoGoodPayment: an older user without a good payment.
	ReasonNoGoodPayment = "no_good_payment"
	// ReasonBadResponseCode: the provider answered other than 201.
	ReasonBadResponseCode = "bad_response_code"
	// ReasonError: a lookup or the submission failed (this library's
	// addition: the legacy service only logged these).
	ReasonError = "error"

	// ReasonNewUser: submitted for a user younger than NewUserDays.
	ReasonNewUser = "new_user"
	// ReasonGoodPayment: submitted for a user with a good payment.
	ReasonGoodPayment = "good_payment"
)

// Decision is what a [Policy] decided for a user.
type Decision struct {
	// Submit is true when a prenote should be submitted.
	Submit bool
	// Reason explains the decision, one of the Reason… constants (or the
	// policy's own). When Submit is false it is the metric's
	// submitted_reason tag.
	Reason string
	// Provider is the provider to submit through, when Submit is true.
	Provider string
	// Account is the provider account to submit under, for a provider that
	// takes one. A decision with an Account also sends the user's email
	// ([Request]); without one the request carries only the user's ID and
	// names.
	Account string
}

// Policy decides whether a prenote is submitted for a user who was just
// sent the pre-billing notice. The [Step] submits and meters.
// [DefaultPolicy] is the rule this package ships.
type Policy interface {
	// Decide returns the decision for user. An error is logged and metered
	// as submitted_reason:error; it never fails the message.
	Decide(ctx context.Context, user billing.User) (Decision, error)
}

// PolicyFunc adapts a function to [Policy].
type PolicyFunc func(ctx context.Context, user billing.User) (Decision, error)

// Decide calls f.
func (f PolicyFunc) Decide(ctx context.Context, user billing.User) (Decision, error) {
	return f(ctx, user)
}

// FeatureFlags evaluates the host's feature flags for a user.
type FeatureFlags interface {
	// Enabled reports whether a boolean flag is on for the user.
	Enabled(ctx context.Context, flag, userID string) (bool, error)
	// Value returns a string flag's value for the user ("" when unset).
	Value(ctx context.Context, flag, userID string) (string, error)
}

// Payment is a payment from the host's payment history.
type Payment struct {
	// ID identifies the payment.
	ID string
	// Provider is the name of the processor that handled it.
	Provider string
	// Status is the payment's status, e.g. "COMPLETED".
	Status string
	// CompletionDate is when it completed; zero when it has not.
	CompletionDate time.Time
}

// Payments looks up users' payments.
type Payments interface {
	// Payments returns the user's recent payments, in any order.
	Payments(ctx context.Context, userID string) ([]Payment, error)
}

// PolicyConfig configures [NewDefaultPolicy].
type PolicyConfig struct {
	// Flags evaluates EnabledFlag and ProviderFlag. Required.
	Flags FeatureFlags
	// Accounts gives the user's bank link. Required.
	Accounts BankAccounts
	// Payments gives the user's recent payments. Required.
	Payments Payments
	// Clock tells the user's age and the payments' age. Defaults to
	// [billing.SystemClock].
	Clock billing.Clock
	// EnabledFlag turns prenotes on per user. Defaults to the package's
	// [EnabledFlag].
	EnabledFlag string
	// ProviderFlag picks the provider: a value equal to AlternateProvider
	// picks it, anything else (or unset) picks Provider. Defaults to the
	// package's [ProviderFlag].
	ProviderFlag string
	// Provider is the name of the main prenote provider, passed to the
	// [Submitter] and tagged on the metric. Defaults to [ProviderDefault]
	// ("default").
	Provider string
	// AlternateProvider is the name of the provider ProviderFlag may pick
	// instead. Defaults to [ProviderAlternate] ("alternate").
	AlternateProvider string
	// AlternateAccount is the account prenotes through AlternateProvider
	// are submitted under ([Decision.Account]); those requests also carry
	// the user's email. Defaults to [DefaultAlternateAccount]
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

// DefaultPolicy is the legacy service's prenote rule. Its gates, in order
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
type DefaultPolicy struct {
	cfg PolicyConfig
}

var _ Policy = (*DefaultPolicy)(nil)

// NewDefaultPolicy returns the default prenote rule, or an error naming the
// missing or bad config field.
func NewDefaultPolicy(cfg PolicyConfig) (*DefaultPolicy, error) {
	switch {
	case cfg.Flags == nil:
		return nil, errors.New("prenote: PolicyConfig.Flags is required")
	case cfg.Accounts == nil:
		return nil, errors.New("prenote: PolicyConfig.Accounts is required")
	case cfg.Payments == nil:
		return nil, errors.New("prenote: PolicyConfig.Payments is required")
	case cfg.NewUserDays < 0:
		return nil, fmt.Errorf("prenote: PolicyConfig.NewUserDays: negative %d", cfg.NewUserDays)
	case cfg.GoodPaymentDays < 0:
		return nil, fmt.Errorf("prenote: PolicyConfig.GoodPaymentDays: negative %d", cfg.GoodPaymentDays)
	}
	if cfg.Clock == nil {
		cfg.Clock = billing.SystemClock{}
	}
	if cfg.EnabledFlag == "" {
		cfg.EnabledFlag = EnabledFlag
	}
	if cfg.ProviderFlag == "" {
		cfg.ProviderFlag = ProviderFlag
	}
	if cfg.Provider == "" {
		cfg.Provider = ProviderDefault
	}
	if cfg.AlternateProvider == "" {
		cfg.AlternateProvider = ProviderAlternate
	}
	if cfg.AlternateAccount == "" {
		cfg.AlternateAccount = DefaultAlternateAccount
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
	return &DefaultPolicy{cfg: cfg}, nil
}

// Decide implements [Policy].
func (p *DefaultPolicy) Decide(ctx context.Context, user billing.User) (Decision, error) {
	on, err := p.cfg.Flags.Enabled(ctx, p.cfg.EnabledFlag, user.ID)
	if err != nil {
		return Decision{}, fmt.Errorf("billing: prenote: flag %s: %w", p.cfg.EnabledFlag, err)
	}
	if !on {
		return Decision{Reason: ReasonFeatureFlagDisabled}, nil
	}
	link, err := p.cfg.Accounts.BankLink(ctx, user.ID)
	if err != nil {
		return Decision{}, fmt.Errorf("billing: prenote: bank link: %w", err)
	}
	if !link.Usable() {
		return Decision{Reason: ReasonNoUsableBankLink}, nil
	}
	now := p.cfg.Clock.Now()
	reason := ReasonNewUser
	if user.DateJoined.IsZero() || now.Sub(user.DateJoined) >= time.Duration(p.cfg.NewUserDays)*24*time.Hour {
		payments, err := p.cfg.Payments.Payments(ctx, user.ID)
		if err != nil {
			return Decision{}, fmt.Errorf("billing: prenote: payments: %w", err)
		}
		if !p.hasGoodPayment(payments, now) {
			return Decision{Reason: ReasonNoGoodPayment}, nil
		}
		reason = ReasonGoodPayment
	}
	picked, err := p.cfg.Flags.Value(ctx, p.cfg.ProviderFlag, user.ID)
	if err != nil {
		return Decision{}, fmt.Errorf("billing: prenote: flag %s: %w", p.cfg.ProviderFlag, err)
	}
	if picked == p.cfg.AlternateProvider {
		return Decision{Submit: true, Reason: reason, Provider: picked, Account: p.cfg.AlternateAccount}, nil
	}
	return Decision{Submit: true, Reason: reason, Provider: p.cfg.Provider}, nil
}

// hasGoodPayment reports whether one payment went through
// GoodPaymentProvider, is COMPLETED and completed no earlier than
// GoodPaymentDays before now.
func (p *DefaultPolicy) hasGoodPayment(payments []Payment, now time.Time) bool {
	since := now.Add(-time.Duration(p.cfg.GoodPaymentDays) * 24 * time.Hour)
	for _, pay := range payments {
		if pay.Provider == p.cfg.GoodPaymentProvider && pay.Status == GoodPaymentStatus &&
			!pay.CompletionDate.IsZero() && !pay.CompletionDate.Before(since) {
			return true
		}
	}
	return false
}
