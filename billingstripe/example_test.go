package billingstripe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// ExampleNew charges a subscription through the Provider, here against
// the fake Stripe of package stripetest; with the real API the client is
// stripe.NewClient(secretKey).
func ExampleNew() {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	fake := stripetest.New(stripetest.Options{Clock: clock.Now})
	defer fake.Close()
	fake.AddCustomer("cus_ada", stripetest.PaymentMethod{ID: "pm_ada", Type: "card", Last4: "4242"})

	p, err := billingstripe.New(billingstripe.Config{
		Client: fake.Client(stripetest.ClientOptions{}),
		Customers: billingstripe.CustomersFunc(func(ctx context.Context, userID string) (billingstripe.Customer, error) {
			return billingstripe.Customer{ID: "cus_" + userID, PaymentMethod: "pm_" + userID}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	store, err := memory.New(memory.Options{})
	if err != nil {
		panic(err)
	}
	c, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(), History: store.History(), Locker: billingtest.NewLocker(clock, time.Minute),
		Provider: p, Clock: clock,
	})
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

	rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	if err != nil {
		panic(err)
	}
	got, _ := store.Repository().GetByID(ctx, "sub-ada-march")
	pi := fake.Intents()[0]
	fmt.Println("collected:", rep.Collected)
	fmt.Println(got.Status, got.TransactionID == pi.ID, got.ReceiptPaymentType, got.ReceiptAccountMask)
	fmt.Println(pi.Amount, pi.Currency, pi.Metadata[billingstripe.MetadataIdempotencyKey])
	// Output:
	// collected: 1
	// COMPLETED true CARD 4242
	// 499 usd dynabill:sub-ada-march:1
}
