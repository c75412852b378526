package dynamostore_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/entitlement"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProviderEventsSameInstant: a processor stamps events in whole
// seconds, so a deletion and an update of one second must not be ordered
// by their random event IDs. Whatever the delivery order, the deletion
// (canceled) is final over the update, a cancel-at-period-end update over
// a plain one, and an update over the incomplete creation; a duplicate
// and an older event change nothing. The event IDs are chosen so that the
// ID order alone picks the wrong event.
func TestProviderEventsSameInstant(t *testing.T) {
	periodEnd := acctStart.Add(30 * 24 * time.Hour)
	at := 5 * time.Second
	event := func(id string, st entitlement.ProviderStatus, mut ...func(*entitlement.ProviderEvent)) entitlement.ProviderEvent {
		ev := provEvent(id, at, st)
		ev.Tier, ev.CurrentPeriodStart, ev.CurrentPeriodEnd = entitlement.TierSage, acctStart, periodEnd
		for _, m := range mut {
			m(&ev)
		}
		return ev
	}
	cancelling := func(ev *entitlement.ProviderEvent) { ev.CancelAtPeriodEnd = true }
	for _, c := range []struct {
		name        string
		loser, wins entitlement.ProviderEvent
		check       func(t *testing.T, e *acctEnv, got entitlement.ProviderSubscription)
	}{
		{"deletion over update", event("evt_9zz", entitlement.ProviderActive), event("evt_1aa", entitlement.ProviderCanceled),
			func(t *testing.T, e *acctEnv, got entitlement.ProviderSubscription) {
				assert.Equal(t, entitlement.ProviderCanceled, got.Status)
				access, err := e.accounts.ResolveAccess(t.Context(), "u1")
				require.NoError(t, err)
				// Cancelled inside its paid period: grace, not an active
				// subscription, and it ends with the period.
				assert.Equal(t, entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonGracePeriod, Source: "sub_1", Until: periodEnd}, access)
				e.clock.Set(periodEnd)
				access, err = e.accounts.ResolveAccess(t.Context(), "u1")
				require.NoError(t, err)
				assert.Equal(t, entitlement.Access{Tier: entitlement.TierFree, Reason: entitlement.ReasonFree}, access)
			}},
		{"deletion ending the period over update", event("evt_9zz", entitlement.ProviderActive),
			event("evt_1aa", entitlement.ProviderCanceled, func(ev *entitlement.ProviderEvent) { ev.CurrentPeriodEnd = ev.Created }),
			func(t *testing.T, e *acctEnv, got entitlement.ProviderSubscription) {
				assert.Equal(t, entitlement.ProviderCanceled, got.Status)
				access, err := e.accounts.ResolveAccess(t.Context(), "u1")
				require.NoError(t, err)
				assert.Equal(t, entitlement.Access{Tier: entitlement.TierFree, Reason: entitlement.ReasonFree}, access)
			}},
		{"deletion over cancel at period end", event("evt_9zz", entitlement.ProviderActive, cancelling), event("evt_1aa", entitlement.ProviderCanceled),
			func(t *testing.T, _ *acctEnv, got entitlement.ProviderSubscription) {
				assert.Equal(t, entitlement.ProviderCanceled, got.Status)
			}},
		{"expired over creation", event("evt_9zz", entitlement.ProviderIncomplete), event("evt_1aa", entitlement.ProviderIncompleteExpired),
			func(t *testing.T, _ *acctEnv, got entitlement.ProviderSubscription) {
				assert.Equal(t, entitlement.ProviderIncompleteExpired, got.Status)
			}},
		{"cancel at period end over update", event("evt_9zz", entitlement.ProviderActive), event("evt_1aa", entitlement.ProviderActive, cancelling),
			func(t *testing.T, e *acctEnv, got entitlement.ProviderSubscription) {
				assert.Equal(t, entitlement.ProviderActive, got.Status)
				assert.True(t, got.CancelAtPeriodEnd)
				access, err := e.accounts.ResolveAccess(t.Context(), "u1")
				require.NoError(t, err)
				assert.Equal(t, entitlement.ReasonActiveSubscription, access.Reason)
			}},
		{"update over creation", event("evt_9zz", entitlement.ProviderIncomplete), event("evt_1aa", entitlement.ProviderActive),
			func(t *testing.T, e *acctEnv, got entitlement.ProviderSubscription) {
				assert.Equal(t, entitlement.ProviderActive, got.Status)
				access, err := e.accounts.ResolveAccess(t.Context(), "u1")
				require.NoError(t, err)
				assert.Equal(t, entitlement.Access{Tier: entitlement.TierSage, Reason: entitlement.ReasonActiveSubscription, Source: "sub_1", Until: periodEnd}, access)
			}},
	} {
		for _, order := range []string{"winner last", "winner first"} {
			t.Run(c.name+", "+order, func(t *testing.T) {
				forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
					ctx := t.Context()
					apply := func(ev entitlement.ProviderEvent, want bool) {
						t.Helper()
						applied, err := e.accounts.ApplyProviderEvent(ctx, ev)
						require.NoError(t, err)
						require.Equal(t, want, applied, "apply %s (%s, cancel at period end %v)", ev.EventID, ev.Status, ev.CancelAtPeriodEnd)
					}
					if order == "winner last" {
						apply(c.loser, true)
						apply(c.wins, true)
					} else {
						apply(c.wins, true)
						apply(c.loser, false)
					}
					got := provGet(t, e, "sub_1")
					assert.Equal(t, c.wins.EventID, got.LastEventID)
					assert.True(t, got.LastEventAt.Equal(c.wins.Created))

					// A duplicate of either event, and an older event
					// with a greater ID, change nothing.
					e.clock.Advance(time.Minute)
					apply(c.wins, false)
					apply(c.loser, false)
					older := event("evt_zzz", entitlement.ProviderActive)
					older.Created = older.Created.Add(-time.Second)
					apply(older, false)
					require.Equal(t, got, provGet(t, e, "sub_1"))
					c.check(t, e, got)
				})
			})
		}
	}
}

// TestProviderEventSameInstantOnStoredItem: an item written before the
// rank existed (or by the host, without cancelAtPeriodEnd) is ranked by
// its stored status: a deletion of the same instant applies over it, a
// plain update with a smaller event ID does not.
func TestProviderEventSameInstantOnStoredItem(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{})
	e.putRaw(t, map[string]types.AttributeValue{
		"PK": acctS("USER#u1"), "SK": acctS("SUBSCRIPTION#sub_1"), "type": acctS("Subscription"), "subscriptionId": acctS("sub_1"),
		"planTier": acctS("SAGE"), "status": acctS("active"), "stripeCustomerId": acctS("cus_1"),
		"lastEventId": acctS("evt_5"), "lastEventAt": acctS("2025-01-15T10:30:05.000000000Z"),
	})
	update := provEvent("evt_1", 5*time.Second, entitlement.ProviderPastDue)
	applied, err := e.accounts.ApplyProviderEvent(t.Context(), update)
	require.NoError(t, err)
	assert.False(t, applied, "a plain update of the same instant with a smaller ID")
	deletion := provEvent("evt_2", 5*time.Second, entitlement.ProviderCanceled)
	applied, err = e.accounts.ApplyProviderEvent(t.Context(), deletion)
	require.NoError(t, err)
	assert.True(t, applied, "a deletion of the same instant")
	got := provGet(t, e, "sub_1")
	assert.Equal(t, entitlement.ProviderCanceled, got.Status)
	assert.Equal(t, "evt_2", got.LastEventID)
}
