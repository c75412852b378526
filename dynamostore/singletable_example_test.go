package dynamostore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
)

// Example_singleTableDailyJobs runs the two daily jobs of recurring
// payments on the single-table layout: reminders due today through the notifier's
// scheduler, payments due today through the collector. One account holds
// two SKUs; the in-memory twin stands in for [NewSingleTableRepository].
func Example_singleTableDailyJobs() {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC))
	table, err := memory.NewSingleTable(memory.SingleTableOptions{Clock: clock})
	if err != nil {
		panic(err)
	}
	repo, payments := table.Repository(), table.Payments()

	stream := layout.SubscriptionRef{AccountID: "123", SubscriptionID: "s1", SKU: "STREAM"}
	music := layout.SubscriptionRef{AccountID: "123", SubscriptionID: "s2", SKU: "MUSIC"}
	for _, s := range []struct {
		ref layout.SubscriptionRef
		due time.Time
	}{{stream, time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)}, {music, time.Date(2024, 3, 5, 9, 0, 0, 0, time.UTC)}} {
		rec := billing.Period{
			UserID: s.ref.UserID(), SubscriptionID: s.ref.SKU + "-2024-03", BillingDate: s.due, AnchorDay: s.due.Day(),
			Amount: billing.MustParseAmount("9.99"), Status: billing.StatusScheduled, Term: billing.TermMonthly,
			BillingPeriod: billing.BillingPeriod(s.due), LastRunDate: s.due.AddDate(0, -1, 0),
		}
		if err := repo.Add(ctx, &rec); err != nil {
			panic(err)
		}
	}

	// Job 1: reminders due today (NextReminderDate = today).
	reminders, _, _ := payments.DueRemindersByDate(ctx, clock.Now(), "")
	for _, s := range reminders {
		fmt.Println("reminder due today:", s.SKU, "payment on", s.NextPaymentDate.Format("2006-01-02"))
	}
	sched, err := notice.NewScheduler(notice.SchedulerConfig{
		Repository: repo, Clock: clock,
		Enqueuer: notice.EnqueuerFunc(func(_ context.Context, bodies []string) error {
			for _, b := range bodies {
				m, err := notice.ParseMessage([]byte(b))
				if err != nil {
					return err
				}
				fmt.Println("notifier enqueued:", m.UserID)
			}
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	if _, err := sched.Run(ctx, notice.Event{}); err != nil {
		panic(err)
	}

	// Job 2: payments due today (NextPaymentDate = today).
	c, err := billing.NewCollector(billing.Config{
		Repository: repo, History: table.History(), Clock: clock,
		Locker:   billingtest.NewLocker(clock, time.Minute),
		Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}),
	})
	if err != nil {
		panic(err)
	}
	rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	if err != nil {
		panic(err)
	}
	fmt.Println("collected:", rep.Collected)
	subs, _ := payments.SubscriptionsByAccount(ctx, "123")
	for _, s := range subs {
		fmt.Println(s.SKU, "next payment", s.NextPaymentDate.Format("2006-01-02"), "next reminder", s.NextReminderDate.Format("2006-01-02"))
	}
	receipts, _ := payments.ReceiptsByAccount(ctx, "123", time.Time{})
	for _, r := range receipts {
		fmt.Println("receipt:", r.SKU, r.ProcessedAmount, r.ProcessedDate.Format(time.RFC3339))
	}
	// Output:
	// reminder due today: MUSIC payment on 2024-03-05
	// notifier enqueued: 123#s2#MUSIC
	// collected: 1
	// STREAM next payment 2024-04-01 next reminder 2024-03-28
	// MUSIC next payment 2024-03-05 next reminder 2024-03-01
	// receipt: STREAM 9.99 2024-03-01T12:00:00Z
}

// Wiring the engine's single-table store against a local server
// (DynamoDB Local or moto_server); in production pass
// dynamodb.NewFromConfig(cfg) and leave the table to infrastructure code.
func ExampleNewSingleTableRepository() {
	ctx := context.Background()
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://localhost:8000"),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	table := dynamostore.SingleTableConfig{Table: "payments", AccountPrefix: "ACC#", TTLAttribute: "TTL"} // the recurring payments layout
	if err := dynamostore.CreateSingleTable(ctx, client, table); err != nil {
		fmt.Println(err)
		return
	}
	repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: client, Table: table})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The collector, the notifier's scheduler and the admin API take repo
	// (and repo.History()) as they take the legacy tables' stores; the
	// engine's user IDs are subscriptions of accounts:
	user := layout.SubscriptionRef{AccountID: "123", SubscriptionID: "s1", SKU: "999"}.UserID()
	recent, err := repo.Recent(ctx, user, 3)
	fmt.Println(len(recent), err)
	receipts, err := repo.Payments().ReceiptsByAccount(ctx, "123", time.Now().AddDate(0, -6, 0))
	fmt.Println(len(receipts), err)
}
