package dynamotest

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The operations of API. Each counts the call, checks the request against
// DynamoDB's limits, applies the fault rules, forwards to the inner client
// and accounts for the response: see run.

// GetItem implements API.
func (c *Wrapper) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return run(ctx, c, call[*dynamodb.GetItemOutput]{
		op: "GetItem",
		do: func(ctx context.Context) (*dynamodb.GetItemOutput, error) { return c.inner.GetItem(ctx, in, optFns...) },
		account: func(out *dynamodb.GetItemOutput) error {
			c.usage(min(len(out.Item), 1), 0, ReadUnits(ItemSize(out.Item), aws.ToBool(in.ConsistentRead)), 0)
			return nil
		},
	})
}

// PutItem implements API.
func (c *Wrapper) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return run(ctx, c, call[*dynamodb.PutItemOutput]{
		op:    "PutItem",
		check: func(context.Context) error { return checkItemSize("PutItem", "Item", in.Item) },
		do:    func(ctx context.Context) (*dynamodb.PutItemOutput, error) { return c.inner.PutItem(ctx, in, optFns...) },
		account: func(out *dynamodb.PutItemOutput) error {
			c.usage(0, 1, 0, WriteUnits(max(ItemSize(in.Item), ItemSize(out.Attributes))))
			return nil
		},
	})
}

// UpdateItem implements API.
func (c *Wrapper) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return run(ctx, c, call[*dynamodb.UpdateItemOutput]{
		op: "UpdateItem",
		do: func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
			return c.inner.UpdateItem(ctx, in, optFns...)
		},
		account: func(out *dynamodb.UpdateItemOutput) error {
			size := updateSize(in.Key, in.ExpressionAttributeValues, in.ExpressionAttributeNames)
			c.usage(0, 1, 0, WriteUnits(max(size, ItemSize(out.Attributes))))
			return nil
		},
	})
}

// DeleteItem implements API.
func (c *Wrapper) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return run(ctx, c, call[*dynamodb.DeleteItemOutput]{
		op: "DeleteItem",
		do: func(ctx context.Context) (*dynamodb.DeleteItemOutput, error) {
			return c.inner.DeleteItem(ctx, in, optFns...)
		},
		account: func(out *dynamodb.DeleteItemOutput) error {
			c.usage(0, 1, 0, WriteUnits(max(ItemSize(in.Key), ItemSize(out.Attributes))))
			return nil
		},
	})
}

// Query implements API.
func (c *Wrapper) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return run(ctx, c, call[*dynamodb.QueryOutput]{
		op:    "Query",
		check: func(context.Context) error { return checkLimit("Query", in.Limit) },
		do:    func(ctx context.Context) (*dynamodb.QueryOutput, error) { return c.inner.Query(ctx, in, optFns...) },
		account: func(out *dynamodb.QueryOutput) error {
			c.usage(int(out.ScannedCount), 0, ReadUnits(pageSize(out.Items), aws.ToBool(in.ConsistentRead)), 0)
			return checkPage("Query", out.Items)
		},
	})
}

// Scan implements API.
func (c *Wrapper) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return run(ctx, c, call[*dynamodb.ScanOutput]{
		op:    "Scan",
		check: func(context.Context) error { return checkLimit("Scan", in.Limit) },
		do:    func(ctx context.Context) (*dynamodb.ScanOutput, error) { return c.inner.Scan(ctx, in, optFns...) },
		account: func(out *dynamodb.ScanOutput) error {
			c.usage(int(out.ScannedCount), 0, ReadUnits(pageSize(out.Items), aws.ToBool(in.ConsistentRead)), 0)
			return checkPage("Scan", out.Items)
		},
	})
}

// BatchWriteItem implements API. See also [Wrapper.Unprocessed].
func (c *Wrapper) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	var req *dynamodb.BatchWriteItemInput
	var forwarded, left map[string][]types.WriteRequest // sent to the server; returned unprocessed by it
	return run(ctx, c, call[*dynamodb.BatchWriteItemOutput]{
		op:    "BatchWriteItem",
		check: func(context.Context) error { return checkBatchWrite(in) },
		do: func(ctx context.Context) (*dynamodb.BatchWriteItemOutput, error) {
			req, forwarded = in, in.RequestItems
			var held map[string][]types.WriteRequest // kept back by an Unprocessed rule
			if keep := c.takeUnprocessed(); keep >= 0 {
				forwarded, held = splitBatch(in.RequestItems, keep)
				if len(forwarded) == 0 {
					return &dynamodb.BatchWriteItemOutput{UnprocessedItems: held}, nil
				}
				cp := *in
				cp.RequestItems = forwarded
				req = &cp
			}
			out, err := c.inner.BatchWriteItem(ctx, req, optFns...)
			if err != nil {
				return nil, err
			}
			left = out.UnprocessedItems
			if len(held) == 0 {
				return out, nil
			}
			merged := *out
			merged.UnprocessedItems = make(map[string][]types.WriteRequest, len(left)+len(held))
			for _, m := range []map[string][]types.WriteRequest{left, held} {
				for t, reqs := range m {
					merged.UnprocessedItems[t] = append(merged.UnprocessedItems[t], reqs...)
				}
			}
			return &merged, nil
		},
		account: func(*dynamodb.BatchWriteItemOutput) error {
			n, wcu := 0, 0.0
			for _, reqs := range forwarded {
				n, wcu = n+len(reqs), wcu+batchWriteUnits(reqs)
			}
			for _, reqs := range left {
				n, wcu = n-len(reqs), wcu-batchWriteUnits(reqs)
			}
			c.usage(0, n, 0, wcu)
			return nil
		},
	})
}

func batchWriteUnits(reqs []types.WriteRequest) float64 {
	u := 0.0
	for _, r := range reqs {
		switch {
		case r.PutRequest != nil:
			u += WriteUnits(ItemSize(r.PutRequest.Item))
		case r.DeleteRequest != nil:
			u += WriteUnits(ItemSize(r.DeleteRequest.Key))
		}
	}
	return u
}

// BatchGetItem implements API.
func (c *Wrapper) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return run(ctx, c, call[*dynamodb.BatchGetItemOutput]{
		op:    "BatchGetItem",
		check: func(context.Context) error { return checkBatchGet(in) },
		do: func(ctx context.Context) (*dynamodb.BatchGetItemOutput, error) {
			return c.inner.BatchGetItem(ctx, in, optFns...)
		},
		account: func(out *dynamodb.BatchGetItemOutput) error {
			items, rcu := 0, 0.0
			for table, ka := range in.RequestItems {
				consistent := aws.ToBool(ka.ConsistentRead)
				found := out.Responses[table]
				for _, it := range found {
					rcu += ReadUnits(ItemSize(it), consistent)
				}
				// Keys read but not found cost the minimum.
				missing := len(ka.Keys) - len(out.UnprocessedKeys[table].Keys) - len(found)
				rcu += float64(max(missing, 0)) * ReadUnits(0, consistent)
				items += len(found)
			}
			c.usage(items, 0, rcu, 0)
			return nil
		},
	})
}

// TransactWriteItems implements API. A Put's key is taken from its item with
// the table's key schema, learnt once per table with DescribeTable.
func (c *Wrapper) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return run(ctx, c, call[*dynamodb.TransactWriteItemsOutput]{
		op:      "TransactWriteItems",
		actions: len(in.TransactItems),
		check:   func(ctx context.Context) error { return c.checkTransactWrite(ctx, in) },
		do: func(ctx context.Context) (*dynamodb.TransactWriteItemsOutput, error) {
			return c.inner.TransactWriteItems(ctx, in, optFns...)
		},
		account: func(*dynamodb.TransactWriteItemsOutput) error {
			n, wcu := 0, 0.0
			for _, a := range in.TransactItems {
				switch {
				case a.Put != nil:
					n, wcu = n+1, wcu+2*WriteUnits(ItemSize(a.Put.Item))
				case a.Update != nil:
					u := a.Update
					n, wcu = n+1, wcu+2*WriteUnits(updateSize(u.Key, u.ExpressionAttributeValues, u.ExpressionAttributeNames))
				case a.Delete != nil:
					n, wcu = n+1, wcu+2*WriteUnits(ItemSize(a.Delete.Key))
				case a.ConditionCheck != nil:
					wcu += 2 * WriteUnits(ItemSize(a.ConditionCheck.Key))
				}
			}
			c.usage(0, n, 0, wcu)
			return nil
		},
	})
}

// TransactGetItems implements API.
func (c *Wrapper) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return run(ctx, c, call[*dynamodb.TransactGetItemsOutput]{
		op:      "TransactGetItems",
		actions: len(in.TransactItems),
		check:   func(context.Context) error { return checkTransactGet(in) },
		do: func(ctx context.Context) (*dynamodb.TransactGetItemsOutput, error) {
			return c.inner.TransactGetItems(ctx, in, optFns...)
		},
		account: func(out *dynamodb.TransactGetItemsOutput) error {
			items, rcu := 0, 0.0
			for i := range in.TransactItems {
				var item map[string]types.AttributeValue
				if i < len(out.Responses) {
					item = out.Responses[i].Item
				}
				items += min(len(item), 1)
				rcu += 2 * ReadUnits(ItemSize(item), true)
			}
			c.usage(items, 0, rcu, 0)
			return nil
		},
	})
}

// CreateTable implements API.
func (c *Wrapper) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return run(ctx, c, call[*dynamodb.CreateTableOutput]{
		op: "CreateTable",
		do: func(ctx context.Context) (*dynamodb.CreateTableOutput, error) {
			return c.inner.CreateTable(ctx, in, optFns...)
		},
	})
}

// DescribeTable implements API.
func (c *Wrapper) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return run(ctx, c, call[*dynamodb.DescribeTableOutput]{
		op: "DescribeTable",
		do: func(ctx context.Context) (*dynamodb.DescribeTableOutput, error) {
			return c.inner.DescribeTable(ctx, in, optFns...)
		},
	})
}

// DeleteTable implements API.
func (c *Wrapper) DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error) {
	return run(ctx, c, call[*dynamodb.DeleteTableOutput]{
		op: "DeleteTable",
		do: func(ctx context.Context) (*dynamodb.DeleteTableOutput, error) {
			return c.inner.DeleteTable(ctx, in, optFns...)
		},
	})
}

// UpdateTimeToLive implements API.
func (c *Wrapper) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return run(ctx, c, call[*dynamodb.UpdateTimeToLiveOutput]{
		op: "UpdateTimeToLive",
		do: func(ctx context.Context) (*dynamodb.UpdateTimeToLiveOutput, error) {
			return c.inner.UpdateTimeToLive(ctx, in, optFns...)
		},
	})
}

// DescribeTimeToLive implements API.
func (c *Wrapper) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return run(ctx, c, call[*dynamodb.DescribeTimeToLiveOutput]{
		op: "DescribeTimeToLive",
		do: func(ctx context.Context) (*dynamodb.DescribeTimeToLiveOutput, error) {
			return c.inner.DescribeTimeToLive(ctx, in, optFns...)
		},
	})
}
