package entitlement_test

import (
	"fmt"
	"time"

	"github.com/dynabill/billing/entitlement"
)

// A cancelled subscription keeps its tier until the end of the paid
// period; at that instant access falls back to the profile's tier.
func ExampleResolveAccess() {
	end := time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC)
	subs := []entitlement.ProviderSubscription{{
		SubscriptionID: "sub_1", Tier: entitlement.TierSage, Status: entitlement.ProviderCanceled, CurrentPeriodEnd: end,
	}}
	profile, _ := entitlement.ParseTier("free") // as stored in profiles
	for _, now := range []time.Time{end.Add(-time.Second), end} {
		a := entitlement.ResolveAccess(now, nil, subs, profile)
		fmt.Println(now.Format(time.TimeOnly), a.Tier, a.Reason, a.Source)
	}
	passes := []entitlement.FounderPass{{PassType: entitlement.PassGuildBuilder, LifetimeAccess: true, GrantedTier: entitlement.PassGuildBuilder.Tier()}}
	a := entitlement.ResolveAccess(end, passes, subs, profile)
	fmt.Println("with a pass:", a.Tier, a.Reason, a.Source)
	// Output:
	// 23:59:59 SAGE grace_period sub_1
	// 00:00:00 FREE profile profile
	// with a pass: GUILDMASTER founder_pass GUILD_BUILDER
}
