package entitlement

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/enum"
)

// Tier is an access tier of the provider-billed deployment. Tiers are
// ordered: FREE < INITIATE < JOURNEYMAN < SAGE
// < GUILDMASTER (see [Tier.Rank]).
//
// The canonical spelling is upper case. Profiles store the free tier as
// "free"; [ParseTier] accepts any case and surrounding spaces, and
// [Accounts.SetProfileTier] writes "free" for [TierFree] as existing
// profiles do.
type Tier string

// The tiers, lowest first.
const (
	TierFree        Tier = "FREE"
	TierInitiate    Tier = "INITIATE"
	TierJourneyman  Tier = "JOURNEYMAN"
	TierSage        Tier = "SAGE"
	TierGuildmaster Tier = "GUILDMASTER"
)

// tiers is every tier, lowest first: a tier's index is its [Tier.Rank].
var tiers = enum.New(TierFree, TierInitiate, TierJourneyman, TierSage, TierGuildmaster)

// Tiers returns every tier, lowest first.
func Tiers() []Tier { return tiers.Values() }

// Rank orders the tiers: 0 for FREE up to 4 for GUILDMASTER, -1 for a value
// that is not a tier (compare parsed tiers only).
func (t Tier) Rank() int { return tiers.Index(t) }

// Valid reports whether t is one of the tier constants (canonical case).
func (t Tier) Valid() bool { return tiers.Valid(t) }

// ParseTier reads a tier name in any (ASCII) case, ignoring surrounding
// spaces: "free", "Sage" and " GUILDMASTER " are tiers. Anything else, the empty
// string included, is a [*billing.FieldError] wrapping [ErrInvalidTier].
// Only ASCII letters fold: a look-alike such as "ſage" (long s) is not a tier.
func ParseTier(s string) (Tier, error) {
	return tiers.Parse(s, enum.TrimUpperASCII, invalidField("tier", ErrInvalidTier))
}

// invalidField returns the error of a value outside an enum: a
// [*billing.FieldError] naming field and the value as given, wrapping sentinel.
func invalidField(field string, sentinel error) func(value string) error {
	return func(value string) error { return &billing.FieldError{Field: field, Value: value, Err: sentinel} }
}

// Accounts is the account side of the single-table layout: a credit
// balance per user, subscriptions billed by an external processor and
// mirrored from its events, lifetime founder passes, and the resolution of
// a user's access tier. [dynamostore.Accounts] implements it on DynamoDB;
// billingtest.Accounts is the in-memory twin. Every method is safe for
// concurrent use.
type Accounts interface {
	// Balance returns the user's credits. A user without a record has a
	// zero balance; a record past its expiry reads as zero (see [Credits]).
	Balance(ctx context.Context, userID string) (Credits, error)
	// Grant adds n > 0 credits atomically, creating the record if needed,
	// and returns the new state: it includes this change, and may include
	// concurrent changes of the same balance (dynamostore reads it just
	// after its transaction).
	//
	// requestID names the change, chosen by the caller (the ID of the job,
	// order or event the credits are for): 1 to [MaxRequestID] bytes of
	// UTF-8, checked by [CheckRequestID]. Request IDs are per user and
	// shared by Grant, TopUp and Consume. A retried request (same user,
	// same request ID, same operation and n) changes nothing twice: it
	// writes nothing and returns the current state with Repeated set, even
	// when the balance no longer covers a repeated Consume. The same request
	// ID with another operation or amount is refused with an error wrapping
	// [ErrRequestIDReused] and changes nothing. How long a request ID is
	// remembered depends on the implementation (see
	// [dynamostore.AccountsConfig.RequestMarkerRetention]).
	Grant(ctx context.Context, userID string, n int64, requestID string) (Credits, error)
	// TopUp is Grant for purchased credits: it also sets LastTopUp.
	TopUp(ctx context.Context, userID string, n int64, requestID string) (Credits, error)
	// Consume takes n > 0 credits if the balance has them, atomically, and
	// returns the new state; otherwise it changes nothing and returns an
	// [*InsufficientCreditsError]. requestID is as for Grant: a repeated
	// Consume that was applied reports success (Repeated), never
	// insufficient credits; a refused Consume records nothing, so its
	// request ID may be used again.
	Consume(ctx context.Context, userID string, n int64, requestID string) (Credits, error)
	// MonthlyGrant adds the tier's monthly quota once per period: a second
	// call with the same period (a redelivered payment event) grants
	// nothing and reports Applied false. See [dynamostore.Accounts.MonthlyGrant].
	MonthlyGrant(ctx context.Context, userID string, tier Tier, period, eventID string) (MonthlyGrantResult, error)

	// ApplyProviderEvent mirrors a processor event into the subscription
	// record unless the record already reflects this or a newer event, in
	// the order of [ProviderEvent.NewerThan] (a deletion is final over an
	// update of the same instant); applied reports whether it wrote.
	ApplyProviderEvent(ctx context.Context, ev ProviderEvent) (applied bool, err error)
	// GetProviderSubscription returns one subscription or [billing.ErrNotFound].
	GetProviderSubscription(ctx context.Context, userID, subscriptionID string) (ProviderSubscription, error)
	// ListProviderSubscriptions returns the user's subscriptions ordered
	// by subscription ID.
	ListProviderSubscriptions(ctx context.Context, userID string) ([]ProviderSubscription, error)

	// GrantFounderPass records a lifetime pass once; granted is false when
	// the user already holds a pass of this type (the stored one is kept).
	GrantFounderPass(ctx context.Context, userID string, pass PassType, paymentIntentID string, purchasedAt time.Time) (granted bool, err error)
	// FounderPasses returns the user's passes ordered by pass type.
	FounderPasses(ctx context.Context, userID string) ([]FounderPass, error)

	// SetProfileTier sets the tier attribute of the user's profile record,
	// creating a bare profile if there is none. The profile belongs to the
	// host; this is for tests and tools.
	SetProfileTier(ctx context.Context, userID string, tier Tier) error
	// ResolveAccess returns the user's effective tier and why, by the rules
	// of [ResolveAccess] at the store's clock's now.
	ResolveAccess(ctx context.Context, userID string) (Access, error)
}

// MaxAccountID bounds an account (user) ID so that every key stays far
// below DynamoDB's limits (2048 bytes partition, 1024 bytes sort key).
const MaxAccountID = 512

// CheckAccountID returns an error wrapping [ErrInvalidAccount] for an
// empty account ID or one longer than [MaxAccountID] bytes. Every
// implementation of [Accounts] and [Payments] refuses such IDs with it, so a
// store of the host's own behaves like the library's.
func CheckAccountID(userID string) error {
	if userID == "" || len(userID) > MaxAccountID {
		return fmt.Errorf("%w: user ID %q (1 to %d bytes)", ErrInvalidAccount, userID, MaxAccountID)
	}
	return nil
}
