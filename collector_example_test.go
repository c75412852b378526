package billing_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// ExampleCollector wires a collector on the in-memory store, collects a due
// record, and shows the next period it opened.
func ExampleCollector() {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC))
	store, err := memory.New(memory.Options{})
	if err != nil {
		panic(err)
	}
	repo := store.Repository()
	ids := 0
	c, err := billing.NewCollector(billing.Config{
		Repository: repo,
		History:    store.History(),
		Locker:     billingtest.NewLocker(clock, time.Minute),
		Provider:   billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}),
		Clock:      clock,
		NewID:      func() string { ids++; return fmt.Sprintf("sub-%d", ids) },
	})
	if err != nil {
		panic(err)
	}
	due := time.Date(2024, 1, 31, 15, 0, 0, 0, time.UTC)
	first := billing.Period{
		UserID: "user-1", SubscriptionID: "sub-0", BillingDate: due, AnchorDay: 31,
		Amount: billing.MustParseAmount("4.99"), Status: billing.StatusScheduled, Term: billing.TermMonthly,
		BillingPeriod: billing.BillingPeriod(due), LastRunDate: due.AddDate(0, -1, 0),
	}
	if err := repo.Add(ctx, &first); err != nil {
		panic(err)
	}

	rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	if err != nil {
		panic(err)
	}
	fmt.Printf("attempted %d, collected %d, more pages: %v\n", rep.Attempted, rep.Collected, rep.Next != "")
	recs, _ := repo.ListByUser(ctx, "user-1")
	for _, r := range recs {
		fmt.Println(r.SubscriptionID, r.BillingDate.Format("2006-01-02"), r.Status, r.Amount, "attempt", r.Attempt)
	}
	// Output:
	// attempted 1, collected 1, more pages: false
	// sub-0 2024-01-31 COMPLETED 4.99 attempt 1
	// sub-1 2024-02-29 SCHEDULED 4.99 attempt 0
}
