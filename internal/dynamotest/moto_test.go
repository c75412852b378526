package dynamotest

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
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

// TestFastMotoAnswersAsMoto sends one script of requests to the server as
// the tests start it (with its fast paths) and to moto without them
// (DYNAMOTEST_MOTO_PLAIN=1), and requires the same status and the same
// JSON body for every request: items of every attribute type, Queries of a
// table and of an index (ranges, order, filters, projections, pages),
// Scans in pages, the same condition expression with other values (a
// parse kept per expression must not keep the values), unused and invalid
// expressions (errors every time), updates and transactions.
func TestFastMotoAnswersAsMoto(t *testing.T) {
	t.Parallel()
	path, err := osEnv.lookPath(motoCommand)
	if err != nil {
		unavailable(t, osEnv, motoCommand+" is not on PATH; "+howTo)
	}
	fast, err := startMoto(path)
	require.NoError(t, err)
	t.Cleanup(fast.stop)
	plain, err := startMoto(path, "DYNAMOTEST_MOTO_PLAIN=1")
	require.NoError(t, err)
	t.Cleanup(plain.stop)

	for i, step := range fastMotoScript() {
		fs, fh, fb := rawDynamoDB(t, fast.endpoint, step.op, step.body)
		ps, ph, pb := rawDynamoDB(t, plain.endpoint, step.op, step.body)
		require.Equal(t, ps, fs, "step %d %s %s: status", i, step.op, step.body)
		require.Equal(t, ph.Get("Content-Type"), fh.Get("Content-Type"), "step %d %s: Content-Type", i, step.op)
		if step.op != "CreateTable" { // its creation time differs
			require.Equal(t, pb, fb, "step %d %s %s: body", i, step.op, step.body)
		}
		if step.status != 0 {
			require.Equal(t, step.status, fs, "step %d %s %s: %v", i, step.op, step.body, fb)
		}
	}
}

type scriptStep struct {
	op     string
	body   string
	status int // when not 0, the status both must answer
}

// fastMotoScript is the requests TestFastMotoAnswersAsMoto sends.
func fastMotoScript() []scriptStep {
	var steps []scriptStep
	add := func(status int, op, body string) { steps = append(steps, scriptStep{op, body, status}) }
	add(200, "CreateTable", `{"TableName":"t","BillingMode":"PAY_PER_REQUEST",
		"AttributeDefinitions":[{"AttributeName":"user_id","AttributeType":"S"},{"AttributeName":"billing_date","AttributeType":"S"},{"AttributeName":"due","AttributeType":"S"}],
		"KeySchema":[{"AttributeName":"user_id","KeyType":"HASH"},{"AttributeName":"billing_date","KeyType":"RANGE"}],
		"GlobalSecondaryIndexes":[{"IndexName":"by-due","KeySchema":[{"AttributeName":"due","KeyType":"HASH"},{"AttributeName":"billing_date","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}}]}`)
	add(200, "CreateTable", `{"TableName":"h","BillingMode":"PAY_PER_REQUEST",
		"AttributeDefinitions":[{"AttributeName":"n","AttributeType":"N"}],"KeySchema":[{"AttributeName":"n","KeyType":"HASH"}]}`)
	for u := range 4 {
		for d := range 5 {
			due := ""
			if (u+d)%2 == 0 {
				due = fmt.Sprintf(`,"due":{"S":"day-%d"}`, d%2)
			}
			add(200, "PutItem", fmt.Sprintf(`{"TableName":"t","Item":{"user_id":{"S":"u%d"},"billing_date":{"S":"2024-0%d-01"}%s,
				"amount":{"N":"%d.50"},"blob":{"B":"AAEC/w=="},"tags":{"SS":["a","b"]},"nums":{"NS":["1","2.5"]},"blobs":{"BS":["AA==","AQ=="]},
				"lines":{"L":[{"M":{"sku":{"S":"x"},"qty":{"N":"%d"}}},{"NULL":true},{"BOOL":false}]},
				"meta":{"M":{"on":{"BOOL":true},"note":{"S":"ü €"},"empty":{"M":{}}}},"status":{"S":"SCHEDULED"}}}`, u, d+1, due, 100*u+d, d))
		}
	}
	for n := range 6 {
		add(200, "PutItem", fmt.Sprintf(`{"TableName":"h","Item":{"n":{"N":"%d"},"v":{"S":"v%d"}}}`, 10-3*n, n))
	}
	for _, q := range []string{
		`"KeyConditionExpression":"user_id = :u","ExpressionAttributeValues":{":u":{"S":"u2"}}`,
		`"KeyConditionExpression":"user_id = :u","ExpressionAttributeValues":{":u":{"S":"nobody"}}`,
		`"KeyConditionExpression":"user_id = :u AND billing_date > :d","ExpressionAttributeValues":{":u":{"S":"u1"},":d":{"S":"2024-02-01"}},"ScanIndexForward":false`,
		`"KeyConditionExpression":"user_id = :u AND billing_date BETWEEN :a AND :b","ExpressionAttributeValues":{":u":{"S":"u3"},":a":{"S":"2024-02"},":b":{"S":"2024-04"}}`,
		`"KeyConditionExpression":"user_id = :u AND begins_with(billing_date, :p)","ExpressionAttributeValues":{":u":{"S":"u0"},":p":{"S":"2024-0"}},"ConsistentRead":true`,
		`"KeyConditionExpression":"user_id = :u","FilterExpression":"amount > :a","ExpressionAttributeValues":{":u":{"S":"u3"},":a":{"N":"302"}}`,
		`"KeyConditionExpression":"user_id = :u","ProjectionExpression":"billing_date, #m.note, lines[0]","ExpressionAttributeNames":{"#m":"meta"},"ExpressionAttributeValues":{":u":{"S":"u1"}}`,
		`"KeyConditionExpression":"user_id = :u","Limit":2,"ExpressionAttributeValues":{":u":{"S":"u2"}}`,
		`"KeyConditionExpression":"user_id = :u","Limit":2,"ExclusiveStartKey":{"user_id":{"S":"u2"},"billing_date":{"S":"2024-02-01"}},"ExpressionAttributeValues":{":u":{"S":"u2"}}`,
		`"IndexName":"by-due","KeyConditionExpression":"due = :d","ExpressionAttributeValues":{":d":{"S":"day-0"}}`,
		`"IndexName":"by-due","KeyConditionExpression":"due = :d AND billing_date < :b","ExpressionAttributeValues":{":d":{"S":"day-1"},":b":{"S":"2024-05"}},"ScanIndexForward":false`,
		`"IndexName":"by-due","KeyConditionExpression":"due = :d","Limit":3,"ExpressionAttributeValues":{":d":{"S":"day-0"}}`,
		`"IndexName":"by-due","KeyConditionExpression":"due = :d","Limit":3,"ExclusiveStartKey":{"due":{"S":"day-0"},"billing_date":{"S":"2024-03-01"},"user_id":{"S":"u0"}},"ExpressionAttributeValues":{":d":{"S":"day-0"}}`,
	} {
		add(200, "Query", `{"TableName":"t",`+q+`}`)
	}
	add(200, "Query", `{"TableName":"h","KeyConditionExpression":"n = :n","ExpressionAttributeValues":{":n":{"N":"7"}}}`)
	add(200, "Scan", `{"TableName":"t","Limit":7}`)
	add(200, "Scan", `{"TableName":"t","Limit":7,"ExclusiveStartKey":{"user_id":{"S":"u1"},"billing_date":{"S":"2024-02-01"}}}`)
	add(200, "Scan", `{"TableName":"h"}`)
	add(200, "Scan", `{"TableName":"h","Limit":2,"ExclusiveStartKey":{"n":{"N":"4"}}}`)
	add(200, "Scan", `{"TableName":"t","FilterExpression":"#s = :s AND size(tags) = :two","ExpressionAttributeNames":{"#s":"status"},"ExpressionAttributeValues":{":s":{"S":"SCHEDULED"},":two":{"N":"2"}},"Select":"COUNT"}`)
	// One condition expression, other values: the second and fourth fail.
	cond := func(want int, old, next string) {
		add(want, "UpdateItem", fmt.Sprintf(`{"TableName":"t","Key":{"user_id":{"S":"u1"},"billing_date":{"S":"2024-01-01"}},
			"UpdateExpression":"SET #s = :n, amount = amount + :one","ConditionExpression":"#s = :o AND attribute_exists(user_id)",
			"ExpressionAttributeNames":{"#s":"status"},"ExpressionAttributeValues":{":n":{"S":"%s"},":o":{"S":"%s"},":one":{"N":"1"}},"ReturnValues":"ALL_NEW"}`, next, old))
	}
	cond(200, "SCHEDULED", "PENDING")
	cond(400, "SCHEDULED", "COMPLETED")
	cond(200, "PENDING", "COMPLETED")
	cond(400, "PENDING", "ERROR")
	for range 2 { // errors each time, also once the expression was seen
		add(400, "PutItem", `{"TableName":"t","Item":{"user_id":{"S":"u9"},"billing_date":{"S":"x"}},"ConditionExpression":"attribute_not_exists(user_id)","ExpressionAttributeNames":{"#unused":"status"}}`)
		add(400, "PutItem", `{"TableName":"t","Item":{"user_id":{"S":"u9"},"billing_date":{"S":"x"}},"ConditionExpression":"attribute_not_exists(user_id) AND","ExpressionAttributeValues":{}}`)
		add(0, "PutItem", `{"TableName":"t","Item":{"user_id":{"S":"u9"},"billing_date":{"S":"x"}},"ConditionExpression":"attribute_not_exists(user_id)"}`)
	}
	add(200, "UpdateItem", `{"TableName":"t","Key":{"user_id":{"S":"u2"},"billing_date":{"S":"2024-03-01"}},
		"UpdateExpression":"SET #l = list_append(#l, :more), meta.note = :n REMOVE #b ADD tags :t","ExpressionAttributeNames":{"#l":"lines","#b":"blob"},
		"ExpressionAttributeValues":{":more":{"L":[{"S":"z"}]},":n":{"S":"changed"},":t":{"SS":["c"]}},"ReturnValues":"ALL_OLD"}`)
	add(200, "GetItem", `{"TableName":"t","Key":{"user_id":{"S":"u2"},"billing_date":{"S":"2024-03-01"}}}`)
	add(200, "GetItem", `{"TableName":"t","Key":{"user_id":{"S":"u2"},"billing_date":{"S":"2099-01-01"}}}`)
	add(200, "GetItem", `{"TableName":"h","Key":{"n":{"N":"1"}},"ProjectionExpression":"v"}`)
	add(400, "TransactWriteItems", `{"TransactItems":[
		{"Update":{"TableName":"t","Key":{"user_id":{"S":"u0"},"billing_date":{"S":"2024-01-01"}},"UpdateExpression":"SET #s = :c","ExpressionAttributeNames":{"#s":"status"},"ExpressionAttributeValues":{":c":{"S":"COMPLETED"}}}},
		{"ConditionCheck":{"TableName":"h","Key":{"n":{"N":"4"}},"ConditionExpression":"v = :v","ExpressionAttributeValues":{":v":{"S":"nope"}}}}]}`)
	add(200, "TransactWriteItems", `{"TransactItems":[
		{"Update":{"TableName":"t","Key":{"user_id":{"S":"u0"},"billing_date":{"S":"2024-01-01"}},"UpdateExpression":"SET #s = :c","ExpressionAttributeNames":{"#s":"status"},"ExpressionAttributeValues":{":c":{"S":"COMPLETED"}}}},
		{"ConditionCheck":{"TableName":"h","Key":{"n":{"N":"4"}},"ConditionExpression":"v = :v","ExpressionAttributeValues":{":v":{"S":"v2"}}}}]}`)
	add(200, "BatchWriteItem", `{"RequestItems":{"h":[{"PutRequest":{"Item":{"n":{"N":"100"},"v":{"S":"batch"}}}},{"DeleteRequest":{"Key":{"n":{"N":"7"}}}}]},"ReturnConsumedCapacity":"INDEXES"}`)
	add(200, "TransactGetItems", `{"TransactItems":[{"Get":{"TableName":"t","Key":{"user_id":{"S":"u3"},"billing_date":{"S":"2024-02-01"}}}},{"Get":{"TableName":"h","Key":{"n":{"N":"100"}}}},{"Get":{"TableName":"h","Key":{"n":{"N":"7"}}}}]}`)
	add(200, "PutItem", `{"TableName":"t","Item":{"user_id":{"S":"u5"},"billing_date":{"S":"2024-01-01"},"due":{"S":"day-0"}},"ReturnConsumedCapacity":"INDEXES","ReturnValues":"ALL_OLD"}`)
	add(200, "Query", `{"TableName":"t","IndexName":"by-due","KeyConditionExpression":"due = :d","ExpressionAttributeValues":{":d":{"S":"day-0"}},"ReturnConsumedCapacity":"TOTAL","Select":"COUNT"}`)
	add(200, "BatchGetItem", `{"RequestItems":{"t":{"Keys":[{"user_id":{"S":"u0"},"billing_date":{"S":"2024-01-01"}},{"user_id":{"S":"u3"},"billing_date":{"S":"2024-05-01"}}]}}}`)
	add(200, "Query", `{"TableName":"t","KeyConditionExpression":"user_id = :u","ExpressionAttributeValues":{":u":{"S":"u0"}}}`)
	add(200, "DeleteItem", `{"TableName":"t","Key":{"user_id":{"S":"u0"},"billing_date":{"S":"2024-01-01"}},"ReturnValues":"ALL_OLD"}`)
	add(200, "Scan", `{"TableName":"t"}`)
	return steps
}

// rawDynamoDB posts one DynamoDB JSON request and returns the status, the
// headers and the decoded body.
func rawDynamoDB(t *testing.T, endpoint, op, body string) (int, http.Header, any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint+"/", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(raw, &out), "%s: %s", op, raw)
	// The SDK checks the body against this checksum.
	require.Equal(t, strconv.FormatUint(uint64(crc32.ChecksumIEEE(raw)), 10), resp.Header.Get("X-Amz-Crc32"), "%s: %s", op, raw)
	return resp.StatusCode, resp.Header, out
}
