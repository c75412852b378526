package dynamostore

import (
	"context"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// userRead is a per-user read (ListByUser, Recent, History.ListByUser):
// one item that does not decode, written by another program, is skipped
// — logged at Warn and reported through [billing.ReportInvalidItem] — and
// never fails the read, so that it cannot stop the user's collections,
// listings or changes.
type userRead struct {
	client API
	logger *slog.Logger
	op     string // for the errors and the log: "list user u1"
	decode func(map[string]av.AttributeValue) (billing.Period, error)
}

// query returns the records of in's items that decode, in the query's
// order: every page, or with limit > 0 the first limit records.
//
// DynamoDB's Limit counts the items a query reads, the undecodable ones
// included, so a bad item must not take the place of a record: each query
// asks for the records still missing (limit minus those decoded), and the
// read goes on while records are missing and items remain. A bad item
// thus costs a further query of the items after it, never a record;
// items past the last record returned are not read, so a bad one there is
// not reported.
func (u userRead) query(ctx context.Context, in *dynamodb.QueryInput, limit int) ([]billing.Period, error) {
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	var out []billing.Period
	for page, err := range queryPages(ctx, u.client, in) {
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			sub, err := u.decode(sdkav.FromSDK(it))
			if err != nil {
				layout.SkipItem(ctx, u.logger, u.op, err)
				continue
			}
			out = append(out, sub)
		}
		if limit > 0 {
			if len(out) >= limit {
				return out[:limit], nil
			}
			in.Limit = aws.Int32(int32(limit - len(out)))
		}
	}
	if out == nil {
		out = []billing.Period{}
	}
	return out, nil
}
