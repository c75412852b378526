package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// Day totals (billing.TotalsRepository) on DynamoDB. Each outcome adds to
// an item of its UTC day and of the shard of its user, in the transaction
// of the write that records it:
//
//	key                                  attributes
//	TOTALS#<day>#<shard>, "#"            collected_count, collected_amount (minor units), declined_count,
//	                                     declined_amount, waived_count, waived_amount, refunded_count,
//	                                     refunded_amount (numbers, ADDed), totals_day
//	TOTALS#<day>#<shard>, "R#<reason>"   declined_count (ADDed), decline_reason, totals_day
//
// The partition key is <day> as YYYY-MM-DD and <shard> in 0..shards-1;
// the reason is the processor's, cut to billing.MaxTotalsReason bytes, as
// the sort key text (no attribute name is built from it). Shards spread a
// day's writes: concurrent transactions writing one item cancel each
// other (TransactionConflict), and one partition takes about 1,000 WCU a
// second.
const (
	totalsPKPrefix     = "TOTALS#"
	totalsCountsSK     = "#"
	totalsReasonPrefix = "R#"
	// DefaultTotalsShards is the number of counter items a day's totals
	// are spread over unless configured.
	DefaultTotalsShards = 16
	// MaxTotalsShards bounds the shards of the day totals.
	MaxTotalsShards = 256
	// totalsTxRetries is how many times a transaction cancelled only by
	// a concurrent write of its items (TransactionConflict) is tried
	// again: nothing was written, and its conditions still fence.
	totalsTxRetries = 6
)

// Attribute names of the totals items.
const (
	attrTotalsDay      = "totals_day"
	attrDeclineReason  = "decline_reason"
	attrCollectedCount = "collected_count"
	attrDeclinedCount  = "declined_count"
	attrWaivedCount    = "waived_count"
	attrRefundedCount  = "refunded_count"
)

// totalsAttrs are the count and amount attributes of each outcome.
var totalsAttrs = map[layout.TotalsKind][2]string{
	layout.TotalsCollected: {attrCollectedCount, "collected_amount"},
	layout.TotalsDeclined:  {attrDeclinedCount, "declined_amount"},
	layout.TotalsWaived:    {attrWaivedCount, "waived_amount"},
	layout.TotalsRefunded:  {attrRefundedCount, "refunded_amount"},
}

// dayTotals writes and reads the totals items of one table, whose keys
// are the string attributes pk and sk.
type dayTotals struct {
	client API
	table  string
	pk, sk string
	shards int
}

func totalsPK(day time.Time, shard int) string {
	return totalsPKPrefix + day.UTC().Format(time.DateOnly) + "#" + strconv.Itoa(shard)
}

func (t *dayTotals) key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{t.pk: stringAV(pk), t.sk: stringAV(sk)}
}

// write is one record's write in a transaction: prev (nil for a record
// added) into next.
type write struct{ prev, next *billing.Period }

// actions returns the updates the writes of a transaction add to it (none
// when they record no outcome), with their txOps. Outcomes of one item
// (a user's records of one day) are added up into one update: a
// transaction may not write an item twice.
func (t *dayTotals) actions(writes ...write) ([]types.TransactWriteItem, []txOp) {
	if t == nil {
		return nil, nil
	}
	type sum struct {
		day    time.Time
		counts map[layout.TotalsKind][2]int64 // count, amount
		reason string
	}
	var order []string
	sums := map[string]*sum{}
	for _, w := range writes {
		d, ok := layout.TotalsOf(w.prev, w.next)
		if !ok {
			continue
		}
		pk := totalsPK(d.Day, layout.TotalsShard(w.next.UserID, t.shards))
		keys := []string{pk + "\x00" + totalsCountsSK}
		if d.Kind == layout.TotalsDeclined {
			keys = append(keys, pk+"\x00"+totalsReasonPrefix+d.Reason)
		}
		for n, k := range keys {
			s := sums[k]
			if s == nil {
				s = &sum{day: d.Day, counts: map[layout.TotalsKind][2]int64{}}
				sums[k] = s
				order = append(order, k)
			}
			c := s.counts[d.Kind]
			c[0]++
			c[1] += int64(d.Amount)
			s.counts[d.Kind] = c
			if n == 1 {
				s.reason = d.Reason
			}
		}
	}
	var items []types.TransactWriteItem
	var ops []txOp
	for _, k := range order {
		s := sums[k]
		pk, sk, _ := strings.Cut(k, "\x00")
		u := expression.Set(expression.Name(attrTotalsDay), exprValue(layout.StringAV(s.day.Format(time.DateOnly))))
		if sk == totalsCountsSK {
			for _, kind := range []layout.TotalsKind{layout.TotalsCollected, layout.TotalsDeclined, layout.TotalsWaived, layout.TotalsRefunded} {
				if c, ok := s.counts[kind]; ok {
					u = u.Add(expression.Name(totalsAttrs[kind][0]), exprValue(c[0])).
						Add(expression.Name(totalsAttrs[kind][1]), exprValue(c[1]))
				}
			}
		} else {
			u = u.Add(expression.Name(attrDeclinedCount), exprValue(s.counts[layout.TotalsDeclined][0])).
				Set(expression.Name(attrDeclineReason), exprValue(layout.StringAV(s.reason)))
		}
		items = append(items, types.TransactWriteItem{Update: t.update(pk, sk, u)})
		ops = append(ops, txOp{key: pk + " " + sk, reason: "day totals"})
	}
	return items, ops
}

func (t *dayTotals) update(pk, sk string, u expression.UpdateBuilder) *types.Update {
	expr := mustBuild(expression.NewBuilder().WithUpdate(u))
	return &types.Update{TableName: aws.String(t.table), Key: t.key(pk, sk), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}
}

// read returns the totals of the days of [from, to): one eventually
// consistent BatchGetItem per 100 counter items (days × shards).
func (t *dayTotals) read(ctx context.Context, from, to time.Time) ([]billing.DayTotal, error) {
	if t == nil {
		return nil, billing.ErrNoTotals
	}
	days, err := layout.TotalsDays(from, to)
	if err != nil {
		return nil, err
	}
	out := make([]billing.DayTotal, len(days))
	index := map[string]int{}
	var keys []map[string]types.AttributeValue
	for i, d := range days {
		out[i].Day = d
		index[d.Format(time.DateOnly)] = i
		for s := range t.shards {
			keys = append(keys, t.key(totalsPK(d, s), totalsCountsSK))
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), maxBatchGet)
		req := map[string]types.KeysAndAttributes{t.table: {Keys: keys[:n]}}
		keys = keys[n:]
		for tries := 0; len(req) > 0; tries++ {
			if tries > 0 {
				if err := sleepCtx(ctx, backoff(tries)); err != nil {
					return nil, err
				}
			}
			res, err := t.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("billing: totals: %w", err)
			}
			for _, item := range res.Responses[t.table] {
				day, ok := item[attrTotalsDay].(*types.AttributeValueMemberS)
				if !ok {
					continue
				}
				i, ok := index[day.Value]
				if !ok {
					continue
				}
				var one billing.DayTotal
				for kind, names := range totalsAttrs {
					tl := billing.Tally{Count: numberOf(item[names[0]]), Amount: billing.Amount(numberOf(item[names[1]]))}
					switch kind {
					case layout.TotalsCollected:
						one.Collected = tl
					case layout.TotalsDeclined:
						one.Declined = tl
					case layout.TotalsWaived:
						one.Waived = tl
					case layout.TotalsRefunded:
						one.Refunded = tl
					}
				}
				layout.MergeTotals(&out[i], one)
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// reasons returns the reasons of day's declines: one query per shard.
func (t *dayTotals) reasons(ctx context.Context, day time.Time) ([]billing.ReasonCount, error) {
	if t == nil {
		return nil, billing.ErrNoTotals
	}
	m := map[string]int64{}
	for s := range t.shards {
		kc := expression.Key(t.pk).Equal(exprValue(totalsPK(day.UTC().Truncate(24*time.Hour), s))).
			And(expression.Key(t.sk).BeginsWith(totalsReasonPrefix))
		expr := mustBuild(expression.NewBuilder().WithKeyCondition(kc))
		in := &dynamodb.QueryInput{TableName: aws.String(t.table), KeyConditionExpression: expr.KeyCondition(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}
		for {
			res, err := t.client.Query(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("billing: decline reasons: %w", err)
			}
			for _, item := range res.Items {
				sk, _ := item[t.sk].(*types.AttributeValueMemberS)
				if sk == nil {
					continue
				}
				m[strings.TrimPrefix(sk.Value, totalsReasonPrefix)] += numberOf(item[attrDeclinedCount])
			}
			if len(res.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = res.LastEvaluatedKey
		}
	}
	out := make([]billing.ReasonCount, 0, len(m))
	for r, n := range m {
		out = append(out, billing.ReasonCount{Reason: r, Count: n})
	}
	layout.SortReasons(out)
	return out, nil
}

func numberOf(v types.AttributeValue) int64 {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	i, _ := strconv.ParseInt(n.Value, 10, 64)
	return i
}

// onlyTxConflict reports whether err is a transaction cancelled only
// because another transaction was writing one of its items: nothing was
// written, no condition failed.
func onlyTxConflict(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	conflict := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case codeTxConflict:
			conflict = true
		case "", "None":
		default:
			return false
		}
	}
	return conflict
}

// transact runs in, trying again (after a jittered pause) a transaction
// cancelled only by TransactionConflict when it writes day totals: the
// counter items every collection of a shard's day shares make such
// conflicts frequent, and a retry is safe since nothing was written and
// the record's conditions still fence.
func transact(ctx context.Context, client API, in *dynamodb.TransactWriteItemsInput, totals bool) error {
	for try := 0; ; try++ {
		_, err := client.TransactWriteItems(ctx, in)
		if err == nil || !totals || try == totalsTxRetries || !onlyTxConflict(err) {
			return err
		}
		if err := sleepCtx(ctx, backoff(try+1)); err != nil {
			return err
		}
	}
}

// backoff is a full-jitter pause before try (from 1): up to 10 ms
// doubled per try.
func backoff(try int) time.Duration {
	return time.Duration(rand.Int64N(int64(10*time.Millisecond) << min(try-1, 6)))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// TotalsTableDefinition is the table of the day totals of the legacy
// layout (see [TableConfig.Totals]): key pk and sk (strings), on-demand
// billing. Nil when cfg keeps no totals.
func TotalsTableDefinition(cfg TableConfig) *dynamodb.CreateTableInput {
	cfg = cfg.WithDefaults()
	if cfg.Totals == "" {
		return nil
	}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(cfg.Totals),
		AttributeDefinitions: []types.AttributeDefinition{attrDef(totalsTablePK), attrDef(totalsTableSK)},
		KeySchema:            []types.KeySchemaElement{keyElem(totalsTablePK, types.KeyTypeHash), keyElem(totalsTableSK, types.KeyTypeRange)},
		BillingMode:          types.BillingModePayPerRequest,
	}
}

// Key attributes of the legacy layout's totals table.
const (
	totalsTablePK = "pk"
	totalsTableSK = "sk"
)

// Totals implements [billing.TotalsRepository]: [billing.ErrNoTotals]
// unless [TableConfig.Totals] names the totals table.
func (r *Repository) Totals(ctx context.Context, from, to time.Time) ([]billing.DayTotal, error) {
	return r.totals.read(ctx, from, to)
}

// DeclineReasons implements [billing.TotalsRepository]:
// [billing.ErrNoTotals] unless [TableConfig.Totals] names the totals
// table.
func (r *Repository) DeclineReasons(ctx context.Context, day time.Time) ([]billing.ReasonCount, error) {
	return r.totals.reasons(ctx, day)
}

var _ billing.TotalsRepository = (*Repository)(nil)

// Totals implements [billing.TotalsRepository]: [billing.ErrNoTotals]
// unless [SingleTableStoreConfig.Totals] is set.
func (r *SingleTableRepository) Totals(ctx context.Context, from, to time.Time) ([]billing.DayTotal, error) {
	return r.totals.read(ctx, from, to)
}

// DeclineReasons implements [billing.TotalsRepository]:
// [billing.ErrNoTotals] unless [SingleTableStoreConfig.Totals] is set.
func (r *SingleTableRepository) DeclineReasons(ctx context.Context, day time.Time) ([]billing.ReasonCount, error) {
	return r.totals.reasons(ctx, day)
}

var _ billing.TotalsRepository = (*SingleTableRepository)(nil)
