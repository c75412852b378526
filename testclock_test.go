package billing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTestClockThirteenMonths bills a monthly plan through a year and a
// month of simulated days, with one decline retried the next day: 13
// periods collected, 12 by the scheduled run and 1 by the retry run, each
// charged once, and the 14th period open.
func TestTestClockThirteenMonths(t *testing.T) {
	ctx := context.Background()
	clock := billingtest.NewTestClock(time.Date(2025, 1, 14, 12, 0, 0, 0, time.UTC))
	store := billingtest.NewMemoryStore(t, memory.Options{})
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	pay.SetUser("ann", billingtest.Succeeded(), billingtest.Succeeded(), billingtest.Declined("insufficient funds", true), billingtest.Succeeded())
	c, err := billing.NewCollector(billing.Config{Repository: store.Repository(), History: store.History(),
		Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock})
	require.NoError(t, err)
	clock.RunCollector(c)

	first := time.Date(2025, 1, 15, 0, 0, 0, 0, time.UTC)
	require.NoError(t, store.Repository().Add(ctx, &billing.Period{
		UserID: "ann", SubscriptionID: "sub-1", BillingDate: first, BillingPeriod: billing.BillingPeriod(first),
		Amount: billing.MustParseAmount("9.99"), Status: billing.StatusScheduled, Term: billing.TermMonthly,
		AnchorDay: 15, ReceiptTierName: "Plus:v2", CreatedDate: first.AddDate(0, -1, 0), LastRunDate: first.AddDate(0, -1, 0),
	}))

	require.NoError(t, clock.AdvanceMonths(ctx, 13))

	sched, retry := clock.Totals(billing.RunScheduled), clock.Totals(billing.RunRetry)
	assert.Equal(t, 12, sched.Collected)
	assert.Equal(t, 1, sched.Declined)
	assert.Equal(t, 1, retry.Collected, "the decline is retried once, the next day")
	assert.Equal(t, 1, retry.Attempted)
	days := int(clock.Now().Sub(time.Date(2025, 1, 14, 12, 0, 0, 0, time.UTC)).Hours() / 24)
	assert.Equal(t, days, sched.Runs, "one scheduled run a simulated day")
	billingtest.RequireNoDoubleCharge(t, pay)
	assert.Len(t, pay.Charges(), 13)

	recs, err := store.Repository().ListByUser(ctx, "ann")
	require.NoError(t, err)
	require.Len(t, recs, 14)
	for i, r := range recs[:13] {
		assert.Equal(t, billing.StatusCompleted, r.Status, "period %d", i+1)
		assert.Equal(t, first.AddDate(0, i, 0), r.BillingDate, "period %d", i+1)
	}
	assert.Equal(t, 2, recs[2].Attempt, "the declined period took two attempts")
	assert.Equal(t, billing.StatusScheduled, recs[13].Status)
	assert.Equal(t, time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC), recs[13].BillingDate)
	billingtest.RequireHistoryMatchesPrimary(t, store.Repository(), store.History(), "ann")
}

// TestTestClockRefusesACollectorOnWallTime: a collector built without
// Config.Clock reads wall time; a TestClock refuses to run it (it would
// mark a record billed in the test's 2024 STALE, or charge it, in the
// wall clock's present), and so does one built on another TestClock.
func TestTestClockRefusesACollectorOnWallTime(t *testing.T) {
	clock := billingtest.NewTestClock(time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC))
	store := billingtest.NewMemoryStore(t, memory.Options{})
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	for name, own := range map[string]billing.Clock{
		"wall time":      nil,
		"another clock":  billingtest.NewTestClock(clock.Now()),
		"a plain clock":  billingtest.NewClock(clock.Now()),
		"a func of time": billing.ClockFunc(clock.Now),
	} {
		c, err := billing.NewCollector(billing.Config{Repository: store.Repository(), History: store.History(),
			Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: own})
		require.NoError(t, err)
		assert.PanicsWithValue(t, "billingtest: TestClock.RunCollector: the collector reads another clock ("+
			fmt.Sprintf("%T", c.Clock())+"); build it with Config.Clock set to this TestClock", func() { clock.RunCollector(c) }, name)
	}
	c, err := billing.NewCollector(billing.Config{Repository: store.Repository(), History: store.History(),
		Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock})
	require.NoError(t, err)
	assert.Same(t, clock, c.Clock())
	assert.NotPanics(t, func() { clock.RunCollector(c) })
	assert.IsType(t, billing.SystemClock{}, mustCollector(t, billing.Config{Repository: store.Repository(), Provider: pay,
		Locker: billingtest.NewLocker(clock, time.Minute)}).Clock(), "the documented default")
}

func mustCollector(t *testing.T, cfg billing.Config) *billing.Collector {
	t.Helper()
	c, err := billing.NewCollector(cfg)
	require.NoError(t, err)
	return c
}
