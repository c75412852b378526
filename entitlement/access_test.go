package entitlement_test

import (
	"slices"
	"testing"
	"time"

	"github.com/dynabill/billing/entitlement"
	"github.com/stretchr/testify/assert"
)

// TestResolveAccessHighestEntitlementWins: a founder pass and a qualifying
// subscription compete by tier: a pass for a lower tier does not hide a
// higher paid tier, which ends at its period end and leaves the pass; on a
// tie the pass, whose grant does not end, is reported. The profile stays
// a fallback.
func TestResolveAccessHighestEntitlementWins(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	end := now.Add(30 * 24 * time.Hour)
	founding := entitlement.FounderPass{UserID: "u1", PassType: entitlement.PassFoundingMember, LifetimeAccess: true, GrantedTier: entitlement.TierSage}
	guild := entitlement.FounderPass{UserID: "u1", PassType: entitlement.PassGuildBuilder, LifetimeAccess: true, GrantedTier: entitlement.TierGuildmaster}
	sub := func(id string, tier entitlement.Tier, st entitlement.ProviderStatus) entitlement.ProviderSubscription {
		return entitlement.ProviderSubscription{UserID: "u1", SubscriptionID: id, Tier: tier, Status: st, CurrentPeriodEnd: end}
	}
	type (
		passes = []entitlement.FounderPass
		subs   = []entitlement.ProviderSubscription
	)
	passAccess := func(p entitlement.FounderPass) entitlement.Access {
		return entitlement.Access{Tier: p.GrantedTier, Reason: entitlement.ReasonFounderPass, Source: string(p.PassType)}
	}
	for _, tc := range []struct {
		name    string
		at      time.Time
		passes  passes
		subs    subs
		profile entitlement.Tier
		want    entitlement.Access
	}{
		{"a higher active subscription beats a pass", now, passes{founding}, subs{sub("sub_g", entitlement.TierGuildmaster, entitlement.ProviderActive)}, "",
			entitlement.Access{Tier: entitlement.TierGuildmaster, Reason: entitlement.ReasonActiveSubscription, Source: "sub_g", Until: end}},
		{"a higher subscription in grace beats a pass", now, passes{founding}, subs{sub("sub_g", entitlement.TierGuildmaster, entitlement.ProviderCanceled)}, "",
			entitlement.Access{Tier: entitlement.TierGuildmaster, Reason: entitlement.ReasonGracePeriod, Source: "sub_g", Until: end}},
		{"at the subscription's end the pass remains", end, passes{founding}, subs{sub("sub_g", entitlement.TierGuildmaster, entitlement.ProviderActive)}, "",
			passAccess(founding)},
		{"a higher pass beats a subscription", now, passes{guild}, subs{sub("sub_s", entitlement.TierSage, entitlement.ProviderActive)}, "",
			passAccess(guild)},
		{"a tie reports the pass", now, passes{founding}, subs{sub("sub_s", entitlement.TierSage, entitlement.ProviderActive)}, "",
			passAccess(founding)},
		{"the highest of passes and subscriptions", now, passes{founding, guild},
			subs{sub("sub_s", entitlement.TierSage, entitlement.ProviderActive), sub("sub_j", entitlement.TierJourneyman, entitlement.ProviderActive)}, "",
			passAccess(guild)},
		{"a past_due higher subscription grants nothing", now, passes{founding}, subs{sub("sub_g", entitlement.TierGuildmaster, entitlement.ProviderPastDue)}, "",
			passAccess(founding)},
		{"a higher profile does not beat a pass", now, passes{founding}, nil, entitlement.TierGuildmaster, passAccess(founding)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := entitlement.ResolveAccess(tc.at, tc.passes, tc.subs, tc.profile)
			assert.Equal(t, tc.want, got)
			rp, rs := slices.Clone(tc.passes), slices.Clone(tc.subs)
			slices.Reverse(rp)
			slices.Reverse(rs)
			assert.Equal(t, got, entitlement.ResolveAccess(tc.at, rp, rs, tc.profile), "reversed inputs")
		})
	}
}
