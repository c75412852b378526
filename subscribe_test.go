package billing_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/preview"
)

// subscribeStores are the layouts Subscribe is tested on: both, in memory
// and on the local DynamoDB server (the index modes do not matter here).
func subscribeStores() []runStore {
	var out []runStore
	for _, st := range runStores() {
		switch st.name {
		case "memory-legacy-index", "memory-single-walk", "dynamodb-legacy-index", "dynamodb-single-walk":
			out = append(out, st)
		}
	}
	return out
}

func newSubscribeCollector(t *testing.T, st runStore, mut ...func(*billing.Config)) (*billing.Collector, billing.Repository, *billingtest.Clock, *billingtest.Provider) {
	t.Helper()
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	repo := st.open(t, clock)
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	cfg := billing.Config{Repository: repo, Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock}
	for _, m := range mut {
		m(&cfg)
	}
	c, err := billing.NewCollector(cfg)
	require.NoError(t, err)
	return c, repo, clock, pay
}

// TestSubscribeSeveralSKUsOfOneAccount: on the single table a subscription
// is account + subscription + SKU, so one account holds several at once,
// each retry-safe on its own; a second one of the same SKU is refused.
// What Subscribe writes, retries and refusals on every store are in the
// conformance suite (billingtest.TestRepository, group Subscribe).
func TestSubscribeSeveralSKUsOfOneAccount(t *testing.T) {
	t.Parallel()
	for _, st := range subscribeStores() {
		if !strings.Contains(st.name, "single") {
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, repo, _, _ := newSubscribeCollector(t, st)
			account := layout.SubscriptionRef{AccountID: "acct-7", SubscriptionID: "S1"}
			var ids []string
			for _, sku := range []string{"PLUS", "PRO", "ADDON"} {
				ref := account
				ref.SKU = sku
				for range 2 { // the second is a retry
					r, err := c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-7", UserID: ref.UserID(), Tier: sku + ":v1", Amount: 999})
					require.NoError(t, err, sku)
					ids = append(ids, r.Subscription.SubscriptionID)
				}
				recs, err := repo.ListByUser(ctx, ref.UserID())
				require.NoError(t, err)
				require.Len(t, recs, 1, sku)
				assert.Equal(t, sku+":v1", recs[0].ReceiptTierName)
			}
			assert.Equal(t, ids[0], ids[1])
			assert.NotEqual(t, ids[0], ids[2], "each SKU its own subscription")
			plus := account
			plus.SKU = "PLUS"
			_, err := c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-8", UserID: plus.UserID(), Tier: "PLUS:v1", Amount: 999})
			require.ErrorIs(t, err, billing.ErrOpenSubscription)
		})
	}
}

// TestSubscribePaused: a subscription started paused for two months is
// first charged two months after its first billing date.
func TestSubscribePaused(t *testing.T) {
	t.Parallel()
	st := subscribeStores()[0]
	c, repo, clock, pay := newSubscribeCollector(t, st)
	ctx := t.Context()
	got, err := c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "k", UserID: "u1", Tier: "Plus:v2", Amount: 499,
		FirstBillingDate: jan31.AddDate(0, 0, 1), PauseMonths: 2})
	require.NoError(t, err)
	assert.Equal(t, billing.StatusPaused, got.Subscription.Status)
	assert.Equal(t, 2, got.Subscription.PauseDurationMonths)
	for day := range 100 {
		clock.Set(jan31.AddDate(0, 0, day).Add(2 * time.Hour))
		for _, kind := range []billing.RunKind{billing.RunPause, billing.RunScheduled} {
			_, err := c.Run(ctx, billing.RunRequest{Kind: kind})
			require.NoError(t, err)
		}
	}
	// Feb 1 and Mar 1 are skipped; Apr 1 and May 1 (runs until May 9) are
	// charged 4.99 each, once; Jun 1 waits.
	day := func(m time.Month) time.Time { return time.Date(2024, m, 1, 15, 0, 0, 0, time.UTC) }
	want := []struct {
		date   time.Time
		status billing.Status
	}{
		{day(time.February), billing.StatusPausedSkipped},
		{day(time.March), billing.StatusPausedSkipped},
		{day(time.April), billing.StatusCompleted},
		{day(time.May), billing.StatusCompleted},
		{day(time.June), billing.StatusScheduled},
	}
	recs, err := repo.ListByUser(ctx, "u1")
	require.NoError(t, err)
	require.Len(t, recs, len(want), "records = %+v", recs)
	var completed []billing.Period
	for i, w := range want {
		r := recs[i]
		assert.True(t, w.date.Equal(r.BillingDate), "record %d billed %v, want %v", i, r.BillingDate, w.date)
		assert.Equal(t, w.status, r.Status, "record %d = %+v", i, r)
		assert.Equal(t, billing.Amount(499), r.Amount, "record %d = %+v", i, r)
		if r.Status == billing.StatusCompleted {
			completed = append(completed, r)
		}
	}
	require.Len(t, completed, 2, "records = %+v", recs)
	calls := pay.Calls()
	require.Len(t, calls, 2, "one charge per completed period: calls = %+v", calls)
	for i, r := range completed {
		req := calls[i].Request
		assert.Equal(t, r.SubscriptionID, req.SubscriptionID, "call %d = %+v", i, req)
		assert.Equal(t, "u1", req.UserID, "call %d = %+v", i, req)
		assert.Equal(t, billing.Amount(499), req.Amount, "call %d = %+v", i, req)
		assert.True(t, r.BillingDate.Equal(req.BillingDate), "call %d billed %v, want %v", i, req.BillingDate, r.BillingDate)
		assert.Equal(t, 1, req.Attempt, "call %d = %+v", i, req)
		assert.Equal(t, billing.IdempotencyKey(r.SubscriptionID, 1), req.IdempotencyKey, "call %d = %+v", i, req)
		assert.False(t, calls[i].Replayed, "call %d = %+v", i, calls[i])
	}
}

// TestSubscribeRepeatedLaterIsStillARepeat: a request repeated days later,
// when its first billing date has become too old and its tier has left
// the price list, returns the period the first call created (Repeated),
// not a refusal, and writes nothing.
func TestSubscribeRepeatedLaterIsStillARepeat(t *testing.T) {
	for _, st := range subscribeStores() {
		t.Run(st.name, func(t *testing.T) {
			prices := billing.PriceListMap{"Plus:v2": billing.MustParseAmount("4.99")}
			c, repo, clock, _ := newSubscribeCollector(t, st, func(cfg *billing.Config) { cfg.Prices = prices })
			ctx := t.Context()
			user := layout.SubscriptionRef{AccountID: "acct-1", SubscriptionID: "S1", SKU: "PLUS"}.UserID()
			req := billing.SubscribeRequest{RequestKey: "signup-1", UserID: user, Tier: "Plus:v2", FirstBillingDate: jan31.AddDate(0, 0, -20)}
			first, err := c.Subscribe(ctx, req)
			require.NoError(t, err)
			require.False(t, first.Repeated)
			stored, err := repo.ListByUser(ctx, user)
			require.NoError(t, err)
			require.Len(t, stored, 1)

			clock.Advance(12 * 24 * time.Hour) // the first billing date is now past the stale limit
			delete(prices, "Plus:v2")
			again, err := c.Subscribe(ctx, req)
			require.NoError(t, err, "a repeat answered as a new, now invalid, request")
			assert.True(t, again.Repeated)
			assert.Equal(t, first.Subscription.SubscriptionID, again.Subscription.SubscriptionID)
			assert.True(t, again.Subscription.BillingDate.Equal(first.Subscription.BillingDate))
			after, err := repo.ListByUser(ctx, user)
			require.NoError(t, err)
			require.Len(t, after, 1, "a repeat wrote")
			assert.Equal(t, stored[0].LastRunDate, after[0].LastRunDate)

			// A new request with the same fields is checked as usual.
			req.RequestKey = "signup-2"
			_, err = c.Subscribe(ctx, req)
			require.ErrorIs(t, err, billing.ErrUnknownTier)
		})
	}
}

// TestSubscribeNeverBillsAPaidPeriodAgain: a user whose last period was
// paid and then cancelled may subscribe again, but not before that paid
// period ends (its next billing date), as Reactivate refuses it: a day
// after its billing date bills the paid days again. The end date is
// accepted.
func TestSubscribeNeverBillsAPaidPeriodAgain(t *testing.T) {
	for _, st := range subscribeStores() {
		t.Run(st.name, func(t *testing.T) {
			c, repo, clock, pay := newSubscribeCollector(t, st)
			ctx := t.Context()
			user := layout.SubscriptionRef{AccountID: "acct-1", SubscriptionID: "S1", SKU: "PLUS"}.UserID()
			paid := envRecord(user, jan31.AddDate(0, 0, -10), billing.StatusCompleted)
			require.NoError(t, repo.Add(ctx, &paid))
			clock.Advance(time.Hour)
			req := billing.SubscribeRequest{RequestKey: "again-1", UserID: user, Amount: billing.MustParseAmount("4.99"), Tier: "Plus:v2"}
			end := paid.BillingDate.AddDate(0, 1, 0)
			for _, d := range []time.Time{paid.BillingDate, paid.BillingDate.AddDate(0, 0, -3), paid.BillingDate.AddDate(0, 0, 1), end.Add(-time.Second)} {
				req.FirstBillingDate = d
				_, err := c.Subscribe(ctx, req)
				require.ErrorIs(t, err, billing.ErrInvalidDate, "first billing date %v", d)
				var fe *billing.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, "FirstBillingDate", fe.Field)
				_, checked := preview.CheckSubscribe(ctx, c, req, []billing.Period{paid})
				require.ErrorIs(t, checked, billing.ErrInvalidDate, "CheckSubscribe agrees")
			}
			recs, err := repo.ListByUser(ctx, user)
			require.NoError(t, err)
			require.Len(t, recs, 1, "a refused subscribe wrote")

			req.FirstBillingDate = end
			got, err := c.Subscribe(ctx, req)
			require.NoError(t, err, "the paid period's end")
			assert.True(t, got.Subscription.BillingDate.Equal(req.FirstBillingDate))
			assert.Zero(t, pay.CallCount())
		})
	}
}
