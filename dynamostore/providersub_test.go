package dynamostore_test

import (
	"github.com/dynabill/billing/internal/sdkav"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// provEvent is an event of subscription sub_1 of user u1, created at
// acctStart + offset.
func provEvent(id string, offset time.Duration, status entitlement.ProviderStatus) entitlement.ProviderEvent {
	return entitlement.ProviderEvent{
		EventID: id, Created: acctStart.Add(offset), UserID: "u1", SubscriptionID: "sub_1", Customer: "cus_1",
		Tier: entitlement.TierJourneyman, Status: status,
		CurrentPeriodStart: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		CurrentPeriodEnd:   time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC),
	}
}

func provApply(t *testing.T, e *acctEnv, ev entitlement.ProviderEvent, want bool) {
	t.Helper()
	applied, err := e.accounts.ApplyProviderEvent(t.Context(), ev)
	require.NoError(t, err, "apply %s", ev.EventID)
	require.Equal(t, want, applied, "apply %s: applied", ev.EventID)
}

func provGet(t *testing.T, e *acctEnv, id string) entitlement.ProviderSubscription {
	t.Helper()
	sub, err := e.accounts.GetProviderSubscription(t.Context(), "u1", id)
	require.NoError(t, err)
	return sub
}

func TestProviderEventsInOrder(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		_, err := e.accounts.GetProviderSubscription(t.Context(), "u1", "sub_1")
		require.ErrorIs(t, err, billing.ErrNotFound, "before any event")
		created := provEvent("evt_1", 0, entitlement.ProviderIncomplete)
		provApply(t, e, created, true)
		e.clock.Advance(time.Minute)
		active := provEvent("evt_2", time.Minute, entitlement.ProviderActive)
		active.Tier = "sage"
		provApply(t, e, active, true)
		e.clock.Advance(time.Hour)
		cancelling := provEvent("evt_3", time.Hour, entitlement.ProviderActive)
		cancelling.Tier, cancelling.CancelAtPeriodEnd = entitlement.TierSage, true
		provApply(t, e, cancelling, true)

		got := provGet(t, e, "sub_1")
		want := entitlement.ProviderSubscription{
			UserID: "u1", SubscriptionID: "sub_1", CustomerID: "cus_1", Tier: entitlement.TierSage, Status: entitlement.ProviderActive,
			CurrentPeriodStart: cancelling.CurrentPeriodStart, CurrentPeriodEnd: cancelling.CurrentPeriodEnd, CancelAtPeriodEnd: true,
			LastEventID: "evt_3", LastEventAt: cancelling.Created,
			CreatedAt: acctStart, UpdatedAt: acctStart.Add(time.Minute + time.Hour),
		}
		require.Equal(t, want, got, "record\n got %+v\nwant %+v", got, want)
		// A second subscription; the list is ordered by subscription ID.
		other := provEvent("evt_4", 2*time.Hour, entitlement.ProviderCanceled)
		other.SubscriptionID = "sub_0"
		other.CurrentPeriodStart, other.CurrentPeriodEnd = time.Time{}, time.Time{}
		provApply(t, e, other, true)
		list, err := e.accounts.ListProviderSubscriptions(t.Context(), "u1")
		require.NoError(t, err, "list")
		require.Len(t, list, 2, "list: %+v", list)
		require.Equal(t, "sub_0", list[0].SubscriptionID, "list: %+v", list)
		require.Equal(t, want, list[1], "list")
		require.True(t, list[0].CurrentPeriodEnd.IsZero(), "period end of an event without one: %v", list[0].CurrentPeriodEnd)
		other2, err := e.accounts.ListProviderSubscriptions(t.Context(), "u2")
		require.NoError(t, err, "other user")
		require.Empty(t, other2, "other user")
		if e.db == nil {
			return
		}
		item := e.raw(t, "USER#u1", "SUBSCRIPTION#sub_1")
		wire := map[string]string{
			"type": "Subscription", "subscriptionId": "sub_1", "planTier": "SAGE", "status": "active",
			"stripeCustomerId": "cus_1", "currentPeriodStart": "2025-01-01T00:00:00Z", "currentPeriodEnd": "2025-02-01T00:00:00Z",
			"cancelAtPeriodEnd": "true", "createdAt": "2025-01-15T10:30:00Z", "updatedAt": "2025-01-15T11:31:00Z",
			"lastEventId": "evt_3", "lastEventAt": "2025-01-15T11:30:00.000000000Z",
		}
		for k, v := range wire {
			assert.Equal(t, v, acctText(item[k]), "attribute %s = %v", k, item[k])
		}
	})
}

func TestProviderEventOutOfOrder(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		canceled := provEvent("evt_2", 2*time.Second, entitlement.ProviderCanceled)
		provApply(t, e, canceled, true)
		// The older "active" event arrives late: it must not resurrect the
		// subscription.
		provApply(t, e, provEvent("evt_1", time.Second, entitlement.ProviderActive), false)
		got := provGet(t, e, "sub_1")
		require.Equal(t, entitlement.ProviderCanceled, got.Status, "after a stale event: %+v", got)
		require.Equal(t, "evt_2", got.LastEventID, "after a stale event: %+v", got)
		// Sub-second order counts.
		provApply(t, e, provEvent("evt_0", 2*time.Second-time.Nanosecond, entitlement.ProviderActive), false)
		provApply(t, e, provEvent("evt_0", 2*time.Second+time.Nanosecond, entitlement.ProviderPastDue), true)
		got = provGet(t, e, "sub_1")
		require.Equal(t, entitlement.ProviderPastDue, got.Status, "newer by a nanosecond: %+v", got)
	})
}

func TestProviderEventReplay(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ev := provEvent("evt_5", 0, entitlement.ProviderActive)
		provApply(t, e, ev, true)
		first := provGet(t, e, "sub_1")
		e.clock.Advance(time.Hour)
		provApply(t, e, ev, false)
		require.Equal(t, first, provGet(t, e, "sub_1"), "a replay changed the record")
		// Ties on Created and rank are broken by event ID.
		tie := provEvent("evt_4", 0, entitlement.ProviderPastDue)
		provApply(t, e, tie, false)
		tie.EventID = "evt_6"
		provApply(t, e, tie, true)
		got := provGet(t, e, "sub_1")
		require.Equal(t, entitlement.ProviderPastDue, got.Status, "after the tie: %+v", got)
		require.Equal(t, "evt_6", got.LastEventID, "after the tie: %+v", got)
	})
}

func TestProviderEventValidation(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		for _, c := range []struct {
			name  string
			edit  func(*entitlement.ProviderEvent)
			field string
			err   error
		}{
			{"unknown status", func(ev *entitlement.ProviderEvent) { ev.Status = "paused" }, "status", entitlement.ErrInvalidProviderStatus},
			{"status case", func(ev *entitlement.ProviderEvent) { ev.Status = "Active" }, "status", entitlement.ErrInvalidProviderStatus},
			{"no status", func(ev *entitlement.ProviderEvent) { ev.Status = "" }, "status", entitlement.ErrInvalidProviderStatus},
			{"unknown tier", func(ev *entitlement.ProviderEvent) { ev.Tier = "PLATINUM" }, "tier", entitlement.ErrInvalidTier},
			{"free tier", func(ev *entitlement.ProviderEvent) { ev.Tier = "free" }, "tier", entitlement.ErrInvalidTier},
			{"no event ID", func(ev *entitlement.ProviderEvent) { ev.EventID = "" }, "EventID", entitlement.ErrInvalidProviderEvent},
			{"no customer", func(ev *entitlement.ProviderEvent) { ev.Customer = "" }, "Customer", entitlement.ErrInvalidProviderEvent},
			{"long subscription", func(ev *entitlement.ProviderEvent) { ev.SubscriptionID = strings.Repeat("s", 256) }, "SubscriptionID", entitlement.ErrInvalidProviderEvent},
			{"no user", func(ev *entitlement.ProviderEvent) { ev.UserID = "" }, "UserID", entitlement.ErrInvalidAccount},
			{"no time", func(ev *entitlement.ProviderEvent) { ev.Created = time.Time{} }, "Created", entitlement.ErrInvalidProviderEvent},
			{"year 10000", func(ev *entitlement.ProviderEvent) {
				ev.CurrentPeriodEnd = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			}, "CurrentPeriodEnd", billing.ErrInvalidDate},
			{"end before start", func(ev *entitlement.ProviderEvent) { ev.CurrentPeriodEnd = ev.CurrentPeriodStart.Add(-time.Second) }, "CurrentPeriodEnd", entitlement.ErrInvalidProviderEvent},
		} {
			ev := provEvent("evt_1", 0, entitlement.ProviderActive)
			c.edit(&ev)
			applied, err := e.accounts.ApplyProviderEvent(t.Context(), ev)
			var fe *billing.FieldError
			assert.False(t, applied, "%s: applied", c.name)
			if assert.ErrorIs(t, err, c.err, c.name) && assert.ErrorAs(t, err, &fe, c.name) {
				assert.Equal(t, c.field, fe.Field, "%s: %v", c.name, err)
			}
		}
		_, err := e.accounts.ApplyProviderEvent(t.Context(), entitlement.ProviderEvent{Status: "paused", UserID: "u1", EventID: "e",
			SubscriptionID: "s", Customer: "c", Tier: "SAGE", Created: acctStart})
		assert.ErrorContains(t, err, `"paused"`, "the error does not name the status")
		list, err := e.accounts.ListProviderSubscriptions(t.Context(), "u1")
		require.NoError(t, err, "invalid events wrote")
		require.Empty(t, list, "invalid events wrote")
	})
}

// TestProviderSubscriptionExistingItem starts from an item as an existing
// deployment wrote it, without the library's event
// attributes: any event overwrites it, keeping provider and createdAt.
func TestProviderSubscriptionExistingItem(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{})
	e.putRaw(t, map[string]types.AttributeValue{
		"PK": acctS("USER#u1"), "SK": acctS("SUBSCRIPTION#sub_1"), "type": acctS("Subscription"), "subscriptionId": acctS("sub_1"),
		"planTier": acctS("JOURNEYMAN"), "status": acctS("active"), "stripeCustomerId": acctS("cus_1"),
		"currentPeriodStart": acctS("2025-01-01T00:00:00Z"), "currentPeriodEnd": acctS("2025-02-01T00:00:00Z"),
		"cancelAtPeriodEnd": &types.AttributeValueMemberBOOL{Value: false}, "provider": acctS("cognito"),
		"createdAt": acctS("2025-01-01T00:00:00Z"), "updatedAt": acctS("2025-01-15T10:30:00Z"),
	})
	got := provGet(t, e, "sub_1")
	require.Equal(t, entitlement.ProviderActive, got.Status, "decoded: %+v", got)
	require.Equal(t, "cognito", got.AuthProvider, "decoded: %+v", got)
	require.True(t, got.LastEventAt.IsZero(), "decoded: %+v", got)
	provApply(t, e, provEvent("evt_1", -24*time.Hour*365, entitlement.ProviderCanceled), true)
	got = provGet(t, e, "sub_1")
	require.Equal(t, entitlement.ProviderCanceled, got.Status, "after the event: %+v", got)
	require.Equal(t, "cognito", got.AuthProvider, "after the event: %+v", got)
	require.True(t, got.CreatedAt.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)), "after the event: %+v", got)
	require.Equal(t, "evt_1", got.LastEventID, "after the event: %+v", got)

	// A stored status the library does not know is an error naming it.
	e.putRaw(t, map[string]types.AttributeValue{
		"PK": acctS("USER#u1"), "SK": acctS("SUBSCRIPTION#sub_2"), "planTier": acctS("SAGE"), "status": acctS("paused"),
	})
	_, err := e.accounts.GetProviderSubscription(t.Context(), "u1", "sub_2")
	var fe *billing.FieldError
	require.ErrorIs(t, err, entitlement.ErrInvalidProviderStatus, "unknown stored status")
	require.ErrorAs(t, err, &fe, "unknown stored status")
	require.Equal(t, "status", fe.Field, "unknown stored status: %v", err)
	require.Equal(t, "paused", fe.Value, "unknown stored status: %v", err)
	require.Equal(t, "PK=USER#u1 SK=SUBSCRIPTION#sub_2", fe.Key, "unknown stored status: %v", err)
	_, err = e.accounts.ListProviderSubscriptions(t.Context(), "u1")
	require.ErrorIs(t, err, entitlement.ErrInvalidProviderStatus, "list with a bad item")
}

func TestFounderPassIdempotent(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		bought := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		grant := func(p entitlement.PassType, intent string, want bool) {
			t.Helper()
			got, err := e.accounts.GrantFounderPass(ctx, "u1", p, intent, bought)
			require.NoError(t, err, "grant %s %s", p, intent)
			require.Equal(t, want, got, "grant %s %s", p, intent)
		}
		grant(entitlement.PassFoundingMember, "pi_1", true)
		grant(entitlement.PassFoundingMember, "pi_1", false)
		grant("founding_member", "pi_other", false)
		grant(entitlement.PassGuildBuilder, "pi_2", true)
		passes, err := e.accounts.FounderPasses(ctx, "u1")
		want := []entitlement.FounderPass{
			{UserID: "u1", PassType: entitlement.PassFoundingMember, PaymentIntentID: "pi_1", PurchasedAt: bought, LifetimeAccess: true,
				GrantedTier: entitlement.TierSage, CreatedAt: acctStart, UpdatedAt: acctStart},
			{UserID: "u1", PassType: entitlement.PassGuildBuilder, PaymentIntentID: "pi_2", PurchasedAt: bought, LifetimeAccess: true,
				GrantedTier: entitlement.TierGuildmaster, CreatedAt: acctStart, UpdatedAt: acctStart},
		}
		require.NoError(t, err, "passes")
		require.Equal(t, want, passes, "passes")
		_, err = e.accounts.GrantFounderPass(ctx, "u1", "EARLY_BIRD", "pi_3", bought)
		assert.ErrorIs(t, err, entitlement.ErrInvalidPassType, "unknown pass")
		_, err = e.accounts.GrantFounderPass(ctx, "u2", entitlement.PassGuildBuilder, "", bought)
		assert.Error(t, err, "pass without a payment intent accepted")
		u2passes, _ := e.accounts.FounderPasses(ctx, "u2")
		assert.Empty(t, u2passes, "u2 passes")
		if e.db != nil {
			item := e.raw(t, "USER#u1", "FOUNDER#GUILD_BUILDER")
			wire := map[string]string{"type": "FounderPass", "passType": "GUILD_BUILDER", "stripePaymentIntentId": "pi_2",
				"purchasedAt": "2025-01-01T00:00:00Z", "lifetimeAccess": "true", "grantedTier": "GUILDMASTER",
				"createdAt": "2025-01-15T10:30:00Z", "updatedAt": "2025-01-15T10:30:00Z"}
			for k, v := range wire {
				assert.Equal(t, v, acctText(item[k]), "attribute %s = %v", k, item[k])
			}
		}
	})
}

func FuzzProviderStatus(f *testing.F) {
	for _, st := range entitlement.ProviderStatuses() {
		f.Add(string(st))
	}
	f.Add("ACTIVE")
	f.Add("paused")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		st, err := entitlement.ParseProviderStatus(v)
		if err != nil {
			require.ErrorIs(t, err, entitlement.ErrInvalidProviderStatus, "%q", v)
			require.Empty(t, st, "%q: %v", v, err)
			return
		}
		require.Equal(t, v, string(st), "%q parsed as %q", v, st)
		require.True(t, st.Valid(), "%q parsed as %q", v, st)
	})
}

func FuzzProviderEventNormalize(f *testing.F) {
	f.Add("evt_1", "u1", "sub_1", "cus_1", "sage", "active", int64(1735689600), int64(0), int64(100))
	f.Add("", "", "", "", "", "", int64(0), int64(-1), int64(-1))
	f.Fuzz(func(t *testing.T, id, user, sub, cus, tier, status string, created, start, length int64) {
		ev := entitlement.ProviderEvent{EventID: id, UserID: user, SubscriptionID: sub, Customer: cus, Tier: entitlement.Tier(tier),
			Status: entitlement.ProviderStatus(status), Created: time.Unix(created, 0)}
		if start >= 0 {
			ev.CurrentPeriodStart = time.Unix(start, 0)
			ev.CurrentPeriodEnd = ev.CurrentPeriodStart.Add(time.Duration(length) * time.Second)
		}
		got, err := ev.Normalize()
		if err != nil {
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe, "not a FieldError")
			return
		}
		require.True(t, got.Status.Valid(), "normalized %+v", got)
		require.True(t, got.Tier.Valid(), "normalized %+v", got)
		require.NotEqual(t, entitlement.TierFree, got.Tier, "normalized %+v", got)
		require.Same(t, time.UTC, got.Created.Location(), "normalized %+v", got)
		again, err := got.Normalize()
		require.NoError(t, err, "not idempotent")
		require.Equal(t, got, again, "not idempotent")
	})
}

func FuzzProviderSubscriptionItem(f *testing.F) {
	f.Add("USER#u1", "SUBSCRIPTION#sub_1", "active", "SAGE", "2025-01-01T00:00:00Z", "2025-02-01T00:00:00.5+01:00")
	f.Add("ACC#1", "FOUNDER#X", "paused", "gold", "yesterday", "")
	f.Fuzz(func(t *testing.T, pk, sk, status, tier, start, end string) {
		item := map[string]types.AttributeValue{"PK": acctS(pk), "SK": acctS(sk), "status": acctS(status), "planTier": acctS(tier),
			"currentPeriodStart": acctS(start), "currentPeriodEnd": acctS(end)}
		sub, err := layout.SingleTableConfig{}.DecodeProviderSubscription(sdkav.FromSDK(item))
		if err != nil {
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe, "not a FieldError with a key")
			require.NotEmpty(t, fe.Key, "not a FieldError with a key: %v", err)
			return
		}
		require.True(t, sub.Status.Valid(), "decoded %+v", sub)
		require.True(t, sub.Tier.Valid(), "decoded %+v", sub)
		require.NotEmpty(t, sub.UserID, "decoded %+v", sub)
		require.NotEmpty(t, sub.SubscriptionID, "decoded %+v", sub)
	})
}
