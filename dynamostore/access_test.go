package dynamostore_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAccessResolveRules is the table test of issue #7: every rule of
// access resolution, and the grace boundary one second either side of
// currentPeriodEnd.
func TestAccessResolveRules(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	sub := func(id string, tier entitlement.Tier, st entitlement.ProviderStatus, end time.Duration) entitlement.ProviderSubscription {
		s := entitlement.ProviderSubscription{UserID: "u1", SubscriptionID: id, Tier: tier, Status: st}
		if end != 0 {
			s.CurrentPeriodEnd = now.Add(end)
		}
		return s
	}
	noEnd := time.Duration(0)
	pass := func(p entitlement.PassType) entitlement.FounderPass {
		return entitlement.FounderPass{UserID: "u1", PassType: p, LifetimeAccess: true, GrantedTier: p.Tier()}
	}
	revoked := pass(entitlement.PassGuildBuilder)
	revoked.LifetimeAccess = false
	month := 30 * 24 * time.Hour
	type subs = []entitlement.ProviderSubscription
	type passes = []entitlement.FounderPass
	free := entitlement.Access{Tier: entitlement.TierFree, Reason: entitlement.ReasonFree}
	for _, c := range []struct {
		name    string
		passes  passes
		subs    subs
		profile entitlement.Tier
		want    entitlement.Access
	}{
		{"nothing is free", nil, nil, "", free},
		{"profile free", nil, nil, entitlement.TierFree, entitlement.Access{Tier: entitlement.TierFree, Reason: entitlement.ReasonProfile, Source: "profile"}},
		{"profile tier", nil, nil, entitlement.TierSage, entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonProfile, Source: "profile"}},
		{"invalid profile is ignored", nil, nil, "PLATINUM", free},
		{"founding member pass", passes{pass(entitlement.PassFoundingMember)}, nil, entitlement.TierInitiate,
			entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonFounderPass, Source: "FOUNDING_MEMBER"}},
		{"a higher subscription wins over a pass", passes{pass(entitlement.PassFoundingMember)},
			subs{sub("sub_g", entitlement.TierGuildmaster, entitlement.ProviderActive, month)}, "",
			entitlement.Access{Tier: entitlement.TierGuildmaster, Reason: entitlement.ReasonActiveSubscription, Source: "sub_g", Until: now.Add(month)}},
		{"pass wins over a lower subscription", passes{pass(entitlement.PassFoundingMember)},
			subs{sub("sub_j", entitlement.TierJourneyman, entitlement.ProviderActive, month)}, "",
			entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonFounderPass, Source: "FOUNDING_MEMBER"}},
		{"pass reported on a tie with a subscription", passes{pass(entitlement.PassFoundingMember)},
			subs{sub("sub_s", entitlement.TierSage, entitlement.ProviderActive, month)}, "",
			entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonFounderPass, Source: "FOUNDING_MEMBER"}},
		{"highest pass", passes{pass(entitlement.PassFoundingMember), pass(entitlement.PassGuildBuilder)}, nil, "",
			entitlement.Access{Tier: entitlement.TierGuildmaster, Reason: entitlement.ReasonFounderPass, Source: "GUILD_BUILDER"}},
		{"revoked pass grants nothing", passes{revoked}, nil, entitlement.TierInitiate,
			entitlement.Access{Tier: entitlement.TierInitiate, Reason: entitlement.ReasonProfile, Source: "profile"}},
		{"active subscription", nil, subs{sub("sub_1", entitlement.TierJourneyman, entitlement.ProviderActive, month)}, entitlement.TierGuildmaster,
			entitlement.Access{Tier: entitlement.TierJourneyman, Reason: entitlement.ReasonActiveSubscription, Source: "sub_1", Until: now.Add(month)}},
		{"active, cancelling at period end", nil, subs{{SubscriptionID: "sub_1", Tier: entitlement.TierSage, Status: entitlement.ProviderActive,
			CancelAtPeriodEnd: true, CurrentPeriodEnd: now.Add(time.Hour)}}, "",
			entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonActiveSubscription, Source: "sub_1", Until: now.Add(time.Hour)}},
		{"active, period end unknown", nil, subs{sub("sub_1", entitlement.TierSage, entitlement.ProviderActive, noEnd)}, "",
			entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonActiveSubscription, Source: "sub_1"}},
		{"active, 1s before period end", nil, subs{sub("sub_1", entitlement.TierSage, entitlement.ProviderActive, time.Second)}, "",
			entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonActiveSubscription, Source: "sub_1", Until: now.Add(time.Second)}},
		{"active, at period end", nil, subs{{SubscriptionID: "sub_1", Tier: entitlement.TierSage, Status: entitlement.ProviderActive, CurrentPeriodEnd: now}}, "", free},
		{"active, 1s after period end", nil, subs{sub("sub_1", entitlement.TierSage, entitlement.ProviderActive, -time.Second)}, entitlement.TierInitiate,
			entitlement.Access{Tier: entitlement.TierInitiate, Reason: entitlement.ReasonProfile, Source: "profile"}},
		{"trialing counts as active", nil, subs{sub("sub_t", entitlement.TierInitiate, entitlement.ProviderTrialing, month)}, "",
			entitlement.Access{Tier: entitlement.TierInitiate, Reason: entitlement.ReasonActiveSubscription, Source: "sub_t", Until: now.Add(month)}},
		{"canceled, 1s before period end: grace", nil, subs{sub("sub_c", entitlement.TierSage, entitlement.ProviderCanceled, time.Second)}, "",
			entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonGracePeriod, Source: "sub_c", Until: now.Add(time.Second)}},
		{"canceled, at period end: no grace", nil, subs{{SubscriptionID: "sub_c", Tier: entitlement.TierSage, Status: entitlement.ProviderCanceled, CurrentPeriodEnd: now}}, "", free},
		{"canceled, 1s after period end: no grace", nil, subs{sub("sub_c", entitlement.TierSage, entitlement.ProviderCanceled, -time.Second)}, entitlement.TierJourneyman,
			entitlement.Access{Tier: entitlement.TierJourneyman, Reason: entitlement.ReasonProfile, Source: "profile"}},
		{"canceled, period end unknown: no grace", nil, subs{sub("sub_c", entitlement.TierSage, entitlement.ProviderCanceled, noEnd)}, "", free},
		{"past_due grants nothing", nil, subs{sub("sub_p", entitlement.TierSage, entitlement.ProviderPastDue, month)}, "", free},
		{"incomplete grants nothing", nil, subs{sub("sub_i", entitlement.TierSage, entitlement.ProviderIncomplete, month)}, "", free},
		{"incomplete_expired grants nothing", nil, subs{sub("sub_x", entitlement.TierSage, entitlement.ProviderIncompleteExpired, month)}, "", free},
		{"highest qualifying tier, grace included", nil, subs{
			sub("sub_a", entitlement.TierInitiate, entitlement.ProviderActive, month),
			sub("sub_c", entitlement.TierSage, entitlement.ProviderCanceled, time.Hour),
			sub("sub_p", entitlement.TierGuildmaster, entitlement.ProviderPastDue, month),
		}, "", entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonGracePeriod, Source: "sub_c", Until: now.Add(time.Hour)}},
		{"equal tiers: active before grace", nil, subs{
			sub("sub_c", entitlement.TierSage, entitlement.ProviderCanceled, month),
			sub("sub_a", entitlement.TierSage, entitlement.ProviderActive, time.Hour),
		}, "", entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonActiveSubscription, Source: "sub_a", Until: now.Add(time.Hour)}},
		{"equal tiers and reasons: later end", nil, subs{
			sub("sub_a", entitlement.TierSage, entitlement.ProviderActive, time.Hour),
			sub("sub_b", entitlement.TierSage, entitlement.ProviderActive, month),
		}, "", entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonActiveSubscription, Source: "sub_b", Until: now.Add(month)}},
		{"subscription before a higher profile", nil, subs{sub("sub_1", entitlement.TierInitiate, entitlement.ProviderActive, month)}, entitlement.TierGuildmaster,
			entitlement.Access{Tier: entitlement.TierInitiate, Reason: entitlement.ReasonActiveSubscription, Source: "sub_1", Until: now.Add(month)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := entitlement.ResolveAccess(now, c.passes, c.subs, c.profile)
			require.Equal(t, c.want, got, "got  %+v\nwant %+v", got, c.want)
			// Order of the inputs does not matter.
			require.Equal(t, got, entitlement.ResolveAccess(now, acctReversed(c.passes), acctReversed(c.subs), c.profile), "acctReversed inputs")
		})
	}
}

func acctReversed[T any](in []T) []T {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}

// TestAccessResolveEndToEnd walks one user through every rule on both
// stores, the subscription written by provider events.
func TestAccessResolveEndToEnd(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		want := func(tier entitlement.Tier, reason entitlement.AccessReason, source string) {
			t.Helper()
			got, err := e.accounts.ResolveAccess(ctx, "u1")
			require.NoError(t, err, "at %v", e.clock.Now())
			require.Equal(t, tier, got.Tier, "at %v: %+v", e.clock.Now(), got)
			require.Equal(t, reason, got.Reason, "at %v: %+v", e.clock.Now(), got)
			require.Equal(t, source, got.Source, "at %v: %+v", e.clock.Now(), got)
		}
		want(entitlement.TierFree, entitlement.ReasonFree, "")
		require.NoError(t, e.accounts.SetProfileTier(ctx, "u1", "free"))
		want(entitlement.TierFree, entitlement.ReasonProfile, "profile")
		if e.db != nil {
			require.Equal(t, "free", acctText(e.raw(t, "USER#u1", "PROFILE#u1")["tier"]), "profile tier stored")
		}
		require.NoError(t, e.accounts.SetProfileTier(ctx, "u1", entitlement.TierJourneyman))
		want(entitlement.TierJourneyman, entitlement.ReasonProfile, "profile")

		end := acctStart.Add(30 * 24 * time.Hour)
		ev := provEvent("evt_1", 0, entitlement.ProviderActive)
		ev.Tier, ev.CurrentPeriodStart, ev.CurrentPeriodEnd = entitlement.TierSage, acctStart, end
		provApply(t, e, ev, true)
		want(entitlement.TierSage, entitlement.ReasonActiveSubscription, "sub_1")

		ev.EventID, ev.Created, ev.Status = "evt_2", acctStart.Add(time.Hour), entitlement.ProviderCanceled
		provApply(t, e, ev, true)
		want(entitlement.TierSage, entitlement.ReasonGracePeriod, "sub_1")
		e.clock.Set(end.Add(-time.Second))
		want(entitlement.TierSage, entitlement.ReasonGracePeriod, "sub_1")
		e.clock.Set(end)
		want(entitlement.TierJourneyman, entitlement.ReasonProfile, "profile")
		e.clock.Set(end.Add(time.Second))
		want(entitlement.TierJourneyman, entitlement.ReasonProfile, "profile")

		_, err := e.accounts.GrantFounderPass(ctx, "u1", entitlement.PassFoundingMember, "pi_1", time.Time{})
		require.NoError(t, err)
		want(entitlement.TierSage, entitlement.ReasonFounderPass, "FOUNDING_MEMBER")
		// Credits in the same partition do not disturb the resolution.
		_, err = e.accounts.MonthlyGrant(ctx, "u1", entitlement.TierSage, "2025-02", "evt_3")
		require.NoError(t, err)
		want(entitlement.TierSage, entitlement.ReasonFounderPass, "FOUNDING_MEMBER")
		require.ErrorIs(t, e.accounts.SetProfileTier(ctx, "u1", "PLATINUM"), entitlement.ErrInvalidTier, "set invalid profile tier")
		if e.db != nil {
			require.NotZero(t, e.db.Calls("Query"), "no query")
		}
	})
}

// TestAccessHighestEntitlementWins: on both stores, a founder pass for a
// lower tier does not hide a higher paid tier: a FOUNDING_MEMBER pass
// (SAGE) beside an active GUILDMASTER subscription resolves to the
// subscription until its period ends, and to the pass after; a cancel
// keeps the higher tier through the grace period.
func TestAccessHighestEntitlementWins(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		want := func(tier entitlement.Tier, reason entitlement.AccessReason, source string) {
			t.Helper()
			got, err := e.accounts.ResolveAccess(ctx, "u1")
			require.NoError(t, err, "at %v", e.clock.Now())
			assert.Equal(t, tier, got.Tier, "at %v: %+v", e.clock.Now(), got)
			assert.Equal(t, reason, got.Reason, "at %v: %+v", e.clock.Now(), got)
			assert.Equal(t, source, got.Source, "at %v: %+v", e.clock.Now(), got)
		}
		_, err := e.accounts.GrantFounderPass(ctx, "u1", entitlement.PassFoundingMember, "pi_1", time.Time{})
		require.NoError(t, err)
		want(entitlement.TierSage, entitlement.ReasonFounderPass, "FOUNDING_MEMBER")

		end := acctStart.Add(30 * 24 * time.Hour)
		ev := provEvent("evt_1", 0, entitlement.ProviderActive)
		ev.Tier, ev.CurrentPeriodStart, ev.CurrentPeriodEnd = entitlement.TierGuildmaster, acctStart, end
		provApply(t, e, ev, true)
		want(entitlement.TierGuildmaster, entitlement.ReasonActiveSubscription, "sub_1")

		ev.EventID, ev.Created, ev.Status = "evt_2", acctStart.Add(time.Hour), entitlement.ProviderCanceled
		provApply(t, e, ev, true)
		want(entitlement.TierGuildmaster, entitlement.ReasonGracePeriod, "sub_1")
		e.clock.Set(end.Add(-time.Second))
		want(entitlement.TierGuildmaster, entitlement.ReasonGracePeriod, "sub_1")
		e.clock.Set(end)
		want(entitlement.TierSage, entitlement.ReasonFounderPass, "FOUNDING_MEMBER")

		// A subscription of the pass's tier: the pass, which does not end, is reported.
		ev = provEvent("evt_3", 2*time.Hour, entitlement.ProviderActive)
		ev.SubscriptionID, ev.Tier = "sub_2", entitlement.TierSage
		ev.CurrentPeriodStart, ev.CurrentPeriodEnd = end, end.Add(30*24*time.Hour)
		provApply(t, e, ev, true)
		want(entitlement.TierSage, entitlement.ReasonFounderPass, "FOUNDING_MEMBER")
	})
}

// TestAccessResolveBadItems: items that cannot be decoded are reported,
// and the rest of the partition still resolves.
func TestAccessResolveBadItems(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{})
	ctx := t.Context()
	ev := provEvent("evt_1", 0, entitlement.ProviderActive)
	ev.CurrentPeriodEnd = acctStart.Add(time.Hour)
	provApply(t, e, ev, true)
	e.putRaw(t, map[string]types.AttributeValue{"PK": acctS("USER#u1"), "SK": acctS("SUBSCRIPTION#sub_9"), "status": acctS("paused"), "planTier": acctS("GUILDMASTER")})
	e.putRaw(t, map[string]types.AttributeValue{"PK": acctS("USER#u1"), "SK": acctS("PROFILE#u1"), "tier": acctS("PLATINUM"), "email": acctS("a@b.c")})
	e.putRaw(t, map[string]types.AttributeValue{"PK": acctS("USER#u1"), "SK": acctS("SUB#x#SKU#1"), "status": acctS("whatever")}) // another layout's item
	got, err := e.accounts.ResolveAccess(ctx, "u1")
	require.Equal(t, entitlement.TierJourneyman, got.Tier, "access %+v", got)
	require.Equal(t, entitlement.ReasonActiveSubscription, got.Reason, "access %+v", got)
	require.ErrorIs(t, err, entitlement.ErrInvalidProviderStatus)
	require.ErrorIs(t, err, entitlement.ErrInvalidTier)
	require.ErrorContains(t, err, "SUBSCRIPTION#sub_9")
	require.ErrorContains(t, err, "PROFILE#u1")
	require.NotContains(t, err.Error(), "SUB#x", "error: %v", err)
	// SetProfileTier keeps the host's attributes.
	require.NoError(t, e.accounts.SetProfileTier(ctx, "u1", entitlement.TierSage))
	p := e.raw(t, "USER#u1", "PROFILE#u1")
	require.Equal(t, "a@b.c", acctText(p["email"]), "profile %v", p)
	require.Equal(t, "SAGE", acctText(p["tier"]), "profile %v", p)
}

func TestAccessTierParseAndOrder(t *testing.T) {
	for in, want := range map[string]entitlement.Tier{"free": "FREE", "FREE": "FREE", " Sage ": "SAGE", "guildmaster": "GUILDMASTER",
		"Initiate": "INITIATE", "journeyman\n": "JOURNEYMAN"} {
		got, err := entitlement.ParseTier(in)
		if assert.NoError(t, err, "ParseTier(%q)", in) {
			assert.Equal(t, want, got, "ParseTier(%q)", in)
		}
	}
	for _, in := range []string{"", "PLATINUM", "free tier", "SAGE2"} {
		var fe *billing.FieldError
		_, err := entitlement.ParseTier(in)
		if assert.ErrorIs(t, err, entitlement.ErrInvalidTier, "ParseTier(%q)", in) && assert.ErrorAs(t, err, &fe, "ParseTier(%q)", in) {
			assert.Equal(t, in, fe.Value, "ParseTier(%q): %v", in, err)
		}
	}
	tiers := entitlement.Tiers()
	for i := range tiers {
		assert.Equal(t, i, tiers[i].Rank(), "%s rank", tiers[i])
	}
	assert.False(t, entitlement.Tier("sage").Valid(), "non-canonical tier valid")
	assert.Equal(t, -1, entitlement.Tier("sage").Rank(), "non-canonical tier valid")
	assert.Equal(t, "free", layout.ProfileTierValue(entitlement.TierFree), "profile values")
	assert.Equal(t, "SAGE", layout.ProfileTierValue(entitlement.TierSage), "profile values")
	for in, want := range map[string]entitlement.PassType{"FOUNDING_MEMBER": entitlement.PassFoundingMember, "guild_builder": entitlement.PassGuildBuilder} {
		got, err := entitlement.ParsePassType(in)
		if assert.NoError(t, err, "ParsePassType(%q)", in) {
			assert.Equal(t, want, got, "ParsePassType(%q)", in)
		}
	}
	assert.Equal(t, entitlement.TierSage, entitlement.PassFoundingMember.Tier(), "pass tiers")
	assert.Equal(t, entitlement.TierGuildmaster, entitlement.PassGuildBuilder.Tier(), "pass tiers")
}

func FuzzAccessTier(f *testing.F) {
	for _, t := range entitlement.Tiers() {
		f.Add(string(t))
	}
	f.Add("free")
	f.Add(" sage\t")
	f.Add("ſage") // U+017F upper-cases to 'S' under Unicode rules; only ASCII case folds
	f.Fuzz(func(t *testing.T, v string) {
		tier, err := entitlement.ParseTier(v)
		if err != nil {
			require.ErrorIs(t, err, entitlement.ErrInvalidTier)
			return
		}
		require.True(t, tier.Valid(), "%q parsed as %q", v, tier)
		require.Equal(t, strings.ToUpper(strings.TrimSpace(v)), string(tier), "%q parsed as %q", v, tier)
		require.NotContains(t, v, "ſ", "%q parsed as %q", v, tier)
		again, err := entitlement.ParseTier(layout.ProfileTierValue(tier))
		require.NoError(t, err, "profile round trip of %q", tier)
		require.Equal(t, tier, again, "profile round trip of %q", tier)
	})
}

// TestAccessMemoryRevokedPass covers the twin's revocation helper.
func TestAccessMemoryRevokedPass(t *testing.T) {
	a, err := billingtest.NewAccounts(billingtest.AccountsOptions{Clock: billingtest.NewClock(acctStart)})
	require.NoError(t, err)
	_, err = a.GrantFounderPass(t.Context(), "u1", entitlement.PassGuildBuilder, "pi_1", time.Time{})
	require.NoError(t, err)
	require.True(t, a.RevokeFounderPass("u1", entitlement.PassGuildBuilder), "revoke")
	require.False(t, a.RevokeFounderPass("u1", entitlement.PassFoundingMember), "revoke")
	got, _ := a.ResolveAccess(t.Context(), "u1")
	require.Equal(t, entitlement.ReasonFree, got.Reason, "revoked pass still grants: %+v", got)
}

// TestAccessResolveReadsIndependentOfHistory: on a table the payments
// share, an account's partition also holds its history rows, periods,
// receipts and payment subscriptions, which grow with its age. Resolving
// access reads the same items, at the same cost, with a thousand of them
// as with none.
func TestAccessResolveReadsIndependentOfHistory(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{})
	ctx := t.Context()
	ev := provEvent("evt_1", 0, entitlement.ProviderActive)
	ev.CurrentPeriodEnd = acctStart.Add(30 * 24 * time.Hour)
	provApply(t, e, ev, true)
	_, err := e.accounts.GrantFounderPass(ctx, "u1", entitlement.PassGuildBuilder, "pi_1", time.Time{})
	require.NoError(t, err)
	require.NoError(t, e.accounts.SetProfileTier(ctx, "u1", entitlement.TierInitiate))
	_, err = e.accounts.MonthlyGrant(ctx, "u1", entitlement.TierSage, "2025-02", "evt_2")
	require.NoError(t, err)

	resolve := func() (entitlement.Access, int, float64) {
		t.Helper()
		e.db.Reset()
		got, err := e.accounts.ResolveAccess(ctx, "u1")
		require.NoError(t, err)
		return got, e.db.ItemsRead(), e.db.ReadCapacity()
	}
	young, youngItems, youngRCU := resolve()
	require.Equal(t, entitlement.Access{Tier: entitlement.TierGuildmaster, Reason: entitlement.ReasonFounderPass, Source: "GUILD_BUILDER"}, young)
	assert.Equal(t, 3, youngItems, "the pass, the subscription and the profile")

	// Years of payments in the same partition: history rows written by the
	// engine's store, and periods, receipts and payment subscriptions.
	repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: e.db, Table: e.table})
	require.NoError(t, err)
	pad := acctS(strings.Repeat("x", 2000))
	t0 := time.Date(2020, 1, 1, 10, 0, 0, 0, time.UTC)
	var rows []billing.Period
	for i := range 250 {
		at := t0.AddDate(0, 0, i)
		rows = append(rows, billing.Period{
			UserID: "u1#s1#PLUS", SubscriptionID: "per-" + strconv.Itoa(i), BillingDate: at, Amount: billing.Cents(499),
			Status: billing.StatusCompleted, BillingPeriod: at.Format("01/2006"), TransactionID: "tx-" + strconv.Itoa(i),
			Process: billing.ProcessInitial, Term: billing.TermMonthly, ReceiptTierName: "Plus:v2",
			CreatedDate: at, LastRunDate: at.Add(time.Hour), PaymentError: strings.Repeat("e", 1000),
		})
	}
	require.NoError(t, repo.History().AddAll(ctx, rows))
	for i := range 250 {
		n := strconv.Itoa(100000 + i)
		for _, sk := range []string{"PER#s1#SKU#PLUS#" + n, "REC#" + n + "#SKU#PLUS", "SUB#s" + n + "#SKU#PLUS"} {
			e.putRaw(t, map[string]types.AttributeValue{"PK": acctS("USER#u1"), "SK": acctS(sk), "pad": pad})
		}
	}

	old, oldItems, oldRCU := resolve()
	assert.Equal(t, young, old, "the same access")
	assert.Equal(t, youngItems, oldItems, "items read")
	assert.InDelta(t, youngRCU, oldRCU, 1e-9, "read capacity")
}
