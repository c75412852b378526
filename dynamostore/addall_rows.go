package dynamostore

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// rowReader reads the stored history rows an AddAll batch's rows may
// land on, for [layout.PlanHistoryRows].
type rowReader struct {
	client API
	bw     *batchWriter
	table  string
	// key is the item key of record i's history row at a last_run_date
	// key.
	key func(i int, lastRunDate string) map[string]types.AttributeValue
	// span is the query of record i's history rows from lo to hi (last_run_date
	// keys), consistent.
	span func(i int, lo, hi string) *dynamodb.QueryInput
}

// planRows places the history rows of recs (see [layout.PlanHistoryRows])
// over the rows stored: one consistent BatchGetItem per 100 records reads
// the row at each record's own key, and only a record whose key holds
// another row (a re-read record written back, another record of the same
// instant) costs a Query of the keys it may move to. want is the row
// record i writes at a last_run_date.
func (rr *rowReader) planRows(ctx context.Context, recs []billing.Period,
	want func(i int, at time.Time) (map[string]av.AttributeValue, error)) ([]layout.RowPlan, error) {
	keys := make([]map[string]types.AttributeValue, len(recs))
	for i := range recs {
		keys[i] = rr.key(i, layout.LastRunDateKey(&recs[i]))
	}
	read, err := readItems(ctx, rr.client, rr.bw, rr.table, keys)
	if err != nil {
		return nil, fmt.Errorf("billing: add all: reading the history rows at the batch's keys: %w", err)
	}
	own := sdkav.FromSDKItems(read)
	rows := map[string]map[string]av.AttributeValue{}
	for i := range recs {
		if own[i] == nil {
			continue
		}
		rows[recs[i].UserID+"\x00"+layout.LastRunDateKey(&recs[i])] = own[i]
		w, err := want(i, recs[i].LastRunDate)
		if err != nil {
			return nil, err
		}
		if layout.SameItem(own[i], w) {
			continue
		}
		lo, hi := layout.HistorySpanKeys(&recs[i])
		items, err := queryAll(ctx, rr.client, rr.span(i, lo, hi), 0)
		if err != nil {
			return nil, fmt.Errorf("billing: add all: reading the history rows after %s of %s: %w", layout.LastRunDateKey(&recs[i]), recs[i].Key(), err)
		}
		for _, it := range items {
			rows[recs[i].UserID+"\x00"+stringOf(it[layout.AttrLastRunDate])] = sdkav.FromSDK(it)
		}
	}
	return layout.PlanHistoryRows(recs, func(i int, key string) (map[string]av.AttributeValue, bool) {
		it, ok := rows[recs[i].UserID+"\x00"+key]
		return it, ok
	}, want)
}

// legacyRowReader is the rowReader of the legacy history table.
func (r *Repository) legacyRowReader(recs []billing.Period) *rowReader {
	return &rowReader{client: r.cfg.Client, bw: r.bw, table: r.cfg.Tables.History,
		key: func(i int, lrd string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{layout.AttrUserID: stringAV(recs[i].UserID), layout.AttrLastRunDate: stringAV(lrd)}
		},
		span: func(i int, lo, hi string) *dynamodb.QueryInput {
			expr := keyRange(layout.AttrUserID, recs[i].UserID, layout.AttrLastRunDate, lo, hi)
			return &dynamodb.QueryInput{TableName: &r.cfg.Tables.History, KeyConditionExpression: expr.KeyCondition(),
				ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ConsistentRead: aws.Bool(true)}
		}}
}

// keyRange is the key condition pk = pv and lo <= sk <= hi on string
// keys.
func keyRange(pk, pv, sk, lo, hi string) expression.Expression {
	return mustBuild(expression.NewBuilder().WithKeyCondition(expression.Key(pk).Equal(exprValue(layout.StringAV(pv))).
		And(expression.Key(sk).Between(exprValue(layout.StringAV(lo)), exprValue(layout.StringAV(hi))))))
}
