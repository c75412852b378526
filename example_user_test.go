package billing_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// A host holds a subscription by its user: it subscribes, changes the
// plan, pauses, resumes and cancels with the user's ID and a request key
// of its own, never a period ID. A key given again with other parameters
// is refused; the same request again answers what the first did.
func ExampleCollector_ChangePlan() {
	ctx := context.Background()
	clock := billingtest.NewTestClock(time.Date(2025, 1, 15, 9, 0, 0, 0, time.UTC))
	store, err := memory.New(memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	processor := billingtest.NewProvider(billingtest.ProviderOptions{})
	collector, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(),
		History:    store.History(), // changes by user read their requests back from it
		Locker:     memory.NewLocker(memory.LockerOptions{Clock: clock}),
		Provider:   processor,
		Clock:      clock,
		Prices:     billing.PriceListMap{"Plus:v2": billing.MustParseAmount("9.99"), "Pro:v1": billing.MustParseAmount("19.99")},
	})
	if err != nil {
		log.Fatal(err)
	}
	clock.RunCollector(collector)
	show := func(what string, v billing.Subscription) {
		fmt.Printf("%-10s %-7s %-8s %6s next %s\n", what, v.Status, v.Tier, v.Amount, v.NextChargeDate.Format(time.DateOnly))
	}

	if _, err := collector.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-1", UserID: "ann", Tier: "Plus:v2"}); err != nil {
		log.Fatal(err)
	}
	if err := clock.AdvanceDays(ctx, 1); err != nil { // the scheduled run charges the first period
		log.Fatal(err)
	}
	v, err := collector.Subscription(ctx, "ann")
	if err != nil {
		log.Fatal(err)
	}
	show("subscribed", v)

	up := billing.ChangePlanRequest{UserRequest: billing.UserRequest{UserID: "ann", RequestKey: "upgrade-1"}, Tier: "Pro:v1"}
	ch, err := collector.ChangePlan(ctx, up)
	if err != nil {
		log.Fatal(err)
	}
	show("upgraded", ch.Subscription)
	again, err := collector.ChangePlan(ctx, up)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same request again, repeated:", again.Repeated)
	other := up
	other.Tier = "Plus:v2"
	_, err = collector.ChangePlan(ctx, other)
	var reused *billing.RequestKeyError
	fmt.Println("same key, other tier:", errors.As(err, &reused), reused.Fields)

	p, err := collector.Pause(ctx, billing.PauseRequest{UserRequest: billing.UserRequest{UserID: "ann", RequestKey: "pause-1"}, Months: 2})
	if err != nil {
		log.Fatal(err)
	}
	show("paused", p.Subscription) // the paid month runs on: ACTIVE until PauseAt
	fmt.Println("pause from", p.Subscription.PauseAt.Format(time.DateOnly))
	r, err := collector.Resume(ctx, billing.ResumeRequest{UserRequest: billing.UserRequest{UserID: "ann", RequestKey: "resume-1"}})
	if err != nil {
		log.Fatal(err)
	}
	show("resumed", r.Subscription)
	c, err := collector.Cancel(ctx, billing.CancelRequest{UserRequest: billing.UserRequest{UserID: "ann", RequestKey: "cancel-1"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cancelled:", c.Subscription.Status, "until", c.Subscription.CancelAt.Format(time.DateOnly), "charges", processor.CallCount())

	_, err = collector.Periods().Cancel(ctx, "ann") // a period call given the user
	fmt.Println(errors.Is(err, billing.ErrNotFound))
	// Output:
	// subscribed ACTIVE  Plus:v2    9.99 next 2025-02-15
	// upgraded   ACTIVE  Pro:v1    19.99 next 2025-02-15
	// same request again, repeated: true
	// same key, other tier: true [Tier]
	// paused     ACTIVE  Pro:v1    19.99 next 2025-04-15
	// pause from 2025-02-15
	// resumed    ACTIVE  Pro:v1    19.99 next 2025-02-15
	// cancelled: ACTIVE until 2025-02-15 charges 1
	// true
}
