// Command quickstart shows the library's domain model without any
// infrastructure: a monthly subscription started on January 31 is billed
// through a year without drifting to the 28th, a Friday-billing
// subscription lands on its week's Friday, amounts stay exact, and a record
// is encoded as the billing-activity item existing tables hold.
//
//	go run ./examples/quickstart
package main

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/ddbjson"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	price, err := billing.ParseAmount("4.99")
	if err != nil {
		return err
	}
	start := time.Date(2024, time.January, 31, 15, 0, 0, 0, time.UTC)
	sub := billing.Subscription{
		UserID:          "user-1001",
		SubscriptionID:  "2f1c8a4e-7b3d-4c55-9f0e-1a2b3c4d5e6f",
		BillingDate:     start,
		AnchorDay:       start.Day(),
		Amount:          price,
		Status:          billing.StatusScheduled,
		Term:            billing.TermMonthly,
		BillingPeriod:   billing.BillingPeriod(start),
		ReceiptTierName: billing.JoinTier("Plus", "v2"),
		Process:         billing.ProcessInitial,
		CreatedDate:     start.Add(-30 * 24 * time.Hour),
		LastRunDate:     start.Add(-30 * 24 * time.Hour),
	}

	fmt.Println("Monthly, anchored on the 31st:")
	total := billing.Amount(0)
	date := sub.BillingDate
	for range 12 {
		fmt.Printf("  %s  period %s  %s\n", date.Format("Mon 2006-01-02"), billing.BillingPeriod(date), sub.Amount)
		if total, err = total.Add(sub.Amount); err != nil {
			return err
		}
		if date, err = billing.NextBillingDate(date, sub.Schedule()); err != nil {
			return err
		}
	}
	fmt.Printf("  a year costs %s (exact: %d cents)\n\n", total, total.MinorUnits())

	fmt.Println("Friday billing, week 5 (last Friday when a month has only four):")
	friday := billing.Schedule{Term: billing.TermMonthly, BillingWeek: 5}
	date = billing.NthFriday(2024, time.March, 5).Add(14 * time.Hour)
	for range 4 {
		fmt.Printf("  %s\n", date.Format("Mon 2006-01-02"))
		if date, err = billing.NextBillingDate(date, friday); err != nil {
			return err
		}
	}

	now := time.Date(2024, time.December, 29, 12, 0, 0, 0, time.UTC)
	from, to, err := billing.NotificationWindow(now, "")
	if err != nil {
		return err
	}
	fmt.Printf("\nOn %s the notifier looks for billing dates in [%s, %s).\n\n",
		now.Format("2006-01-02"), from.Format("2006-01-02"), to.Format("2006-01-02"))

	fmt.Printf("Status %s may become %s: %v; %s may become %s: %v.\n\n",
		billing.StatusACHSent, billing.StatusCompleted, billing.CanTransition(billing.StatusACHSent, billing.StatusCompleted),
		billing.StatusCompleted, billing.StatusScheduled, billing.CanTransition(billing.StatusCompleted, billing.StatusScheduled))

	item, err := billing.EncodeItem(&sub)
	if err != nil {
		return err
	}
	js, err := ddbjson.MarshalItem(item)
	if err != nil {
		return err
	}
	fmt.Println("The first record as a billing-activity item:")
	_, err = os.Stdout.Write(js)
	return err
}
