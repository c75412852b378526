package dynamostore_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/require"
)

// operatorWaive is an operator's keyed waive of period of user.
func operatorWaive(user, period string) billing.PeriodRequest {
	return billing.PeriodRequest{UserRequest: billing.UserRequest{UserID: user, RequestKey: "console-w1",
		Operator: "ann@example.com", Reason: "goodwill: outage on the 3rd"}, PeriodID: period}
}

// requireOperatorRow checks the raw history row of an operator's waive:
// data_operator and data_reason as strings, the request recorded.
func requireOperatorRow(t *testing.T, row map[string]types.AttributeValue) {
	t.Helper()
	require.Equal(t, avS("ann@example.com"), row[layout.AttrOperator])
	require.Equal(t, avS("goodwill: outage on the 3rd"), row[layout.AttrReason])
	require.Contains(t, row[layout.AttrRequest].(*types.AttributeValueMemberS).Value, "Op=waive")
}

// TestDynamoOperatorOnHistoryRowOnly: on the legacy tables an operator's
// waive writes who and why on its history row, as data_operator and
// data_reason, and not on the billing-activity item, whose other bytes
// (a legacy writer's data_ attributes among them) stay.
func TestDynamoOperatorOnHistoryRowOnly(t *testing.T) {
	t.Parallel()
	e := newLegacyEnv(t, time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC))
	before := legacyItem("op-user", "op-jan", billing.StatusError)
	before[layout.AttrInitialRunDate] = avS("2024-01-31T15:00:00Z")
	e.put(t, before)

	ch, err := e.c.Periods().Waive(t.Context(), operatorWaive("op-user", "op-jan"))
	require.NoError(t, err)
	require.Equal(t, billing.StatusWaived, ch.Changes[0].After.Status)
	after := e.get(t, "op-user", legacyBillingDate)
	requireOnlyChanged(t, before, after, layout.AttrBillingStatus, layout.AttrLastRunDate, layout.AttrCompletionDate)
	require.NotContains(t, after, layout.AttrOperator)

	out, err := e.client.Query(t.Context(), &dynamodb.QueryInput{
		TableName: aws.String(e.tables.History), KeyConditionExpression: aws.String("user_id = :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": avS("op-user")}, ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	require.Len(t, out.Items, 1)
	row := out.Items[0]
	requireOperatorRow(t, row)
	require.Equal(t, avS("legacy-api"), row["data_source"], "the item's own data_ attributes go on too")

}

// TestSingleTableOperatorOnHistoryRowOnly: the same on the single table.
func TestSingleTableOperatorOnHistoryRowOnly(t *testing.T) {
	t.Parallel()
	e := newSingleWriteBackEnv(t, time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC))
	ref := layout.SubscriptionRef{AccountID: "op-acc", SubscriptionID: "s1", SKU: "STREAM"}
	bd := time.Date(2024, 1, 31, 15, 0, 0, 0, time.UTC)
	rec := billing.Period{UserID: ref.UserID(), SubscriptionID: "op-period-jan", BillingDate: bd,
		Amount: billing.MustParseAmount("4.99"), Status: billing.StatusError, BillingPeriod: "01/2024",
		Term: billing.TermMonthly, AnchorDay: 31, ReceiptTierName: "Plus:v2", PaymentError: "declined",
		InitialRunDate: bd, CreatedDate: bd.AddDate(0, -1, 0), LastRunDate: bd}
	require.NoError(t, e.repo.Add(t.Context(), &rec))
	pk, periodSK := "ACC#op-acc", "PER#s1#SKU#STREAM#"+legacyBillingDate
	before := e.get(t, pk, periodSK)

	_, err := e.c.Periods().Waive(t.Context(), operatorWaive(ref.UserID(), "op-period-jan"))
	require.NoError(t, err)
	after := e.get(t, pk, periodSK)
	require.NotContains(t, after, layout.AttrOperator)
	require.NotContains(t, after, layout.AttrReason)
	require.Equal(t, avS("WAIVED"), after[layout.AttrBillingStatus])
	require.Equal(t, len(before), len(after)-1, "completion_date added, nothing else")

	out, err := e.client.Query(t.Context(), &dynamodb.QueryInput{
		TableName: aws.String(e.table), KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :h)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(pk), ":h": avS(layout.SKHistoryPrefix)}, ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	var waived []map[string]types.AttributeValue
	for _, it := range out.Items {
		if it[layout.AttrBillingStatus].(*types.AttributeValueMemberS).Value == "WAIVED" {
			waived = append(waived, it)
		} else {
			require.NotContains(t, it, layout.AttrOperator, "a row written without one")
		}
	}
	require.Len(t, waived, 1)
	requireOperatorRow(t, waived[0])
}
