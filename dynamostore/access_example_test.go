package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
)

// Credits change only atomically and once per request ID: a top-up the
// client retried is not added twice, a consume that the balance cannot
// cover changes nothing and says how much there was, and a payment event
// delivered twice grants the monthly quota once. The in-memory twin
// behaves like the DynamoDB store (see ExampleNewAccounts).
func ExampleAccounts_credits() {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC))
	accounts, _ := billingtest.NewAccounts(billingtest.AccountsOptions{Clock: clock})

	for range 2 { // invoice.payment_succeeded, delivered twice
		r, _ := accounts.MonthlyGrant(ctx, "u1", entitlement.TierJourneyman, "2025-01", "evt_1")
		fmt.Println("monthly grant applied:", r.Applied, r.Amount)
	}
	for range 2 { // the purchase's top-up, retried after a timeout
		c, _ := accounts.TopUp(ctx, "u1", 10, "order_42")
		fmt.Println("balance:", c.Balance, "repeated:", c.Repeated)
	}

	_, err := accounts.Consume(ctx, "u1", 20, "render_1")
	var short *entitlement.InsufficientCreditsError
	if errors.As(err, &short) {
		fmt.Println("refused: has", short.Balance, "needs", short.Requested)
	}
	c, _ := accounts.Consume(ctx, "u1", 3, "render_2") // a Veo-3 render
	fmt.Println("balance:", c.Balance)
	_, err = accounts.Consume(ctx, "u1", 5, "render_2")
	fmt.Println(errors.Is(err, entitlement.ErrRequestIDReused))
	// Output:
	// monthly grant applied: true 5
	// monthly grant applied: false 0
	// balance: 15 repeated: false
	// balance: 15 repeated: true
	// refused: has 15 needs 20
	// balance: 12
	// true
}

// Wiring the DynamoDB store against a local server (DynamoDB Local or
// moto_server); in production pass dynamodb.NewFromConfig(cfg) and leave
// the table to infrastructure code.
func ExampleNewAccounts() {
	ctx := context.Background()
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://localhost:8000"),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	table := dynamostore.SingleTableConfig{} // table "billing", USER#<id>, TTL on expiresAt
	if err := dynamostore.CreateSingleTable(ctx, client, table); err != nil {
		fmt.Println(err)
		return
	}
	accounts, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{
		Client:       client,
		Table:        table,
		CreditExpiry: 90 * 24 * time.Hour, // unused credits expire 90 days after the last grant
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	applied, err := accounts.ApplyProviderEvent(ctx, entitlement.ProviderEvent{
		EventID: "evt_1", Created: time.Now(), UserID: "abc123", SubscriptionID: "sub_1", Customer: "cus_1",
		Tier: entitlement.TierJourneyman, Status: entitlement.ProviderActive,
		CurrentPeriodStart: time.Now(), CurrentPeriodEnd: time.Now().AddDate(0, 1, 0),
	})
	fmt.Println(applied, err)
	access, err := accounts.ResolveAccess(ctx, "abc123")
	fmt.Println(access.Tier, access.Reason, err)
}
