package dynamotest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// puts returns n put requests for user u.
func puts(u string, n int) []types.WriteRequest {
	reqs := make([]types.WriteRequest, n)
	for i := range reqs {
		reqs[i].PutRequest = &types.PutRequest{Item: item(u, fmt.Sprintf("%03d", i), "PENDING")}
	}
	return reqs
}

func bigItem(u string, size int) map[string]types.AttributeValue {
	it := item(u, "big", "PENDING")
	it["data"] = s(strings.Repeat("x", size-ItemSize(it)-len("data")))
	return it
}

func TestLimits(t *testing.T) {
	t.Parallel()
	db := Client(t)
	a, b := newTable(t, db), newTable(t, db)

	var keys101 []map[string]types.AttributeValue
	for i := range 101 {
		keys101 = append(keys101, key("k", fmt.Sprint(i)))
	}
	var get101 []types.TransactGetItem
	var put101 []types.TransactWriteItem
	for i := range 101 {
		get101 = append(get101, types.TransactGetItem{Get: &types.Get{TableName: &a, Key: key("k", fmt.Sprint(i))}})
		put101 = append(put101, types.TransactWriteItem{Put: &types.Put{TableName: &a, Item: item("k", fmt.Sprint(i), "PENDING")}})
	}
	update := func(table string, k map[string]types.AttributeValue) *types.Update {
		return &types.Update{
			TableName: &table, Key: k, UpdateExpression: aws.String("SET billing_status = :s"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("PAID")},
		}
	}
	tests := []struct {
		name  string
		op    string // operation that must not reach the server; "" for no violation
		limit string // part of the message
		call  func(context.Context, API) error
	}{
		{"26 writes across two tables", "BatchWriteItem", "at most 25 write requests in total across tables (got 26)", func(ctx context.Context, c API) error {
			_, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{a: puts("x", 13), b: puts("y", 13)}})
			return err
		}},
		{"25 writes", "", "", func(ctx context.Context, c API) error {
			_, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{a: puts("x", 12), b: puts("y", 13)}})
			return err
		}},
		{"empty batch write", "BatchWriteItem", "at least 1", func(ctx context.Context, c API) error {
			_, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{a: nil}})
			return err
		}},
		{"oversized item in a batch", "BatchWriteItem", "item size at most 409600 bytes", func(ctx context.Context, c API) error {
			reqs := []types.WriteRequest{{PutRequest: &types.PutRequest{Item: bigItem("x", MaxItemSize+1)}}}
			_, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{a: reqs}})
			return err
		}},
		{"101 keys across two tables", "BatchGetItem", "got 101", func(ctx context.Context, c API) error {
			_, err := c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{a: {Keys: keys101[:60]}, b: {Keys: keys101[60:]}}})
			return err
		}},
		{"101 transaction actions", "TransactWriteItems", "between 1 and 100 actions (got 101)", func(ctx context.Context, c API) error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: put101})
			return err
		}},
		{"100 transaction actions", "", "", func(ctx context.Context, c API) error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: put101[:100]})
			return err
		}},
		{"empty transaction", "TransactWriteItems", "(got 0)", func(ctx context.Context, c API) error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{})
			return err
		}},
		{"Put and Update of the same item", "TransactWriteItems", "TransactItems[0] and [1] both target " + a + "{billing_date=S:1 user_id=S:dup}", func(ctx context.Context, c API) error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: &a, Item: item("dup", "1", "PENDING")}},
				{Update: update(a, key("dup", "1"))},
			}})
			return err
		}},
		{"ConditionCheck and Delete of the same item", "TransactWriteItems", "no two actions on the same item", func(ctx context.Context, c API) error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: &a, Item: item("other", "1", "PENDING")}},
				{ConditionCheck: &types.ConditionCheck{TableName: &b, Key: key("dup", "2"), ConditionExpression: aws.String("attribute_not_exists(user_id)")}},
				{Delete: &types.Delete{TableName: &b, Key: key("dup", "2")}},
			}})
			return err
		}},
		{"same key in two tables", "", "", func(ctx context.Context, c API) error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: &a, Item: item("same", "1", "PENDING")}},
				{Put: &types.Put{TableName: &b, Item: item("same", "1", "PENDING")}},
			}})
			return err
		}},
		{"oversized transaction Put", "TransactWriteItems", "TransactItems[0].Put is 409601 bytes", func(ctx context.Context, c API) error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: &a, Item: bigItem("big", MaxItemSize+1)}},
			}})
			return err
		}},
		{"transaction over 4 MB", "TransactWriteItems", "aggregate item size at most 4 MB", func(ctx context.Context, c API) error {
			var acts []types.TransactWriteItem
			for i := range 11 {
				it := bigItem("big", 390*kib)
				it["billing_date"] = s(fmt.Sprint(i))
				acts = append(acts, types.TransactWriteItem{Put: &types.Put{TableName: &a, Item: it}})
			}
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: acts})
			return err
		}},
		{"oversized PutItem", "PutItem", "Item is 409601 bytes", func(ctx context.Context, c API) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &a, Item: bigItem("big", MaxItemSize+1)})
			return err
		}},
		// moto rejects items over 405000 bytes (its estimate of the real limit).
		{"PutItem of 400000 bytes", "", "", func(ctx context.Context, c API) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &a, Item: bigItem("big", 400000)})
			return err
		}},
		{"101 transactional gets", "TransactGetItems", "(got 101)", func(ctx context.Context, c API) error {
			_, err := c.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: get101})
			return err
		}},
		{"two transactional gets of one item", "TransactGetItems", "no two reads of the same item", func(ctx context.Context, c API) error {
			_, err := c.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{get101[0], get101[0]}})
			return err
		}},
		{"Query Limit 0", "Query", "Limit at least 1 (got 0)", func(ctx context.Context, c API) error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{
				TableName: &a, Limit: aws.Int32(0), KeyConditionExpression: aws.String("user_id = :u"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("x")},
			})
			return err
		}},
		{"Scan Limit -1", "Scan", "(got -1)", func(ctx context.Context, c API) error {
			_, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: &a, Limit: aws.Int32(-1)})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := Wrap(db) // sees only what reaches the server
			w := Wrap(server)
			err := tt.call(t.Context(), w)
			if tt.op == "" {
				require.NoError(t, err)
				w.AssertNoViolations(t)
				return
			}
			var le *LimitError
			require.ErrorAs(t, err, &le, "got %v, want a LimitError from %s containing %q", err, tt.op, tt.limit)
			require.Equal(t, tt.op, le.Op, "got %v, want a LimitError from %s containing %q", err, tt.op, tt.limit)
			require.Contains(t, le.Limit, tt.limit, "got %v, want a LimitError from %s containing %q", err, tt.op, tt.limit)
			if v := w.Violations(); assert.Len(t, v, 1, "Violations() = %v, want [%v]", v, err) {
				assert.Same(t, err, v[0], "Violations() = %v, want [%v]", v, err)
			}
			assert.Zero(t, server.Calls(tt.op), "the request reached the server")
			r := &recordingTB{TB: t}
			w.AssertNoViolations(r)
			assert.Len(t, r.errors, 1, "AssertNoViolations reported %q", r.errors)
		})
	}
}

// bigPage answers every Query and Scan with the same items, like a server
// that does not stop a page at 1 MB.
type bigPage struct {
	API
	items []map[string]types.AttributeValue
}

func (p bigPage) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	n := int32(len(p.items))
	return &dynamodb.QueryOutput{Items: p.items, Count: n, ScannedCount: n}, nil
}

func (p bigPage) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	n := int32(len(p.items))
	return &dynamodb.ScanOutput{Items: p.items, Count: n, ScannedCount: n}, nil
}

func TestPageLimit(t *testing.T) {
	t.Parallel()
	three := []map[string]types.AttributeValue{bigItem("a", 350*kib), bigItem("b", 350*kib), bigItem("c", 350*kib)}
	w := Wrap(bigPage{items: three})
	_, err := w.Query(t.Context(), &dynamodb.QueryInput{})
	var le *LimitError
	require.ErrorAs(t, err, &le, "Query: got %v, want a page LimitError", err)
	require.Equal(t, "Query", le.Op, "Query: got %v, want a page LimitError", err)
	require.Contains(t, le.Limit, "at most 1 MB (3 items, 1075200 bytes returned)", "Query: got %v, want a page LimitError", err)
	_, err = w.Scan(t.Context(), &dynamodb.ScanInput{})
	require.ErrorAs(t, err, &le, "Scan: got %v, want a page LimitError", err)
	require.Equal(t, "Scan", le.Op, "Scan: got %v, want a page LimitError", err)
	assert.Len(t, w.Violations(), 2, "violations %v, %v", w.Violations(), w)
	assert.Equal(t, 6, w.ItemsRead(), "violations %v, %v", w.Violations(), w)
	assert.Equal(t, 2*131.5, w.ReadCapacity(), "violations %v, %v", w.Violations(), w)
	w = Wrap(bigPage{items: three[:2]})
	_, err = w.Query(t.Context(), &dynamodb.QueryInput{})
	require.NoError(t, err, "700 KB page")
}

// TestServerPagesAtOneMB records that the server (moto, DynamoDB Local)
// stops a page at 1 MB by itself, so the page limit guards only against
// servers that do not.
func TestServerPagesAtOneMB(t *testing.T) {
	t.Parallel()
	db := Client(t)
	table := newTable(t, db)
	w := Wrap(db)
	for i := range 3 {
		it := bigItem("u", 390*kib)
		it["billing_date"] = s(fmt.Sprint(i))
		must[*dynamodb.PutItemOutput](t)(w.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: it}))
	}
	q := must[*dynamodb.QueryOutput](t)(w.Query(t.Context(), &dynamodb.QueryInput{
		TableName: &table, KeyConditionExpression: aws.String("user_id = :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("u")},
	}))
	assert.NotEqual(t, 3, len(q.Items), "server returned %d items of 390 KB in one page (LastEvaluatedKey %v)", len(q.Items), q.LastEvaluatedKey)
	assert.NotNil(t, q.LastEvaluatedKey, "server returned %d items of 390 KB in one page (LastEvaluatedKey %v)", len(q.Items), q.LastEvaluatedKey)
	w.AssertNoViolations(t)
}

func TestItemSizeLimit(t *testing.T) {
	t.Parallel()
	assert.NoError(t, checkItemSize("PutItem", "Item", bigItem("x", MaxItemSize)), "400 KB item")
	assert.Error(t, checkItemSize("PutItem", "Item", bigItem("x", MaxItemSize+1)), "400 KB + 1 byte item accepted")
}
