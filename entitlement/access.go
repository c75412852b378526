package entitlement

import (
	"time"

	"github.com/dynabill/billing/internal/enum"
)

// PassType is the type of a lifetime founder pass.
type PassType string

// The founder passes and the tier each grants.
const (
	PassFoundingMember PassType = "FOUNDING_MEMBER" // grants SAGE
	PassGuildBuilder   PassType = "GUILD_BUILDER"   // grants GUILDMASTER
)

// Tier returns the tier the pass grants, "" for an unknown pass type.
func (p PassType) Tier() Tier {
	switch p {
	case PassFoundingMember:
		return TierSage
	case PassGuildBuilder:
		return TierGuildmaster
	}
	return ""
}

// passTypes is every pass type: exactly those [PassType.Tier] knows.
var passTypes = enum.New(PassFoundingMember, PassGuildBuilder)

// ParsePassType reads a pass type in any (ASCII) case, ignoring surrounding
// spaces; anything else is a [*billing.FieldError] wrapping [ErrInvalidPassType].
func ParsePassType(s string) (PassType, error) {
	return passTypes.Parse(s, enum.TrimUpperASCII, invalidField("passType", ErrInvalidPassType))
}

// FounderPass is a lifetime pass: the item PK=USER#<id>,
// SK=FOUNDER#<passType>.
type FounderPass struct {
	UserID   string
	PassType PassType
	// PaymentIntentID is stripePaymentIntentId, the purchase.
	PaymentIntentID string
	PurchasedAt     time.Time
	// LifetimeAccess is always true for passes the library grants; a pass
	// whose stored lifetimeAccess is false (revoked by the host) grants
	// nothing.
	LifetimeAccess bool
	// GrantedTier is the tier the pass grants (from the pass type when the
	// item lacks grantedTier).
	GrantedTier          Tier
	CreatedAt, UpdatedAt time.Time
}

// AccessReason says which rule decided a user's access.
type AccessReason string

// The access rules, in priority order.
const (
	ReasonFounderPass        AccessReason = "founder_pass"
	ReasonActiveSubscription AccessReason = "active_subscription"
	ReasonGracePeriod        AccessReason = "grace_period"
	ReasonProfile            AccessReason = "profile"
	ReasonFree               AccessReason = "free"
)

// Access is a user's effective tier and why.
type Access struct {
	Tier   Tier
	Reason AccessReason
	// Source names what granted the tier: the pass type, the subscription
	// ID, "profile" for the profile tier, "" for the free default.
	Source string
	// Until is when a subscription's grant ends (its CurrentPeriodEnd);
	// zero when it is not bounded (passes, profile, free, or an active
	// subscription whose period end is unknown).
	Until time.Time
}

// ResolveAccess decides a user's effective tier at now by these rules,
// first match wins:
//
//  1. founder pass: the highest GrantedTier among passes with
//     LifetimeAccess (an active subscription may coexist; the pass wins);
//  2. subscription: the highest tier among qualifying subscriptions:
//     status active or trialing (a trial grants its plan) while now is
//     before CurrentPeriodEnd, or when the end is unknown (zero) → reason
//     active_subscription; status canceled while now is before
//     CurrentPeriodEnd → grace_period. At exactly CurrentPeriodEnd the
//     grant has ended. past_due, incomplete and incomplete_expired grant
//     nothing. On equal tiers an active subscription is preferred over one
//     in grace, then the later end, then the smaller subscription ID;
//  3. profile: profileTier when it is a valid tier (FREE included; parse
//     stored values with [ParseTier]);
//  4. free.
//
// The function is pure: same inputs, same answer.
func ResolveAccess(now time.Time, passes []FounderPass, subs []ProviderSubscription, profileTier Tier) Access {
	var best *Access
	for _, p := range passes {
		if !p.LifetimeAccess || !p.GrantedTier.Valid() {
			continue
		}
		if best == nil || p.GrantedTier.Rank() > best.Tier.Rank() ||
			(p.GrantedTier == best.Tier && string(p.PassType) < best.Source) {
			best = &Access{Tier: p.GrantedTier, Reason: ReasonFounderPass, Source: string(p.PassType)}
		}
	}
	if best != nil {
		return *best
	}
	for _, s := range subs {
		c, ok := subscriptionAccess(now, s)
		if ok && (best == nil || betterSubscription(c, *best)) {
			best = &c
		}
	}
	if best != nil {
		return *best
	}
	if profileTier.Valid() {
		return Access{Tier: profileTier, Reason: ReasonProfile, Source: "profile"}
	}
	return Access{Tier: TierFree, Reason: ReasonFree}
}

// subscriptionAccess is what one subscription grants at now, if anything.
func subscriptionAccess(now time.Time, s ProviderSubscription) (Access, bool) {
	if !s.Tier.Valid() {
		return Access{}, false
	}
	end := s.CurrentPeriodEnd
	inPeriod := !end.IsZero() && now.Before(end)
	a := Access{Tier: s.Tier, Source: s.SubscriptionID, Until: end}
	switch s.Status {
	case ProviderActive, ProviderTrialing:
		if end.IsZero() || inPeriod {
			a.Reason = ReasonActiveSubscription
			return a, true
		}
	case ProviderCanceled:
		if inPeriod {
			a.Reason = ReasonGracePeriod
			return a, true
		}
	}
	return Access{}, false
}

func betterSubscription(c, best Access) bool {
	if c.Tier.Rank() != best.Tier.Rank() {
		return c.Tier.Rank() > best.Tier.Rank()
	}
	if c.Reason != best.Reason {
		return c.Reason == ReasonActiveSubscription
	}
	if !c.Until.Equal(best.Until) {
		return c.Until.IsZero() || (!best.Until.IsZero() && c.Until.After(best.Until))
	}
	return c.Source < best.Source
}
