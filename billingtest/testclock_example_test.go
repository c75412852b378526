package billingtest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// A host's test wires its collector to a TestClock, advances three months
// from Jan 30 noon to Apr 30 noon and looks at what was billed: the four
// billing dates that came due, each collection opening the next period,
// the anchor day (the 31st) kept through short months.
func ExampleTestClock_AdvanceMonths() {
	ctx := context.Background()
	clock := billingtest.NewTestClock(time.Date(2025, 1, 30, 12, 0, 0, 0, time.UTC))
	store, err := memory.New(memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	collector, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(),
		Locker:     billingtest.NewLocker(clock, time.Minute),
		Provider:   billingtest.NewProvider(billingtest.ProviderOptions{}),
		Clock:      clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	clock.RunCollector(collector)

	first := time.Date(2025, 1, 31, 0, 0, 0, 0, time.UTC)
	if err := store.Repository().Add(ctx, &billing.Period{
		UserID: "ann", SubscriptionID: "sub-1", BillingDate: first, BillingPeriod: billing.BillingPeriod(first),
		Amount: billing.MustParseAmount("9.99"), Status: billing.StatusScheduled, Term: billing.TermMonthly,
		AnchorDay: 31, ReceiptTierName: "Plus:v2", CreatedDate: first.AddDate(0, -1, 0), LastRunDate: first.AddDate(0, -1, 0),
	}); err != nil {
		log.Fatal(err)
	}

	if err := clock.AdvanceMonths(ctx, 3); err != nil {
		log.Fatal(err)
	}
	fmt.Println("collected:", clock.Totals(billing.RunScheduled).Collected)
	recs, err := store.Repository().ListByUser(ctx, "ann")
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Println(r.BillingDate.Format(time.DateOnly), r.Status, r.Amount)
	}
	// Output:
	// collected: 4
	// 2025-01-31 COMPLETED 9.99
	// 2025-02-28 COMPLETED 9.99
	// 2025-03-31 COMPLETED 9.99
	// 2025-04-30 COMPLETED 9.99
	// 2025-05-31 SCHEDULED 9.99
}
