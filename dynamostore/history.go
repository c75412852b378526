package dynamostore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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

func historyKey(sub *billing.Subscription) string {
	return "user_id=" + sub.UserID + " last_run_date=" + layout.LastRunDateKey(sub)
}

// Add implements [History.Add].
func (h *History) Add(ctx context.Context, sub *billing.Subscription) error {
	item, err := layout.EncodeHistoryItem(sub)
	if err != nil {
		return err
	}
	cond := absent(layout.AttrUserID)
	_, err = h.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &h.cfg.Tables.History, Item: item,
		ConditionExpression:      cond.Condition(),
		ExpressionAttributeNames: cond.Names(),
	})
	return translateWrite("history add", []txOp{{key: historyKey(sub), reason: "a history row with this user_id and last_run_date exists", exists: true, history: true}}, err)
}

// AddAll implements [History.AddAll].
func (h *History) AddAll(ctx context.Context, subs []billing.Subscription) error {
	if err := checkHistoryBatch(subs); err != nil {
		return err
	}
	puts := make([]batchPut, 0, len(subs))
	for i := range subs {
		item, _ := layout.EncodeHistoryItem(&subs[i])
		puts = append(puts, batchPut{table: h.cfg.Tables.History, item: item, record: i, key: historyKey(&subs[i])})
	}
	unwritten, lastErr := h.bw.write(ctx, puts, maxBatchWrite)
	return historyBatchError(subs, unwritten, lastErr)
}

// checkHistoryBatch validates the rows of a History.AddAll before
// anything is written: each storable, no two sharing a key.
func checkHistoryBatch(subs []billing.Subscription) error {
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
func historyBatchError(subs []billing.Subscription, unwritten map[int]bool, lastErr error) error {
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
func (h *History) ListBySubscription(ctx context.Context, subscriptionID string) ([]billing.Subscription, error) {
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
func (h *History) ListByUser(ctx context.Context, userID string) ([]billing.Subscription, error) {
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

func (h *History) query(ctx context.Context, in *dynamodb.QueryInput) ([]billing.Subscription, error) {
	items, err := queryAll(ctx, h.cfg.Client, in, 0)
	if err != nil {
		return nil, err
	}
	return layout.DecodeAll(items, layout.DecodeItem)
}

// sortHistory orders rows by last_run_date as a time (legacy rows may use
// other string forms, whose string order is not time order), then by user.
func sortHistory(rows []billing.Subscription) {
	slices.SortStableFunc(rows, func(a, b billing.Subscription) int {
		return cmp.Or(a.LastRunDate.Compare(b.LastRunDate), cmp.Compare(a.UserID, b.UserID))
	})
}
