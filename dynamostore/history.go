package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// History is the [History] on the billing-activity-history table.
type History struct {
	cfg Config
	bw  *batchWriter
}

var _ billing.History = (*History)(nil)

// NewHistory returns a History on cfg.Tables.History.
func NewHistory(cfg Config) (*History, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &History{cfg: cfg, bw: cfg.batchWriter()}, nil
}

func historyKey(sub *billing.Period) string {
	return "user_id=" + sub.UserID + " last_run_date=" + layout.LastRunDateKey(sub)
}

// Add implements [History.Add].
func (h *History) Add(ctx context.Context, sub *billing.Period) error {
	item, err := layout.EncodeHistoryItem(sub)
	if err != nil {
		return err
	}
	cond := absent(layout.AttrUserID)
	_, err = h.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &h.cfg.Tables.History, Item: sdkav.ToSDK(item),
		ConditionExpression:      cond.Condition(),
		ExpressionAttributeNames: cond.Names(),
	})
	return translateWrite("history add", []txOp{{key: historyKey(sub), reason: "a history row with this user_id and last_run_date exists", exists: true, history: true}}, err)
}

// AddAll implements [History.AddAll]: a PutItem of each row conditional
// on its key being free, as a batch write cannot be. A row whose key is
// taken is read back: the very same row (a retried batch) is written
// already; another row is never replaced, and the row is named in the
// [*billing.BatchError] with a [*billing.ConflictError] wrapping
// [billing.ErrAlreadyExists]. The capacity is a batch write's (one write
// a row), in one call a row.
func (h *History) AddAll(ctx context.Context, subs []billing.Period) error {
	if err := checkHistoryBatch(subs); err != nil {
		return err
	}
	items := make([]map[string]types.AttributeValue, len(subs))
	for i := range subs {
		item, _ := layout.EncodeHistoryItem(&subs[i])
		items[i] = sdkav.ToSDK(item)
	}
	return putRows(ctx, h.cfg.Client, h.bw, h.cfg.Tables.History, layout.AttrUserID, subs, items, func(i int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{layout.AttrUserID: items[i][layout.AttrUserID], layout.AttrLastRunDate: items[i][layout.AttrLastRunDate]}
	})
}

// putRows puts items (the rows of subs) into table, each conditional on
// its key (key(i), whose partition key attribute is pk) being free; a taken key is read back with a
// consistent read, and holds the very row (written already) or another
// (refused). Failed requests are retried with bw's backoff. The error is
// a [*billing.BatchError] naming the rows not written, or nil.
func putRows(ctx context.Context, client API, bw *batchWriter, table, pk string, subs []billing.Period,
	items []map[string]types.AttributeValue, key func(i int) map[string]types.AttributeValue) error {
	cond := absent(pk)
	be := &billing.BatchError{}
	for i := range items {
		err := putRow(ctx, client, bw, &dynamodb.PutItemInput{TableName: &table, Item: items[i],
			ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names()}, key(i))
		if err != nil {
			be.Unwritten = append(be.Unwritten, historyKey(&subs[i]))
			be.Err = errors.Join(be.Err, fmt.Errorf("%s: %w", historyKey(&subs[i]), err))
		}
	}
	if len(be.Unwritten) > 0 {
		return be
	}
	return nil
}

// putRow is one row of putRows.
func putRow(ctx context.Context, client API, bw *batchWriter, in *dynamodb.PutItemInput, key map[string]types.AttributeValue) error {
	for try := 0; ; try++ {
		_, err := client.PutItem(ctx, in)
		if err == nil {
			return nil
		}
		if _, ok := isConditionFailed(err); ok {
			out, gerr := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: key, ConsistentRead: aws.Bool(true)})
			switch {
			case gerr != nil:
				err = gerr
			case layout.SameItem(sdkav.FromSDK(out.Item), sdkav.FromSDK(in.Item)):
				return nil // written already, by an earlier try
			default:
				return &billing.ConflictError{Op: "history add", Key: historyKeyOf(key),
					Reason: "another history row has this key: not replaced", Err: billing.ErrAlreadyExists, HistoryRow: true}
			}
		}
		if try >= bw.retries {
			return fmt.Errorf("gave up after %d attempts: %w", try+1, err)
		}
		if serr := bw.sleep(ctx, try); serr != nil {
			return fmt.Errorf("%w (last failure: %v)", serr, err)
		}
	}
}

// historyKeyOf names a history row by its item key.
func historyKeyOf(key map[string]types.AttributeValue) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(key)) {
		out = append(out, name+"="+stringOf(key[name]))
	}
	return strings.Join(out, " ")
}

// checkHistoryBatch validates the rows of a History.AddAll before
// anything is written: each storable, no two sharing a key.
func checkHistoryBatch(subs []billing.Period) error {
	seen := map[string]bool{}
	for i := range subs {
		if _, err := layout.EncodeHistoryItem(&subs[i]); err != nil {
			return fmt.Errorf("history row %d: %w", i, err)
		}
		k := historyKey(&subs[i])
		if seen[k] {
			return &billing.ConflictError{Op: "history add", Key: k, Reason: "two rows of the batch share user_id and last_run_date", Err: billing.ErrAlreadyExists}
		}
		seen[k] = true
	}
	return nil
}

// historyBatchError is the [*billing.BatchError] naming the rows not written, or
// nil.
func historyBatchError(subs []billing.Period, unwritten map[int]bool, lastErr error) error {
	if len(unwritten) == 0 {
		return nil
	}
	be := &billing.BatchError{Err: lastErr}
	for i := range subs {
		if unwritten[i] {
			be.Unwritten = append(be.Unwritten, historyKey(&subs[i]))
		}
	}
	return be
}

// ListBySubscription implements [History.ListBySubscription]. The index has
// no range key, so rows are sorted by last_run_date after reading all pages.
func (h *History) ListBySubscription(ctx context.Context, subscriptionID string) ([]billing.Period, error) {
	expr := keyEquals(layout.AttrSubscriptionID, subscriptionID)
	rows, err := h.query(ctx, &dynamodb.QueryInput{
		TableName:                 &h.cfg.Tables.History,
		IndexName:                 &h.cfg.Tables.SubscriptionIDIndex,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return nil, fmt.Errorf("billing: history of subscription %s: %w", subscriptionID, err)
	}
	sortHistory(rows)
	return rows, nil
}

// ListByUser implements [History.ListByUser]. Rows that do not decode are
// skipped: logged at Warn and reported (see [billing.WithInvalidItems]).
func (h *History) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	expr := keyEquals(layout.AttrUserID, userID)
	read := userRead{client: h.cfg.Client, logger: h.cfg.Logger, op: "history of user " + userID, decode: layout.DecodeItem}
	rows, err := read.query(ctx, &dynamodb.QueryInput{
		TableName:                 &h.cfg.Tables.History,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	}, 0)
	if err != nil {
		return nil, fmt.Errorf("billing: history of user %s: %w", userID, err)
	}
	sortHistory(rows)
	return rows, nil
}

func (h *History) query(ctx context.Context, in *dynamodb.QueryInput) ([]billing.Period, error) {
	items, err := queryAll(ctx, h.cfg.Client, in, 0)
	if err != nil {
		return nil, err
	}
	return layout.DecodeAll(sdkav.FromSDKItems(items), layout.DecodeItem)
}

// sortHistory orders rows by last_run_date as a time (legacy rows may use
// other string forms, whose string order is not time order), then by user.
func sortHistory(rows []billing.Period) {
	slices.SortStableFunc(rows, func(a, b billing.Period) int {
		return cmp.Or(a.LastRunDate.Compare(b.LastRunDate), cmp.Compare(a.UserID, b.UserID))
	})
}
