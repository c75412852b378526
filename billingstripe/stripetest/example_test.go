package stripetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// ExampleServer_Event tests a host's webhook wiring without a Stripe
// account: the collector debits a bank account through the fake, the
// debit settles days later, and the signed payment_intent.succeeded
// event the fake builds is delivered to the webhook handler, which
// records the payment.
func ExampleServer_Event() {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	fake := stripetest.New(stripetest.Options{Clock: clock.Now})
	defer fake.Close()
	fake.AddCustomer("cus_ada", stripetest.PaymentMethod{ID: "pm_ada", Type: "us_bank_account", Last4: "6789"})

	client := fake.Client(stripetest.ClientOptions{})
	p, err := billingstripe.New(billingstripe.Config{Client: client, Clock: clock.Now,
		Customers: billingstripe.CustomersFunc(func(ctx context.Context, userID string) (billingstripe.Customer, error) {
			return billingstripe.Customer{ID: "cus_" + userID, PaymentMethod: "pm_" + userID}, nil
		})})
	if err != nil {
		panic(err)
	}
	store, err := memory.New(memory.Options{})
	if err != nil {
		panic(err)
	}
	c, err := billing.NewCollector(billing.Config{Repository: store.Repository(), History: store.History(),
		Locker: billingtest.NewLocker(clock, time.Minute), Provider: p, Clock: clock})
	if err != nil {
		panic(err)
	}
	hooks, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{
		Secret: fake.WebhookSecret(), Collector: c, Intents: billingstripe.NewIntentMetadata(client)})
	if err != nil {
		panic(err)
	}
	due := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s := billing.Period{UserID: "ada", SubscriptionID: "sub-ada-march", BillingDate: due, Amount: billing.MustParseAmount("4.99"),
		Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(due), Term: billing.TermMonthly, AnchorDay: 1,
		ReceiptTierName: "Plus:v2", CreatedDate: due.AddDate(0, -1, 0), LastRunDate: due.AddDate(0, -1, 0)}
	if err := store.Repository().Add(ctx, &s); err != nil {
		panic(err)
	}
	if _, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled}); err != nil {
		panic(err)
	}
	got, _ := store.Repository().GetByID(ctx, s.SubscriptionID)
	fmt.Println("after the run:", got.Status)

	clock.Advance(3 * 24 * time.Hour)
	pi := fake.Intents()[0].ID
	if err := fake.Settle(pi); err != nil {
		panic(err)
	}
	ev, err := fake.Event(stripe.EventTypePaymentIntentSucceeded, pi)
	if err != nil {
		panic(err)
	}
	rec := ev.Deliver(hooks)
	got, _ = store.Repository().GetByID(ctx, s.SubscriptionID)
	fmt.Print("webhook: ", rec.Code, " ", rec.Body.String())
	fmt.Println("after the event:", got.Status, got.TransactionID == pi)
	// Output:
	// after the run: ACHSENT
	// webhook: 200 applied
	// after the event: COMPLETED true
}
