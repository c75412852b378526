// Package entitlement is the second domain of the library: what an account
// may use and how it pays for it, beside the per-period records the
// collector bills. It holds access tiers ([Tier]), lifetime founder passes,
// subscriptions mirrored from an external processor's events
// ([ProviderEvent], [ProviderSubscription]), credit balances ([Credits]),
// recurring payments ([RecurringSubscription]) and their receipts, with the
// ports a host calls ([Accounts], [Payments]) and [ResolveAccess], which
// picks the tier an account gets now: pass, then an active or in-grace
// subscription, then the profile's tier, then free.
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
