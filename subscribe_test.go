package billing_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestSubscribeRefusesEveryInvalidField: each invalid field is a
// *FieldError naming it, and nothing is written.
func TestSubscribeRefusesEveryInvalidField(t *testing.T) {
	t.Parallel()
	valid := func() billing.SubscribeRequest {
		return billing.SubscribeRequest{RequestKey: "order-1", UserID: "u1", Tier: "Plus:v2", Amount: billing.MustParseAmount("4.99")}
	}
	friday := time.Date(2024, 2, 9, 15, 0, 0, 0, time.UTC) // the second Friday
	cases := []struct {
		name  string
		edit  func(*billing.SubscribeRequest)
		field string
		err   error
	}{
		{"no request key", func(r *billing.SubscribeRequest) { r.RequestKey = "" }, "RequestKey", billing.ErrInvalidRequest},
		{"long request key", func(r *billing.SubscribeRequest) { r.RequestKey = strings.Repeat("k", 257) }, "RequestKey", billing.ErrInvalidRequest},
		{"request key not UTF-8", func(r *billing.SubscribeRequest) { r.RequestKey = "\xff" }, "RequestKey", billing.ErrInvalidRequest},
		{"no user", func(r *billing.SubscribeRequest) { r.UserID = "" }, "UserID", billing.ErrInvalidRequest},
		{"long user", func(r *billing.SubscribeRequest) { r.UserID = strings.Repeat("u", 1025) }, "UserID", billing.ErrInvalidRequest},
		{"no tier", func(r *billing.SubscribeRequest) { r.Tier = "" }, "tier", billing.ErrUnknownTier},
		{"no amount", func(r *billing.SubscribeRequest) { r.Amount = 0 }, "amount", billing.ErrInvalidAmount},
		{"negative amount", func(r *billing.SubscribeRequest) { r.Amount = -1 }, "amount", billing.ErrInvalidAmount},
		{"amount over max charge", func(r *billing.SubscribeRequest) { r.Amount = billing.DefaultMaxCharge + 1 }, "amount", billing.ErrInvalidAmount},
		{"unknown term", func(r *billing.SubscribeRequest) { r.Term = "DAILY" }, "Term", billing.ErrInvalidTerm},
		{"negative interval", func(r *billing.SubscribeRequest) { r.Interval = -1 }, "Interval", billing.ErrInvalidRequest},
		{"interval too long", func(r *billing.SubscribeRequest) { r.Interval = billing.MaxInterval + 1 }, "Interval", billing.ErrInvalidRequest},
		{"anchor day 32", func(r *billing.SubscribeRequest) { r.AnchorDay = 32 }, "AnchorDay", billing.ErrInvalidRequest},
		{"anchor day on a weekly term", func(r *billing.SubscribeRequest) { r.Term, r.AnchorDay = billing.TermWeekly, 5 }, "AnchorDay", billing.ErrInvalidRequest},
		{"pause of 121 months", func(r *billing.SubscribeRequest) { r.PauseMonths = 121 }, "PauseMonths", billing.ErrInvalidRequest},
		{"negative pause", func(r *billing.SubscribeRequest) { r.PauseMonths = -1 }, "PauseMonths", billing.ErrInvalidRequest},
		{"first date in 1990", func(r *billing.SubscribeRequest) { r.FirstBillingDate = time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC) }, "FirstBillingDate", billing.ErrInvalidDate},
		{"first date four years ahead", func(r *billing.SubscribeRequest) { r.FirstBillingDate = jan31.AddDate(4, 0, 0) }, "FirstBillingDate", billing.ErrInvalidDate},
		{"first date in year 0", func(r *billing.SubscribeRequest) { r.FirstBillingDate = time.Date(0, 3, 1, 0, 0, 0, 0, time.UTC) }, "FirstBillingDate", billing.ErrInvalidDate},
		{"Friday billing on a Thursday", func(r *billing.SubscribeRequest) {
			r.FridayBilling, r.FirstBillingDate = true, friday.AddDate(0, 0, -1)
		}, "FirstBillingDate", billing.ErrInvalidRequest},
		{"Friday billing yearly", func(r *billing.SubscribeRequest) {
			r.FridayBilling, r.FirstBillingDate, r.Term = true, friday, billing.TermYearly
		}, "FridayBilling", billing.ErrInvalidRequest},
	}
	for _, st := range subscribeStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			c, repo, _, _ := newSubscribeCollector(t, st)
			for _, tc := range cases {
				req := valid()
				req.UserID = st.user(1)
				tc.edit(&req)
				_, err := c.Subscribe(t.Context(), req)
				require.ErrorIs(t, err, tc.err, tc.name)
				var fe *billing.FieldError
				require.ErrorAs(t, err, &fe, tc.name)
				assert.Equal(t, tc.field, fe.Field, tc.name)
			}
			recs, err := repo.ListByUser(t.Context(), st.user(1))
			require.NoError(t, err)
			assert.Empty(t, recs, "nothing written")
		})
	}
}

// TestSubscribeDerivesTheRecord: the first period carries everything the
// domain derives, and a retried request (sequential and concurrent)
// creates one subscription; a second subscription of a user with an open
// one is refused; on the single table an account holds several.
func TestSubscribeDerivesTheRecord(t *testing.T) {
	t.Parallel()
	for _, st := range subscribeStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, repo, clock, _ := newSubscribeCollector(t, st)
			user := st.user(7)
			req := billing.SubscribeRequest{RequestKey: "order-7", UserID: user, Tier: "Plus:v2", Amount: billing.MustParseAmount("4.99"),
				FirstBillingDate: time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC), AnchorDay: 31}
			got, err := c.Subscribe(ctx, req)
			require.NoError(t, err)
			assert.False(t, got.Repeated)
			s := got.Subscription
			assert.Equal(t, billing.SubscriptionIDFor(user, "order-7"), s.SubscriptionID)
			assert.Equal(t, user, s.UserID)
			assert.Equal(t, billing.StatusScheduled, s.Status)
			assert.Equal(t, time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC), s.BillingDate)
			assert.Equal(t, "02/2024", s.BillingPeriod)
			assert.Equal(t, 31, s.AnchorDay)
			assert.Equal(t, billing.TermMonthly, s.Term)
			assert.Equal(t, billing.ProcessSubscribe, s.Process)
			assert.Equal(t, billing.EventUserSubscribed, s.UpdatedEvent)
			assert.Equal(t, "Plus:v2", s.ReceiptTierName)
			assert.Equal(t, clock.Now(), s.CreatedDate)
			recs, err := repo.ListByUser(ctx, user)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			assert.Equal(t, s.SubscriptionID, recs[0].SubscriptionID)
			assert.Equal(t, s.Amount, recs[0].Amount)

			// Retried: the same subscription, nothing written.
			clock.Advance(time.Minute)
			again, err := c.Subscribe(ctx, req)
			require.NoError(t, err)
			assert.True(t, again.Repeated)
			assert.Equal(t, s.SubscriptionID, again.Subscription.SubscriptionID)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					r, err := c.Subscribe(ctx, req)
					if err == nil {
						assert.Equal(t, s.SubscriptionID, r.Subscription.SubscriptionID)
					} else {
						assert.ErrorIs(t, err, billing.ErrAlreadyLocked)
					}
				})
			}
			wg.Wait()
			recs, err = repo.ListByUser(ctx, user)
			require.NoError(t, err)
			require.Len(t, recs, 1, "one subscription for every retry")

			// Another request for the same user (the same subscription of an
			// account, on the single table) while it is open: refused.
			other := req
			other.RequestKey = "order-8"
			_, err = c.Subscribe(ctx, other)
			require.ErrorIs(t, err, billing.ErrOpenSubscription)
			var oe *billing.OpenSubscriptionError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, billing.StatusScheduled, oe.Status)

			if strings.Contains(st.name, "single") {
				// Several subscriptions of one account: other SKUs.
				ref, err := layout.ParseSubscriptionRef(user)
				require.NoError(t, err)
				for _, sku := range []string{"PRO", "ADDON"} {
					u := layout.SubscriptionRef{AccountID: ref.AccountID, SubscriptionID: ref.SubscriptionID, SKU: sku}.UserID()
					r, err := c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-7", UserID: u, Tier: "Pro:v1", Amount: 999})
					require.NoError(t, err, sku)
					assert.False(t, r.Repeated)
				}
			}

			// Once the subscription has ended, the user may subscribe again.
			_, err = c.Cancel(ctx, s.SubscriptionID)
			require.NoError(t, err)
			other.FirstBillingDate = time.Time{} // now
			again2, err := c.Subscribe(ctx, other)
			require.NoError(t, err)
			assert.False(t, again2.Repeated)
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
	calls := pay.Calls()
	require.NotEmpty(t, calls)
	recs, err := repo.ListByUser(ctx, "u1")
	require.NoError(t, err)
	var charged []string
	for _, r := range recs {
		if r.Status == billing.StatusCompleted {
			charged = append(charged, r.BillingDate.Format(time.DateOnly))
		}
	}
	assert.Equal(t, []string{"2024-04-01"}, charged[:1], "first charge two months after Feb 1: %v", charged)
}
