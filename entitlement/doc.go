// Package entitlement is the second domain of the library: what an account
// may use and how it pays for it, beside the per-period records the
// collector bills. It holds access tiers ([Tier]), lifetime founder passes,
// subscriptions mirrored from an external processor's events
// ([ProviderEvent], [ProviderSubscription]), credit balances ([Credits]),
// recurring payments ([RecurringSubscription]) and their receipts, with the
// ports a host calls ([Accounts], [Payments]) and [ResolveAccess], which
// picks the tier an account gets now: the highest tier a founder pass or
// an active or in-grace subscription grants (a pass for a lower tier does
// not hide a higher paid tier; on a tie the pass is reported), else the
// profile's tier, else free.
//
// It is a package of its own because none of it is needed to collect
// payments: a host that bills periods with package billing never imports
// it, and one that resolves access imports it without the collector. Its
// DynamoDB implementation lives beside the other storage, in package
// dynamostore (NewAccounts, NewPayments), and billingtest and memory have
// in-memory ones.
//
//	accounts, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: client})
//	access, err := accounts.ResolveAccess(ctx, userID)
//	if access.Tier.Rank() >= entitlement.TierJourneyman.Rank() {
//		// serve the feature
//	}
package entitlement

import "errors"

// The package's errors, for [errors.Is]. The errors returned wrap them with
// the operation and the key or value.
var (
	// Accounts and tiers.

	// ErrInvalidTier reports a tier name other than FREE, INITIATE,
	// JOURNEYMAN, SAGE and GUILDMASTER (in any case).
	ErrInvalidTier = errors.New("billing: invalid tier")

	// ErrInvalidAccount reports an empty or oversized account (user) ID.
	ErrInvalidAccount = errors.New("billing: invalid account ID")

	// Credits.

	// ErrInsufficientCredits reports a consume larger than the balance.
	// The error is an [*InsufficientCreditsError] carrying the balance.
	ErrInsufficientCredits = errors.New("billing: insufficient credits")

	// ErrInvalidCredits reports a credit amount outside 1..[MaxCreditAmount],
	// an invalid monthly grant period or an invalid request ID (see
	// [CheckRequestID]).
	ErrInvalidCredits = errors.New("billing: invalid credit amount")

	// ErrRequestIDReused reports a grant, top-up or consume whose request
	// ID was already applied to the user's balance by another operation or
	// with another amount. Nothing is changed. The error names the key and
	// what the request ID was used for.
	ErrRequestIDReused = errors.New("billing: credits request ID reused with different parameters")

	// Provider subscriptions.

	// ErrInvalidProviderStatus reports a subscription status other than the
	// six a processor reports. The error is a [*billing.FieldError] naming "status"
	// and the value.
	ErrInvalidProviderStatus = errors.New("billing: invalid provider subscription status")

	// ErrInvalidProviderEvent reports a [ProviderEvent] with a missing or malformed
	// field. The error is a [*billing.FieldError] naming the field.
	ErrInvalidProviderEvent = errors.New("billing: invalid provider event")

	// Founder passes.

	// ErrInvalidPassType reports a founder pass type other than
	// FOUNDING_MEMBER and GUILD_BUILDER.
	ErrInvalidPassType = errors.New("billing: invalid founder pass type")

	// Recurring payments.

	// ErrInvalidPayment reports a recurring subscription or receipt that
	// cannot be stored: a bad ID, SKU, payment day, amount or date, or a
	// receipt that does not belong to the subscription it is recorded for.
	// The error is a [*billing.FieldError] naming the field.
	ErrInvalidPayment = errors.New("billing: invalid recurring payment")
)
