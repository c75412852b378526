package dynamotest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
	if err != nil {
		t.Fatal(err)
	}
	return out.Item != nil
}

func count(t *testing.T, c *dynamodb.Client, table string) int {
	t.Helper()
	out, err := c.Scan(t.Context(), &dynamodb.ScanInput{TableName: &table, Select: types.SelectCount})
	if err != nil {
		t.Fatal(err)
	}
	return int(out.Count)
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
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
	if ItemSize(small) != 62 || ItemSize(big) != 3066 {
		t.Fatalf("sizes %d, %d", ItemSize(small), ItemSize(big))
	}
	type want struct {
		read, written int
		rcu, wcu      float64
	}
	step := func(name string, wt want) {
		t.Helper()
		if w.ItemsRead() != wt.read || w.ItemsWritten() != wt.written || w.ReadCapacity() != wt.rcu || w.WriteCapacity() != wt.wcu {
			t.Fatalf("after %s: %v; want read=%d/%.1f RCU written=%d/%.1f WCU", name, w, wt.read, wt.rcu, wt.written, wt.wcu)
		}
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
	if len(q.Items) != 2 {
		t.Fatalf("query: %d items", len(q.Items))
	}
	step("consistent query of 3128 bytes", want{4, 2, 3.5, 4})
	q = must[*dynamodb.QueryOutput](t)(w.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &table,
		KeyConditionExpression:    aws.String("user_id = :u"),
		FilterExpression:          aws.String("billing_status = :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("u1"), ":s": s("PAID")},
	}))
	if len(q.Items) != 0 || q.ScannedCount != 2 {
		t.Fatalf("filtered query: %d items, scanned %d", len(q.Items), q.ScannedCount)
	}
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
	if len(bg.Responses[table]) != 2 {
		t.Fatalf("batch get: %d items", len(bg.Responses[table]))
	}
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
	if sc.ScannedCount != 7 {
		t.Fatalf("scan: ScannedCount %d, want 7", sc.ScannedCount)
	}
	step("eventual scan of 7 items < 4 KB", want{17, 11, 10, 15})

	wantCalls := map[string]int{"PutItem": 2, "GetItem": 3, "Query": 2, "BatchWriteItem": 1, "TransactWriteItems": 1,
		"TransactGetItems": 1, "BatchGetItem": 1, "UpdateItem": 1, "DeleteItem": 1, "Scan": 1, "DescribeTable": 0}
	for op, n := range wantCalls {
		if got := w.Calls(op); got != n {
			t.Errorf("Calls(%s) = %d, want %d", op, got, n)
		}
	}
	if w.TotalCalls() != 14 || len(w.Log()) != 14 || w.Log()[0] != "PutItem" || w.Log()[13] != "Scan" {
		t.Errorf("TotalCalls %d, Log %v", w.TotalCalls(), w.Log())
	}
	w.AssertNoViolations(t)
	t.Log(w)

	w.Reset()
	if w.TotalCalls() != 0 || w.Calls("PutItem") != 0 || len(w.Log()) != 0 || w.ItemsRead() != 0 || w.ItemsWritten() != 0 || w.ReadCapacity() != 0 || w.WriteCapacity() != 0 {
		t.Errorf("after Reset: %v", w)
	}
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
		if got := ItemSize(map[string]types.AttributeValue{"a": tt.v}); got != 1+tt.want {
			t.Errorf("ItemSize(a=%#v) = %d, want %d", tt.v, got, 1+tt.want)
		}
	}
	units := []struct {
		got, want float64
	}{
		{writeUnits(0), 1}, {writeUnits(1024), 1}, {writeUnits(1025), 2}, {writeUnits(MaxItemSize), 400},
		{readUnits(0, true), 1}, {readUnits(4096, true), 1}, {readUnits(4097, true), 2}, {readUnits(4097, false), 1}, {readUnits(1, false), 0.5},
	}
	for i, u := range units {
		if u.got != u.want {
			t.Errorf("units[%d] = %v, want %v", i, u.got, u.want)
		}
	}
}
