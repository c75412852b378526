package dynamotest

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// LimitError reports a request DynamoDB would reject, or a response it would
// never send, that the wrapper caught because the server under test (moto,
// DynamoDB Local) might not. A request that breaks a limit is not sent.
type LimitError struct {
	// Op is the operation, e.g. "BatchWriteItem".
	Op string
	// Limit says which limit was broken and by how much, e.g.
	// "at most 25 write requests in total (got 26)".
	Limit string
}

// Error implements error.
func (e *LimitError) Error() string {
	return "dynamotest: " + e.Op + " breaks a DynamoDB limit: " + e.Limit
}

func limitf(op, format string, args ...any) error {
	return &LimitError{Op: op, Limit: fmt.Sprintf(format, args...)}
}

func checkItemSize(op, where string, item map[string]types.AttributeValue) error {
	if n := ItemSize(item); n > MaxItemSize {
		return limitf(op, "item size at most %d bytes (%s is %d bytes)", MaxItemSize, where, n)
	}
	return nil
}

func checkBatchWrite(in *dynamodb.BatchWriteItemInput) error {
	const op = "BatchWriteItem"
	n := 0
	for table, reqs := range in.RequestItems {
		n += len(reqs)
		for i, r := range reqs {
			if r.PutRequest != nil {
				if err := checkItemSize(op, fmt.Sprintf("%s[%d]", table, i), r.PutRequest.Item); err != nil {
					return err
				}
			}
		}
	}
	switch {
	case n == 0:
		return limitf(op, "at least 1 write request (got 0)")
	case n > 25:
		return limitf(op, "at most 25 write requests in total across tables (got %d)", n)
	}
	return nil
}

func checkBatchGet(in *dynamodb.BatchGetItemInput) error {
	n := 0
	for _, ka := range in.RequestItems {
		n += len(ka.Keys)
	}
	if n == 0 || n > 100 {
		return limitf("BatchGetItem", "between 1 and 100 keys in total across tables (got %d)", n)
	}
	return nil
}

func checkLimit(op string, limit *int32) error {
	if limit != nil && *limit < 1 {
		return limitf(op, "Limit at least 1 (got %d)", *limit)
	}
	return nil
}

func checkPage(op string, items []map[string]types.AttributeValue) error {
	if n := pageSize(items); n > MaxPageSize {
		return limitf(op, "a page holds at most 1 MB (%d items, %d bytes returned)", len(items), n)
	}
	return nil
}

func (c *Wrapper) checkTransactWrite(ctx context.Context, in *dynamodb.TransactWriteItemsInput) error {
	const op = "TransactWriteItems"
	if n := len(in.TransactItems); n == 0 || n > 100 {
		return limitf(op, "between 1 and 100 actions (got %d)", n)
	}
	total := 0
	targets := make(map[string]int, len(in.TransactItems))
	for i, a := range in.TransactItems {
		var table string
		var key map[string]types.AttributeValue
		switch {
		case a.Put != nil:
			table = aws.ToString(a.Put.TableName)
			if err := checkItemSize(op, fmt.Sprintf("TransactItems[%d].Put", i), a.Put.Item); err != nil {
				return err
			}
			total += ItemSize(a.Put.Item)
			if len(in.TransactItems) == 1 {
				continue
			}
			names, err := c.keyNames(ctx, table)
			if err != nil {
				continue // unknown table: the server will say so
			}
			key = project(a.Put.Item, names)
		case a.Update != nil:
			table, key = aws.ToString(a.Update.TableName), a.Update.Key
			total += updateSize(key, a.Update.ExpressionAttributeValues, a.Update.ExpressionAttributeNames)
		case a.Delete != nil:
			table, key = aws.ToString(a.Delete.TableName), a.Delete.Key
			total += ItemSize(key)
		case a.ConditionCheck != nil:
			table, key = aws.ToString(a.ConditionCheck.TableName), a.ConditionCheck.Key
			total += ItemSize(key)
		default:
			continue
		}
		id := itemID(table, key)
		if j, dup := targets[id]; dup {
			return limitf(op, "no two actions on the same item (TransactItems[%d] and [%d] both target %s)", j, i, id)
		}
		targets[id] = i
	}
	if total > maxTransactSize {
		return limitf(op, "aggregate item size at most 4 MB (got %d bytes)", total)
	}
	return nil
}

func checkTransactGet(in *dynamodb.TransactGetItemsInput) error {
	const op = "TransactGetItems"
	if n := len(in.TransactItems); n == 0 || n > 100 {
		return limitf(op, "between 1 and 100 items (got %d)", n)
	}
	targets := make(map[string]int, len(in.TransactItems))
	for i, g := range in.TransactItems {
		if g.Get == nil {
			continue
		}
		id := itemID(aws.ToString(g.Get.TableName), g.Get.Key)
		if j, dup := targets[id]; dup {
			return limitf(op, "no two reads of the same item (TransactItems[%d] and [%d] both read %s)", j, i, id)
		}
		targets[id] = i
	}
	return nil
}

// keyNames returns the key attribute names of a table, from DescribeTable on
// the inner client, cached for the life of the wrapper. These lookups are not
// counted and not subject to faults.
func (c *Wrapper) keyNames(ctx context.Context, table string) ([]string, error) {
	c.mu.Lock()
	names, ok := c.keys[table]
	c.mu.Unlock()
	if ok {
		return names, nil
	}
	out, err := c.inner.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil, err
	}
	for _, k := range out.Table.KeySchema {
		names = append(names, aws.ToString(k.AttributeName))
	}
	c.mu.Lock()
	c.keys[table] = names
	c.mu.Unlock()
	return names, nil
}

func project(item map[string]types.AttributeValue, names []string) map[string]types.AttributeValue {
	key := make(map[string]types.AttributeValue, len(names))
	for _, n := range names {
		if v, ok := item[n]; ok {
			key[n] = v
		}
	}
	return key
}

// itemID is a readable, canonical identity for table + key, e.g.
// `billing-activity-1a2b3c-1{billing_date=S:2024-01-31T00:00:00Z user_id=S:u1}`.
// Numbers are normalised so that 1, 1.0 and 1e0 are the same key.
func itemID(table string, key map[string]types.AttributeValue) string {
	names := make([]string, 0, len(key))
	for n := range key {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(table)
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n)
		b.WriteByte('=')
		switch v := key[n].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("S:" + v.Value)
		case *types.AttributeValueMemberN:
			if r, ok := new(big.Rat).SetString(v.Value); ok {
				b.WriteString("N:" + r.RatString())
			} else {
				b.WriteString("N:" + v.Value)
			}
		case *types.AttributeValueMemberB:
			fmt.Fprintf(&b, "B:%x", v.Value)
		default:
			fmt.Fprintf(&b, "%T", v)
		}
	}
	b.WriteByte('}')
	return b.String()
}
