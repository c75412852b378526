package billing_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// A host subscribes a user with one call and lets the collector's daily
// runs charge: three months later the user has paid three periods and the
// fourth is open. The same request sent again (a retried Lambda) creates
// nothing.
func ExampleCollector_Subscribe() {
	ctx := context.Background()
	clock := billingtest.NewTestClock(time.Date(2025, 1, 15, 9, 0, 0, 0, time.UTC))
	store, err := memory.New(memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	processor := billingtest.NewProvider(billingtest.ProviderOptions{}) // a real host plugs in its processor
	collector, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(),
		History:    store.History(),
		Locker:     memory.NewLocker(memory.LockerOptions{Clock: clock}),
		Provider:   processor,
		Clock:      clock,
		Prices:     billing.PriceListMap{"Plus:v2": billing.MustParseAmount("9.99")},
	})
	if err != nil {
		log.Fatal(err)
	}
	clock.RunCollector(collector) // the daily scheduled, retry and pause runs

	req := billing.SubscribeRequest{RequestKey: "order-1001", UserID: "ann", Tier: "Plus:v2"}
	sub, err := collector.Subscribe(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("subscribed:", sub.Subscription.Status, sub.Subscription.BillingDate.Format(time.DateOnly), sub.Subscription.Amount)
	again, err := collector.Subscribe(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried:", again.Repeated, again.Subscription.SubscriptionID == sub.Subscription.SubscriptionID)

	if err := clock.AdvanceMonths(ctx, 3); err != nil {
		log.Fatal(err)
	}
	fmt.Println("charges:", processor.CallCount())
	periods, err := store.Repository().ListByUser(ctx, "ann")
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range periods {
		fmt.Println(p.BillingDate.Format(time.DateOnly), p.Status, p.Amount)
	}
	// Output:
	// subscribed: SCHEDULED 2025-01-15 9.99
	// retried: true true
	// charges: 3
	// 2025-01-15 COMPLETED 9.99
	// 2025-02-15 COMPLETED 9.99
	// 2025-03-15 COMPLETED 9.99
	// 2025-04-15 SCHEDULED 9.99
}
