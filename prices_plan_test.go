package billing_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPricePlanKey: a plan's key in a PriceListMap is the tier for its
// monthly plan, with the term for another, and with the interval when a
// period spans several terms.
func TestPricePlanKey(t *testing.T) {
	for _, c := range []struct {
		plan billing.PricePlan
		key  string
	}{
		{billing.PricePlan{Tier: "Plus:v2"}, "Plus:v2"},
		{billing.PricePlan{Tier: "Plus:v2", Term: billing.TermMonthly, Interval: 1}, "Plus:v2"},
		{billing.PricePlan{Tier: "Plus:v2", Term: billing.TermYearly, Interval: 1}, "Plus:v2/YEARLY"},
		{billing.PricePlan{Tier: "Plus:v2", Term: billing.TermMonthly, Interval: 3}, "Plus:v2/MONTHLY/3"},
		{billing.PricePlan{Tier: "Plus:v2", Term: billing.TermWeekly, Interval: 2}, "Plus:v2/WEEKLY/2"},
	} {
		assert.Equal(t, c.key, c.plan.String())
	}
}

// TestPriceListPricesThePlan: the price list prices a tier on the
// subscription's term and interval. A yearly or quarterly Subscribe takes
// that plan's price, not the monthly one; a plan not in the list is
// refused (a *FieldError wrapping ErrUnknownTier) even when the tier is
// sold on another term; a tier change prices the record's own plan, read
// under the lock, and so does a plan change by user.
func TestPriceListPricesThePlan(t *testing.T) {
	ctx := t.Context()
	clock := billingtest.NewClock(jan31)
	store := billingtest.NewMemoryStore(t, memory.Options{})
	c, err := billing.NewCollector(billing.Config{Repository: store.Repository(), History: store.History(), Clock: clock,
		Locker: billingtest.NewLocker(clock, time.Minute), Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}),
		Prices: billing.PriceListMap{
			"Plus:v2":           billing.MustParseAmount("9.99"),
			"Plus:v2/YEARLY":    billing.MustParseAmount("99.99"),
			"Plus:v2/MONTHLY/3": billing.MustParseAmount("27.99"),
			"Pro:v1":            billing.MustParseAmount("19.99"),
		}})
	require.NoError(t, err)
	sub := func(user string, term billing.Term, interval int) (billing.Subscribed, error) {
		return c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "k-" + user, UserID: user, Tier: "Plus:v2", Term: term, Interval: interval})
	}

	monthly, err := sub("m", "", 0)
	require.NoError(t, err)
	assert.Equal(t, billing.MustParseAmount("9.99"), monthly.Subscription.Amount)
	yearly, err := sub("y", billing.TermYearly, 0)
	require.NoError(t, err)
	assert.Equal(t, billing.MustParseAmount("99.99"), yearly.Subscription.Amount)
	quarterly, err := sub("q", billing.TermMonthly, 3)
	require.NoError(t, err)
	assert.Equal(t, billing.MustParseAmount("27.99"), quarterly.Subscription.Amount)

	_, err = sub("w", billing.TermWeekly, 0)
	var fe *billing.FieldError
	require.ErrorAs(t, err, &fe)
	assert.ErrorIs(t, err, billing.ErrUnknownTier)
	assert.Contains(t, err.Error(), "Plus:v2/WEEKLY")
	recs, err := store.Repository().ListByUser(ctx, "w")
	require.NoError(t, err)
	assert.Empty(t, recs)

	// Pro:v1 is sold monthly only: the yearly record's change is refused
	// after the read, and nothing is written; the monthly one's is priced.
	rows := len(historyOf(t, store.History(), "y"))
	_, err = c.Periods().ChangeTier(ctx, yearly.Subscription.SubscriptionID, "Pro:v1", billing.ListPrice, false)
	require.ErrorIs(t, err, billing.ErrUnknownTier)
	assert.Len(t, historyOf(t, store.History(), "y"), rows, "nothing written")
	ch, err := c.Periods().ChangeTier(ctx, monthly.Subscription.SubscriptionID, "Pro:v1", billing.ListPrice, false)
	require.NoError(t, err)
	assert.Equal(t, billing.MustParseAmount("19.99"), ch.After.Amount)

	// By user, on the quarterly subscription: Plus:v2 is priced as its own
	// plan, Plus:v2/MONTHLY/3, the price it pays already, so nothing
	// changes; Pro:v1, not sold quarterly, is refused.
	_, err = c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: billing.UserRequest{UserID: "q", RequestKey: "to-plus"}, Tier: "Plus:v2"})
	require.ErrorIs(t, err, billing.ErrNoChange)
	_, err = c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: billing.UserRequest{UserID: "q", RequestKey: "to-pro"}, Tier: "Pro:v1"})
	require.ErrorIs(t, err, billing.ErrUnknownTier)
}

func historyOf(t *testing.T, h billing.History, user string) []billing.Period {
	t.Helper()
	rows, err := h.ListByUser(t.Context(), user)
	require.NoError(t, err)
	return rows
}
