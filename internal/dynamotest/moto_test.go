package dynamotest

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTransactionCancelLeavesItems: a TransactWriteItems cancelled by its
// last condition leaves every item it named as it was (an update in place,
// a put of a new item, a put over an item, a delete) and the items it did
// not name untouched; one whose conditions hold writes them all. The
// serialized server backs up a transaction's items instead of moto's copy
// of its tables (serializedMoto); this is its rollback.
func TestTransactionCancelLeavesItems(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := Client(t)
	in := billingActivity(t)
	CreateTable(t, c, in)
	table := in.TableName
	key := func(user string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"user_id": s(user), "billing_date": s("2024-01-31T00:00:00Z")}
	}
	item := func(user, status string) map[string]types.AttributeValue {
		it := key(user)
		it["billing_status"] = s(status)
		return it
	}
	for _, u := range []string{"updated", "overwritten", "deleted", "checked", "bystander"} {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: item(u, "SCHEDULED")})
		require.NoError(t, err)
	}
	all := func() map[string]string {
		t.Helper()
		out, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: table, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		got := map[string]string{}
		for _, it := range out.Items {
			got[it["user_id"].(*types.AttributeValueMemberS).Value] = it["billing_status"].(*types.AttributeValueMemberS).Value
		}
		return got
	}
	before := all()
	require.Len(t, before, 5)

	writes := func(checkStatus string) *dynamodb.TransactWriteItemsInput {
		return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{TableName: table, Key: key("updated"), UpdateExpression: aws.String("SET billing_status = :s"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("COMPLETED")}}},
			{Put: &types.Put{TableName: table, Item: item("new", "SCHEDULED")}},
			{Put: &types.Put{TableName: table, Item: item("overwritten", "ERROR")}},
			{Delete: &types.Delete{TableName: table, Key: key("deleted")}},
			{ConditionCheck: &types.ConditionCheck{TableName: table, Key: key("checked"), ConditionExpression: aws.String("billing_status = :c"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":c": s(checkStatus)}}},
		}}
	}
	_, err := c.TransactWriteItems(ctx, writes("PENDING"))
	var tce *types.TransactionCanceledException
	require.True(t, errors.As(err, &tce), "the last condition fails: %v", err)
	assert.Equal(t, before, all(), "a cancelled transaction changes nothing")

	_, err = c.TransactWriteItems(ctx, writes("SCHEDULED"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"updated": "COMPLETED", "new": "SCHEDULED", "overwritten": "ERROR", "checked": "SCHEDULED", "bystander": "SCHEDULED"}, all())
}
