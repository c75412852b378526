package dynamostore

import (
	"context"
	"errors"
	"time"

	itel "github.com/dynabill/billing/internal/telemetry"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/dynabill/billing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// instrumentedDynamo is an API that times every call of the client
// it wraps (dynabill.dynamodb.duration) and traces it
// (dynabill.dynamodb.OPERATION spans). The DynamoDB Repository and History
// wrap their client with it; [ClientOf] returns the client inside.
type instrumentedDynamo struct {
	next API
	tel  *telemetry
}

var _ API = (*instrumentedDynamo)(nil)

// instrumentDynamo wraps c, unless it is wrapped already.
func instrumentDynamo(c API, tel *telemetry) API {
	if _, ok := c.(*instrumentedDynamo); ok {
		return c
	}
	return &instrumentedDynamo{next: c, tel: tel}
}

// unwrapDynamo returns the client inside an instrumented one, else c.
func unwrapDynamo(c API) API {
	if d, ok := c.(*instrumentedDynamo); ok {
		return d.next
	}
	return c
}

// observeDynamo runs call, the DynamoDB operation op, in a client span and
// records its duration. Every call of the store's client passes here, so it
// is also where a capacity refusal becomes [billing.ErrThrottled] (see
// throttled), once for all operations.
func observeDynamo[O any](ctx context.Context, t *telemetry, op string, call func(ctx context.Context) (O, error)) (O, error) {
	ctx, span := t.tracer.Start(ctx, itel.SpanDynamoDBPrefix+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("rpc.system", "aws-api"),
		attribute.String("rpc.service", "DynamoDB"),
		attribute.String("rpc.method", op),
	))
	start := time.Now()
	out, err := call(ctx)
	t.dynamoDuration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
		attribute.String("operation", op),
		attribute.Bool("error", err != nil),
	))
	if err != nil {
		itel.FailSpan(span, err)
		err = throttled(err)
	}
	span.End()
	return out, err
}

// throttledError is a DynamoDB error that is throttling: it matches
// [billing.ErrThrottled] as well as the SDK's own error.
type throttledError struct{ err error }

func (e *throttledError) Error() string   { return e.err.Error() }
func (e *throttledError) Unwrap() []error { return []error{e.err, billing.ErrThrottled} }

// throttled marks err as [billing.ErrThrottled] when DynamoDB refused the
// call for capacity (a table's or an index's throughput, or the account's
// request limit), also when one action of a transaction was: the SDK has
// retried it already, so the caller should back off.
func throttled(err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.ErrorCode() {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
		return &throttledError{err}
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			if c := aws.ToString(r.Code); c == "ThrottlingError" || c == "ProvisionedThroughputExceeded" {
				return &throttledError{err}
			}
		}
	}
	return err
}

func (d *instrumentedDynamo) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return observeDynamo(ctx, d.tel, "GetItem", func(ctx context.Context) (*dynamodb.GetItemOutput, error) {
		return d.next.GetItem(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return observeDynamo(ctx, d.tel, "PutItem", func(ctx context.Context) (*dynamodb.PutItemOutput, error) {
		return d.next.PutItem(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return observeDynamo(ctx, d.tel, "UpdateItem", func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return d.next.UpdateItem(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return observeDynamo(ctx, d.tel, "DeleteItem", func(ctx context.Context) (*dynamodb.DeleteItemOutput, error) {
		return d.next.DeleteItem(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return observeDynamo(ctx, d.tel, "Query", func(ctx context.Context) (*dynamodb.QueryOutput, error) {
		return d.next.Query(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return observeDynamo(ctx, d.tel, "Scan", func(ctx context.Context) (*dynamodb.ScanOutput, error) {
		return d.next.Scan(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return observeDynamo(ctx, d.tel, "BatchWriteItem", func(ctx context.Context) (*dynamodb.BatchWriteItemOutput, error) {
		return d.next.BatchWriteItem(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return observeDynamo(ctx, d.tel, "BatchGetItem", func(ctx context.Context) (*dynamodb.BatchGetItemOutput, error) {
		return d.next.BatchGetItem(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return observeDynamo(ctx, d.tel, "TransactWriteItems", func(ctx context.Context) (*dynamodb.TransactWriteItemsOutput, error) {
		return d.next.TransactWriteItems(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return observeDynamo(ctx, d.tel, "TransactGetItems", func(ctx context.Context) (*dynamodb.TransactGetItemsOutput, error) {
		return d.next.TransactGetItems(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return observeDynamo(ctx, d.tel, "CreateTable", func(ctx context.Context) (*dynamodb.CreateTableOutput, error) {
		return d.next.CreateTable(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return observeDynamo(ctx, d.tel, "DescribeTable", func(ctx context.Context) (*dynamodb.DescribeTableOutput, error) {
		return d.next.DescribeTable(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error) {
	return observeDynamo(ctx, d.tel, "DeleteTable", func(ctx context.Context) (*dynamodb.DeleteTableOutput, error) {
		return d.next.DeleteTable(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return observeDynamo(ctx, d.tel, "UpdateTimeToLive", func(ctx context.Context) (*dynamodb.UpdateTimeToLiveOutput, error) {
		return d.next.UpdateTimeToLive(ctx, in, optFns...)
	})
}

func (d *instrumentedDynamo) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return observeDynamo(ctx, d.tel, "DescribeTimeToLive", func(ctx context.Context) (*dynamodb.DescribeTimeToLiveOutput, error) {
		return d.next.DescribeTimeToLive(ctx, in, optFns...)
	})
}

// telemetry is the tracer and the DynamoDB call histogram of one store.
type telemetry struct {
	tracer         trace.Tracer
	dynamoDuration metric.Float64Histogram
}

// newTelemetry builds the store's instruments on mp and tp; nil means the
// global provider (a no-op unless the host installed one).
func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) *telemetry {
	m, tracer := itel.Providers(mp, tp)
	return &telemetry{tracer: tracer, dynamoDuration: itel.Histogram(m, itel.MetricDynamoDBDuration, "Duration of DynamoDB calls.")}
}
