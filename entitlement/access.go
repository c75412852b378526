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

// The access rules.
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
	// Until is when the grant of Source ends (a subscription's
	// CurrentPeriodEnd); zero when it is not bounded (passes, profile,
	// free, or an active subscription whose period end is unknown). At
	// Until access falls to what else the user holds: a pass of a lower
	// tier, another subscription, the profile's tier or free.
	Until time.Time
}

// ResolveAccess decides a user's effective tier at now: the highest tier
// any founder pass or qualifying subscription grants, falling back to the
// profile's tier and then to free when neither grants anything.
//
//   - founder pass: a pass with LifetimeAccess grants its GrantedTier,
//     without end → reason founder_pass;
//   - subscription: status active or trialing (a trial grants its plan)
//     while now is before CurrentPeriodEnd, or when the end is unknown
//     (zero) → reason active_subscription; status canceled while now is
//     before CurrentPeriodEnd → grace_period. At exactly CurrentPeriodEnd
//     the grant has ended. past_due, incomplete and incomplete_expired
//     grant nothing;
//   - profile: when no pass and no subscription grants anything,
//     profileTier when it is a valid tier (FREE included; parse stored
//     values with [ParseTier]). The profile mirrors the subscription tier
//     the host last saw, so it is not weighed against the passes and
//     subscriptions it mirrors;
//   - free.
//
// A pass for a lower tier does not hide a higher paid tier: a user with a
// FOUNDING_MEMBER pass (SAGE) and an active GUILDMASTER subscription gets
// GUILDMASTER until the subscription's period ends, and SAGE after. When
// a pass and a subscription grant the same tier the pass is reported,
// since that grant does not end (Until is zero). Among passes of one tier
// the smaller pass type is reported; among subscriptions of one tier an
// active one is preferred over one in grace, then the later end, then the
// smaller subscription ID.
//
// The function is pure: same inputs, same answer, whatever their order.
func ResolveAccess(now time.Time, passes []FounderPass, subs []ProviderSubscription, profileTier Tier) Access {
	var pass, sub *Access
	for _, p := range passes {
		if !p.LifetimeAccess || !p.GrantedTier.Valid() {
			continue
		}
		if pass == nil || p.GrantedTier.Rank() > pass.Tier.Rank() ||
			(p.GrantedTier == pass.Tier && string(p.PassType) < pass.Source) {
			pass = &Access{Tier: p.GrantedTier, Reason: ReasonFounderPass, Source: string(p.PassType)}
		}
	}
	for _, s := range subs {
		c, ok := subscriptionAccess(now, s)
		if ok && (sub == nil || betterSubscription(c, *sub)) {
			sub = &c
		}
	}
	switch {
	case pass != nil && (sub == nil || pass.Tier.Rank() >= sub.Tier.Rank()):
		return *pass
	case sub != nil:
		return *sub
	case profileTier.Valid():
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
