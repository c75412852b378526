package dynamostore_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeroConfigLogPathsSingleTable builds Payments and Accounts with
// only a client and a table name (no Logger, Clock, …: each documented
// default applies) and drives the paths that log: a due query meeting an
// undecodable subscription, a provider event older than the record, a
// repeated credits request, a repeated monthly grant. (Repository,
// History and SingleTableRepository meet undecodable items in per-user
// reads with their default options in the conformance suites'
// invalid-item cases; TestZeroConfigLogPathsStatusQuery adds the status
// query.)
func TestZeroConfigLogPathsSingleTable(t *testing.T) {
	client := dynamotest.Client(t)
	table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "defaults")}.WithDefaults()
	dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(table))
	ctx := t.Context()

	t.Run("payments", func(t *testing.T) {
		p, err := dynamostore.NewPayments(dynamostore.PaymentsConfig{Client: client, Table: dynamostore.SingleTableConfig{Table: table.Table}})
		require.NoError(t, err)
		due := time.Now().UTC().AddDate(0, 0, 7).Truncate(24 * time.Hour)
		for _, id := range []string{"good", "bad"} {
			s := newRecurring("acct-"+id, id, "999")
			s.NextPaymentDate, s.NextReminderDate = due, due.AddDate(0, 0, -3)
			_, err := p.CreateSubscription(ctx, s)
			require.NoError(t, err, "create %s", id)
		}
		// Another program writes an amount that does not decode.
		key := map[string]types.AttributeValue{"PK": acctS(table.AccountPrefix + "acct-bad"), "SK": acctS(layout.RecurringSK("bad", "999"))}
		_, err = client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table.Table), Key: key,
			UpdateExpression:          aws.String("SET PaymentAmount = :a"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": acctS("4,99")}})
		require.NoError(t, err)
		page, _, err := p.DuePaymentsByDate(ctx, due, "")
		require.NoError(t, err)
		require.Len(t, page, 1, "due %+v", page)
		assert.Equal(t, "good", page[0].SubscriptionID)
	})

	t.Run("accounts", func(t *testing.T) {
		a, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: client, Table: dynamostore.SingleTableConfig{Table: table.Table}})
		require.NoError(t, err)
		newer := provEvent("evt_2", time.Hour, entitlement.ProviderActive)
		applied, err := a.ApplyProviderEvent(ctx, newer)
		require.NoError(t, err)
		require.True(t, applied, "the first event")
		applied, err = a.ApplyProviderEvent(ctx, provEvent("evt_1", 0, entitlement.ProviderCanceled))
		require.NoError(t, err)
		assert.False(t, applied, "an older event is ignored")
		got, err := a.GetProviderSubscription(ctx, "u1", "sub_1")
		require.NoError(t, err)
		assert.Equal(t, entitlement.ProviderActive, got.Status)

		for range 2 {
			c, err := a.Grant(ctx, "u1", 5, "req-1")
			require.NoError(t, err)
			assert.Equal(t, int64(5), c.Balance, "a repeated request changes nothing")
		}
		for range 2 {
			_, err := a.MonthlyGrant(ctx, "u1", entitlement.TierSage, "2025-02", "evt_g")
			require.NoError(t, err)
		}
		c, err := a.Balance(ctx, "u1")
		require.NoError(t, err)
		assert.Equal(t, int64(5+15), c.Balance, "one monthly grant")
	})
}

// TestZeroConfigLogPathsStatusQuery: the legacy Repository with only a
// client and its tables skips, and logs to its default logger, an
// undecodable record a status query meets, and returns the others.
func TestZeroConfigLogPathsStatusQuery(t *testing.T) {
	repo, _, put := storetest.DynamoRawStores(t)
	at := time.Date(2024, 3, 15, 0, 0, 0, 0, time.UTC)
	good := billing.Period{UserID: "good", SubscriptionID: "g-1", BillingDate: at, Amount: billing.MustParseAmount("4.99"),
		Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(at), Term: billing.TermMonthly, AnchorDay: 15,
		ReceiptTierName: "Plus:v2", CreatedDate: at.AddDate(0, -1, 0), LastRunDate: at.AddDate(0, -1, 0)}
	require.NoError(t, repo.Add(t.Context(), &good))
	bad := good
	bad.UserID, bad.SubscriptionID = "garbled", "b-1"
	item, err := layout.EncodeItem(&bad)
	require.NoError(t, err)
	item[layout.AttrBillingAmount] = layout.StringAV("4,99")
	require.NoError(t, put(t.Context(), memory.SubscriptionsTable, item))

	var (
		got      []string
		reported int
	)
	q := billing.StatusQuery{Status: billing.StatusScheduled, Since: at.AddDate(0, 0, -1), Before: at.AddDate(0, 0, 1)}
	for range 10 {
		page, err := repo.QueryStatus(t.Context(), q)
		require.NoError(t, err)
		reported += len(page.Invalid)
		for _, s := range page.Items {
			got = append(got, s.SubscriptionID)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	assert.Equal(t, []string{"g-1"}, got, "the good record, not the bad one")
	assert.Equal(t, 1, reported, "the bad record reported in Page.Invalid")
}
