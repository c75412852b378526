package dynamostore

import (
	"context"
	"iter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// API is the part of the DynamoDB client the library uses, with the
// SDK's own signatures: *dynamodb.Client satisfies it. It is the seam for
// counting, limit checking and fault injection in tests.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// queryPages yields the pages of in, in order: every query of the library
// reads its pages through it. It stops after the last page, after yielding
// the first error, or when the loop body stops. It advances
// in.ExclusiveStartKey, and the body may change in.Limit for the next page.
func queryPages(ctx context.Context, client API, in *dynamodb.QueryInput) iter.Seq2[*dynamodb.QueryOutput, error] {
	return func(yield func(*dynamodb.QueryOutput, error) bool) {
		for {
			out, err := client.Query(ctx, in)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(out, nil) || len(out.LastEvaluatedKey) == 0 {
				return
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
}

// queryAll returns the items of every page of in, or the first limit of
// them when limit > 0 (then each query asks for no more than are missing).
func queryAll(ctx context.Context, client API, in *dynamodb.QueryInput, limit int) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	for out, err := range queryPages(ctx, client, in) {
		if err != nil {
			return nil, err
		}
		items = append(items, out.Items...)
		if limit > 0 {
			if len(items) >= limit {
				break
			}
			in.Limit = aws.Int32(int32(limit - len(items)))
		}
	}
	return items, nil
}
