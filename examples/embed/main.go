// Command embed is the README's first Go block, runnable: a service's
// wiring of the library on the in-memory store, one subscription, the
// next day's run and a cancellation by user.
//
//	go run ./examples/embed
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// readme:begin
func main() {
	ctx := context.Background()
	store, err := memory.New(memory.Options{}) // on DynamoDB: dynamostore, below
	check(err)
	clock := billingtest.NewClock(time.Now()) // moved a day below; a service leaves Config.Clock unset
	collector, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(),
		History:    store.History(),
		Locker:     memory.NewLocker(memory.LockerOptions{Clock: clock}),
		Provider:   billingtest.NewProvider(billingtest.ProviderOptions{}), // yours: billingstripe.New(…)
		Prices:     billing.PriceListMap{"Plus:v2": billing.MustParseAmount("9.99")},
		Clock:      clock,
	})
	check(err)

	// The sign-up handler: billed from now, monthly; a repeat of the request key writes nothing.
	_, err = collector.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-1001", UserID: "ann", Tier: "Plus:v2"})
	check(err)

	// Once a day (a cron, an EventBridge rule): charge what is due; rep.Next continues a long run.
	clock.Advance(24 * time.Hour)
	rep, err := collector.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	check(err)

	// The user leaves: nothing more is charged, the paid month runs to its end.
	left, err := collector.Cancel(ctx, billing.CancelRequest{
		UserRequest: billing.UserRequest{UserID: "ann", RequestKey: "cancel-1001"}})
	check(err)
	fmt.Printf("collected %d, amount %s; subscription %s, paid through %s\n", rep.Collected,
		left.Subscription.Amount, left.Subscription.Status, left.AccessUntil.Format(time.DateOnly))
}

// readme:end

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
