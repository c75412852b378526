package billingtest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/entitlement"
	"github.com/stretchr/testify/require"
)

// The behaviour of Accounts is tested in package dynamostore against both
// implementations (forEachAccounts); these tests cover what is specific
// to the twin.

func TestAccountsOptions(t *testing.T) {
	_, err := billingtest.NewAccounts(billingtest.AccountsOptions{CreditExpiry: -time.Second})
	require.Error(t, err, "negative expiry accepted")
	_, err = billingtest.NewAccounts(billingtest.AccountsOptions{Quotas: entitlement.CreditQuotas{"GOLD": 1}})
	require.ErrorIs(t, err, entitlement.ErrInvalidTier, "bad quota tier")
	a, err := billingtest.NewAccounts(billingtest.AccountsOptions{})
	require.NoError(t, err)
	c, err := a.Grant(t.Context(), "u1", 1, "req-1")
	require.NoError(t, err)
	require.False(t, c.CreatedAt.IsZero(), "system clock, whole seconds: %+v", c)
	require.Zero(t, c.CreatedAt.Nanosecond(), "system clock, whole seconds: %+v", c)
}

// TestAccountsConcurrentMixedUse runs every operation at once under -race.
func TestAccountsConcurrentMixedUse(t *testing.T) {
	clock := billingtest.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	a, _ := billingtest.NewAccounts(billingtest.AccountsOptions{Clock: clock, CreditExpiry: time.Hour})
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, _ = a.Grant(ctx, "u1", 2, fmt.Sprint("grant-", i))
			_, _ = a.Consume(ctx, "u1", 1, fmt.Sprint("consume-", i))
			_, _ = a.MonthlyGrant(ctx, "u1", entitlement.TierSage, "2025-01", "evt")
			_, _ = a.ApplyProviderEvent(ctx, entitlement.ProviderEvent{EventID: "evt", Created: clock.Now().Add(time.Duration(i)),
				UserID: "u1", SubscriptionID: "sub_1", Customer: "cus_1", Tier: entitlement.TierSage, Status: entitlement.ProviderActive})
			_, _ = a.GrantFounderPass(ctx, "u1", entitlement.PassFoundingMember, "pi", time.Time{})
			_ = a.SetProfileTier(ctx, "u1", entitlement.TierInitiate)
			_, _ = a.ResolveAccess(ctx, "u1")
			clock.Advance(time.Second)
		})
	}
	wg.Wait()
	c, err := a.Balance(ctx, "u1")
	require.NoError(t, err)
	require.Equal(t, int64(20+15), c.Balance, "balance %+v", c)
	s, err := a.GetProviderSubscription(ctx, "u1", "sub_1")
	require.NoError(t, err)
	require.False(t, s.LastEventAt.Before(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)), "subscription %+v", s)
}
