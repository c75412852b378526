package dynamotest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func key(user, date string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"user_id": s(user), "billing_date": s(date)}
}

func item(user, date, status string) map[string]types.AttributeValue {
	m := key(user, date)
	m["billing_status"] = s(status)
	return m
}

// newTable creates a billing-activity table and returns its name.
func newTable(t *testing.T, c *dynamodb.Client) string {
	t.Helper()
	in := billingActivity(t)
	CreateTable(t, c, in)
	return *in.TableName
}

// exists reads an item straight from the server, bypassing any wrapper.
func exists(t *testing.T, c *dynamodb.Client, table string, k map[string]types.AttributeValue) bool {
	t.Helper()
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: k, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item != nil
}

func count(t *testing.T, c *dynamodb.Client, table string) int {
	t.Helper()
	out, err := c.Scan(t.Context(), &dynamodb.ScanInput{TableName: &table, Select: types.SelectCount})
	require.NoError(t, err)
	return int(out.Count)
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

func TestCounting(t *testing.T) {
	t.Parallel()
	db := Client(t)
	table := newTable(t, db)
	w := Wrap(db)
	ctx := t.Context()

	small := item("u1", "2024-01-31T00:00:00Z", "PENDING") // 62 bytes
	big := item("u1", "2024-02-29T00:00:00Z", "PENDING")
	big["data"] = s(strings.Repeat("x", 3000)) // 3066 bytes: 3 WCU, 1 RCU
	require.Equal(t, 62, ItemSize(small), "size of small")
	require.Equal(t, 3066, ItemSize(big), "size of big")
	type want struct {
		read, written int
		rcu, wcu      float64
	}
	step := func(name string, wt want) {
		t.Helper()
		require.Equal(t, wt.read, w.ItemsRead(), "after %s: %v; items read", name, w)
		require.Equal(t, wt.written, w.ItemsWritten(), "after %s: %v; items written", name, w)
		require.Equal(t, wt.rcu, w.ReadCapacity(), "after %s: %v; RCU", name, w)
		require.Equal(t, wt.wcu, w.WriteCapacity(), "after %s: %v; WCU", name, w)
	}
	must[*dynamodb.PutItemOutput](t)(w.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: small}))
	must[*dynamodb.PutItemOutput](t)(w.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: big}))
	step("2 puts", want{0, 2, 0, 4})

	must[*dynamodb.GetItemOutput](t)(w.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("u1", "2024-01-31T00:00:00Z"), ConsistentRead: aws.Bool(true)}))
	must[*dynamodb.GetItemOutput](t)(w.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("u1", "2024-02-29T00:00:00Z")}))
	must[*dynamodb.GetItemOutput](t)(w.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("nobody", "x"), ConsistentRead: aws.Bool(true)}))
	step("3 gets (consistent, eventual, consistent miss)", want{2, 2, 2.5, 4})

	q := must[*dynamodb.QueryOutput](t)(w.Query(ctx, &dynamodb.QueryInput{
		TableName: &table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("user_id = :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("u1")},
	}))
	require.Len(t, q.Items, 2, "query")
	step("consistent query of 3128 bytes", want{4, 2, 3.5, 4})
	q = must[*dynamodb.QueryOutput](t)(w.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &table,
		KeyConditionExpression:    aws.String("user_id = :u"),
		FilterExpression:          aws.String("billing_status = :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("u1"), ":s": s("PAID")},
	}))
	require.Empty(t, q.Items, "filtered query")
	require.Equal(t, int32(2), q.ScannedCount, "filtered query: scanned")
	step("filtered query (ScannedCount counts)", want{6, 2, 4, 4})

	var batch []types.WriteRequest
	for i := range 5 {
		batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: item("u2", fmt.Sprint(i), "PENDING")}})
	}
	must[*dynamodb.BatchWriteItemOutput](t)(w.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: batch}}))
	step("batch of 5", want{6, 7, 4, 9})

	must[*dynamodb.TransactWriteItemsOutput](t)(w.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &table, Item: item("u3", "1", "PENDING")}},
		{Update: &types.Update{
			TableName: &table, Key: key("u1", "2024-01-31T00:00:00Z"),
			UpdateExpression:          aws.String("SET billing_status = :s"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("PAID")},
		}},
	}}))
	step("transaction of 2 (doubled)", want{6, 9, 4, 13})

	must[*dynamodb.TransactGetItemsOutput](t)(w.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
		{Get: &types.Get{TableName: &table, Key: key("u1", "2024-01-31T00:00:00Z")}},
		{Get: &types.Get{TableName: &table, Key: key("u3", "1")}},
	}}))
	step("transactional get of 2 (doubled)", want{8, 9, 8, 13})

	bg := must[*dynamodb.BatchGetItemOutput](t)(w.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {Keys: []map[string]types.AttributeValue{key("u2", "0"), key("u2", "1"), key("u2", "missing")}},
	}}))
	require.Len(t, bg.Responses[table], 2, "batch get")
	step("eventual batch get of 2 + 1 miss", want{10, 9, 9.5, 13})

	must[*dynamodb.UpdateItemOutput](t)(w.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: key("u2", "0"),
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "billing_status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("PAID")},
	}))
	must[*dynamodb.DeleteItemOutput](t)(w.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key("u2", "1")}))
	step("update + delete", want{10, 11, 9.5, 15})

	sc := must[*dynamodb.ScanOutput](t)(w.Scan(ctx, &dynamodb.ScanInput{TableName: &table}))
	require.Equal(t, int32(7), sc.ScannedCount, "scan: ScannedCount")
	step("eventual scan of 7 items < 4 KB", want{17, 11, 10, 15})

	wantCalls := map[string]int{"PutItem": 2, "GetItem": 3, "Query": 2, "BatchWriteItem": 1, "TransactWriteItems": 1,
		"TransactGetItems": 1, "BatchGetItem": 1, "UpdateItem": 1, "DeleteItem": 1, "Scan": 1, "DescribeTable": 0}
	for op, n := range wantCalls {
		assert.Equal(t, n, w.Calls(op), "Calls(%s)", op)
	}
	assert.Equal(t, 14, w.TotalCalls(), "TotalCalls %d, Log %v", w.TotalCalls(), w.Log())
	if assert.Len(t, w.Log(), 14, "TotalCalls %d, Log %v", w.TotalCalls(), w.Log()) {
		assert.Equal(t, "PutItem", w.Log()[0], "Log %v", w.Log())
		assert.Equal(t, "Scan", w.Log()[13], "Log %v", w.Log())
	}
	w.AssertNoViolations(t)
	t.Log(w)

	w.Reset()
	assert.Zero(t, w.TotalCalls(), "after Reset: %v", w)
	assert.Zero(t, w.Calls("PutItem"), "after Reset: %v", w)
	assert.Empty(t, w.Log(), "after Reset: %v", w)
	assert.Zero(t, w.ItemsRead(), "after Reset: %v", w)
	assert.Zero(t, w.ItemsWritten(), "after Reset: %v", w)
	assert.Zero(t, w.ReadCapacity(), "after Reset: %v", w)
	assert.Zero(t, w.WriteCapacity(), "after Reset: %v", w)
}

func TestItemSize(t *testing.T) {
	t.Parallel()
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	tests := []struct {
		v    types.AttributeValue
		want int // value size; the attribute name "a" adds 1
	}{
		{s("abc"), 3},
		{s(""), 0},
		{s("é"), 2},
		{n("123"), 3},
		{n("-0.00120"), 2},
		{n("1e10"), 2},
		{n("0"), 1},
		{n("12345678901234567890"), 11},
		{&types.AttributeValueMemberB{Value: []byte{1, 2, 3}}, 3},
		{&types.AttributeValueMemberBOOL{Value: true}, 1},
		{&types.AttributeValueMemberNULL{Value: true}, 1},
		{&types.AttributeValueMemberL{Value: []types.AttributeValue{s("x"), n("1")}}, 3 + 2 + 3},
		{&types.AttributeValueMemberL{}, 3},
		{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": s("vv")}}, 3 + 1 + 1 + 2},
		{&types.AttributeValueMemberSS{Value: []string{"a", "bc"}}, 3},
		{&types.AttributeValueMemberNS{Value: []string{"1", "22"}}, 4},
		{&types.AttributeValueMemberBS{Value: [][]byte{{1, 2}, {3}}}, 3},
	}
	for _, tt := range tests {
		assert.Equal(t, 1+tt.want, ItemSize(map[string]types.AttributeValue{"a": tt.v}), "ItemSize(a=%#v)", tt.v)
	}
	units := []struct {
		got, want float64
	}{
		{WriteUnits(0), 1}, {WriteUnits(1024), 1}, {WriteUnits(1025), 2}, {WriteUnits(MaxItemSize), 400},
		{ReadUnits(0, true), 1}, {ReadUnits(4096, true), 1}, {ReadUnits(4097, true), 2}, {ReadUnits(4097, false), 1}, {ReadUnits(1, false), 0.5},
	}
	for i, u := range units {
		assert.Equal(t, u.want, u.got, "units[%d]", i)
	}
}
