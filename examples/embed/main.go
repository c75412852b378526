// Command embed is the README's first Go block, runnable: a service's
// wiring of the library on the in-memory store, three subscriptions (one
// with a trial, one paused), the next day's run, a cancellation by user,
// and the access check a host makes on each subscription's status.
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
	clock := billingtest.NewClock(time.Date(2025, 1, 15, 9, 0, 0, 0, time.UTC)) // a service leaves Config.Clock unset
	collector, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(),
		History:    store.History(),
		Locker:     memory.NewLocker(memory.LockerOptions{Clock: clock}),
		Provider:   billingtest.NewProvider(billingtest.ProviderOptions{}), // yours: billingstripe.New(…)
		Prices:     billing.PriceListMap{"Plus:v2": billing.MustParseAmount("9.99")},
		Clock:      clock,
	})
	check(err)

	// Sign-ups, billed from today (bob after a 14-day trial); a repeat of a request key writes nothing.
	for _, req := range []billing.SubscribeRequest{{UserID: "ann"}, {UserID: "bob", TrialDays: 14}, {UserID: "cy"}} {
		req.RequestKey, req.Tier = "order-"+req.UserID, "Plus:v2"
		_, err = collector.Subscribe(ctx, req)
		check(err)
	}
	_, err = collector.Pause(ctx, billing.PauseRequest{UserRequest: billing.UserRequest{UserID: "cy", RequestKey: "pause-1"}, Months: 2})
	check(err) // cy pauses for two months before her first charge

	// Once a day (a cron, an EventBridge rule): charge what is due; rep.Next continues a long run.
	clock.Advance(24 * time.Hour)
	_, err = collector.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	check(err)
	// ann leaves: nothing more is charged, the month she paid for runs to its end.
	_, err = collector.Cancel(ctx, billing.CancelRequest{UserRequest: billing.UserRequest{UserID: "ann", RequestKey: "cancel-1"}})
	check(err)

	for _, user := range []string{"ann", "bob", "cy"} {
		sub, err := collector.Subscription(ctx, user)
		check(err)
		access := sub.Status == billing.SubscriptionActive || sub.Status == billing.SubscriptionTrialing // the gate
		fmt.Printf("%s: %s, access %t, cancel at %s, next charge %s on %s\n", user, sub.Status, access,
			day(sub.CancelAt), sub.NextChargeAmount, day(sub.NextChargeDate))
	}
}

// readme:end

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// day is t's date, "-" for none.
func day(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.DateOnly)
}
