package billing_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

// A cancelled subscription keeps its tier until the end of the paid
// period; at that instant access falls back to the profile's tier.
func ExampleResolveAccess() {
	end := time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC)
	subs := []billing.ProviderSubscription{{
		SubscriptionID: "sub_1", Tier: billing.TierSage, Status: billing.ProviderCanceled, CurrentPeriodEnd: end,
	}}
	profile, _ := billing.ParseTier("free") // as stored in profiles
	for _, now := range []time.Time{end.Add(-time.Second), end} {
		a := billing.ResolveAccess(now, nil, subs, profile)
		fmt.Println(now.Format(time.TimeOnly), a.Tier, a.Reason, a.Source)
	}
	passes := []billing.FounderPass{{PassType: billing.PassGuildBuilder, LifetimeAccess: true, GrantedTier: billing.PassGuildBuilder.Tier()}}
	a := billing.ResolveAccess(end, passes, subs, profile)
	fmt.Println("with a pass:", a.Tier, a.Reason, a.Source)
	// Output:
	// 23:59:59 SAGE grace_period sub_1
	// 00:00:00 FREE profile profile
	// with a pass: GUILDMASTER founder_pass GUILD_BUILDER
}

// Credits change only atomically: a consume that the balance cannot cover
// changes nothing and says how much there was; a payment event delivered
// twice grants the monthly quota once. The in-memory twin behaves like the
// DynamoDB store (see ExampleNewDynamoAccounts).
func ExampleAccounts_credits() {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC))
	accounts, _ := billingtest.NewAccounts(billingtest.AccountsOptions{Clock: clock})

	for range 2 { // invoice.payment_succeeded, delivered twice
		r, _ := accounts.MonthlyGrant(ctx, "u1", billing.TierJourneyman, "2025-01", "evt_1")
		fmt.Println("monthly grant applied:", r.Applied, r.Amount)
	}
	c, _ := accounts.TopUp(ctx, "u1", 10)
	fmt.Println("balance:", c.Balance)

	_, err := accounts.Consume(ctx, "u1", 20)
	var short *billing.InsufficientCreditsError
	if errors.As(err, &short) {
		fmt.Println("refused: has", short.Balance, "needs", short.Requested)
	}
	c, _ = accounts.Consume(ctx, "u1", 3) // a Veo-3 render
	fmt.Println("balance:", c.Balance)
	// Output:
	// monthly grant applied: true 5
	// monthly grant applied: false 0
	// balance: 15
	// refused: has 15 needs 20
	// balance: 12
}

// Wiring the DynamoDB store against a local server (DynamoDB Local or
// moto_server); in production pass dynamodb.NewFromConfig(cfg) and leave
// the table to infrastructure code.
func ExampleNewDynamoAccounts() {
	ctx := context.Background()
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://localhost:8000"),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	table := billing.SingleTableConfig{} // table "billing", USER#<id>, TTL on expiresAt
	if err := billing.CreateSingleTable(ctx, client, table); err != nil {
		fmt.Println(err)
		return
	}
	accounts, err := billing.NewDynamoAccounts(billing.DynamoAccountsConfig{
		Client:       client,
		Table:        table,
		CreditExpiry: 90 * 24 * time.Hour, // unused credits expire 90 days after the last grant
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	applied, err := accounts.ApplyProviderEvent(ctx, billing.ProviderEvent{
		EventID: "evt_1", Created: time.Now(), UserID: "abc123", SubscriptionID: "sub_1", Customer: "cus_1",
		Tier: billing.TierJourneyman, Status: billing.ProviderActive,
		CurrentPeriodStart: time.Now(), CurrentPeriodEnd: time.Now().AddDate(0, 1, 0),
	})
	fmt.Println(applied, err)
	access, err := accounts.ResolveAccess(ctx, "abc123")
	fmt.Println(access.Tier, access.Reason, err)
}
