package dynamostore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/memory"
)

// The daily payment job of recurring payments on the in-memory twin; on
// DynamoDB use billing.NewDynamoPayments with a *dynamodb.Client (for a
// local server: dynamodb.Options.BaseEndpoint "http://localhost:8000").
func ExamplePayments() {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2025, 5, 28, 6, 0, 0, 0, time.UTC))
	var payments entitlement.Payments
	payments, _ = memory.NewPayments(memory.PaymentsOptions{
		Table: dynamostore.SingleTableConfig{AccountPrefix: "ACC#", TTLAttribute: "TTL"}, Clock: clock,
	})
	_, _ = payments.CreateSubscription(ctx, entitlement.RecurringSubscription{
		AccountID: "123", SubscriptionID: "s1", SKU: "999", Email: "a@example.com",
		PaymentDay: 28, PaymentAmount: billing.MustParseAmount("39.99"), PaymentDetails: "pm_tok",
		NextPaymentDate: time.Date(2025, 5, 28, 0, 0, 0, 0, time.UTC),
	})

	today := clock.Now()
	for cursor := ""; ; {
		due, next, err := payments.DuePaymentsByDate(ctx, today, cursor)
		if err != nil {
			panic(err)
		}
		for _, sub := range due {
			// charge sub.PaymentAmount with sub.PaymentDetails, then:
			receipt := entitlement.Receipt{AccountID: sub.AccountID, SubscriptionID: sub.SubscriptionID, SKU: sub.SKU,
				ProcessedDate: clock.Now(), ProcessedAmount: sub.PaymentAmount, TransactionID: "tx_1"}
			nextPay := time.Date(2025, 6, sub.PaymentDay, 0, 0, 0, 0, time.UTC)
			updated, r, err := payments.RecordPayment(ctx, sub, receipt, nextPay, nextPay.AddDate(0, 0, -7))
			if err != nil {
				panic(err)
			}
			fmt.Println("paid", r.ProcessedAmount, "next", updated.NextPaymentDate.Format(time.DateOnly), "version", updated.Version)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	recs, _ := payments.ReceiptsByAccount(ctx, "123", today.AddDate(0, -6, 0))
	fmt.Println(len(recs), "receipt(s), expiring", recs[0].ExpiresAt.Format(time.DateOnly))
	// Output:
	// paid 39.99 next 2025-06-28 version 2
	// 1 receipt(s), expiring 2025-11-27
}
