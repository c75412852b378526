package dynamostore

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// SingleTableHistory is the [History] of a [SingleTableRepository]: rows
// HIST#<subscriptionID>#SKU#<sku>#<last_run_date> in the account's
// partition, found by subscription_id through the period ID pointers.
type SingleTableHistory struct {
	r *SingleTableRepository
}

var _ billing.History = (*SingleTableHistory)(nil)

// pointerUpdate records that a row of subscriptionID belongs to userID,
// keeping the billing_date a period write put there.
func (h *SingleTableHistory) pointerUpdate(sub *billing.Period) *types.Update {
	bd := expression.Name(layout.AttrBillingDate)
	expr := mustBuild(expression.NewBuilder().WithUpdate(expression.
		Set(expression.Name(layout.AttrUserID), exprValue(layout.StringAV(sub.UserID))).
		Set(bd, expression.IfNotExists(bd, exprValue(layout.StringAV(layout.BillingDateKey(sub))))).
		Set(expression.Name(layout.PayEntity), exprValue(layout.StringAV(layout.EntityPeriodID)))))
	return &types.Update{
		TableName: h.r.table(), Key: pointerKey(sub.SubscriptionID, sub.UserID),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
}

// Add implements [History.Add]: the row and its ID pointer in one
// transaction.
func (h *SingleTableHistory) Add(ctx context.Context, sub *billing.Period) error {
	ref, err := layout.EngineRef(sub)
	if err != nil {
		return err
	}
	item, err := h.r.historyItem(ref, sub)
	if err != nil {
		return err
	}
	_, err = h.r.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: putAbsent(h.r.table(), item, layout.AttrPK)},
		{Update: h.pointerUpdate(sub)},
	}})
	return translateWrite("history add", []txOp{
		{key: historyKey(sub), reason: "a history row with this user_id and last_run_date exists", exists: true, history: true},
		{key: historyKey(sub), reason: "period ID pointer"},
	}, err)
}

// AddAll implements [History.AddAll]: the ID pointers with
// BatchWriteItem (a pointer's billing_date is that of its subscription's
// first row in the call), then each row with a PutItem conditional on its
// key being free, as [History.AddAll] does on the legacy table: a row is
// never replaced.
func (h *SingleTableHistory) AddAll(ctx context.Context, subs []billing.Period) error {
	if err := checkHistoryBatch(subs); err != nil {
		return err
	}
	var ptrs []batchPut
	items := make([]map[string]types.AttributeValue, len(subs))
	seen := map[string]bool{}
	for i := range subs {
		ref, err := layout.EngineRef(&subs[i])
		if err != nil {
			return err
		}
		item, err := h.r.historyItem(ref, &subs[i])
		if err != nil {
			return err
		}
		items[i] = sdkav.ToSDK(item)
		if p := subs[i].SubscriptionID + "\x00" + subs[i].UserID; !seen[p] {
			seen[p] = true
			ptr := h.r.pointerItem(subs[i].SubscriptionID, subs[i].UserID, layout.BillingDateKey(&subs[i]))
			ptrs = append(ptrs, batchPut{table: h.r.tbl.Table, item: ptr, record: i, key: historyKey(&subs[i])})
		}
	}
	// A pointer first: a row is never without one (a pointer without
	// rows lists none).
	if unwritten, lastErr := h.r.bw.write(ctx, ptrs, maxBatchWrite); len(unwritten) > 0 {
		return historyBatchError(subs, allRows(subs), lastErr)
	}
	return putRows(ctx, h.r.cfg.Client, h.r.bw, h.r.tbl.Table, layout.AttrPK, subs, items, func(i int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{layout.AttrPK: items[i][layout.AttrPK], layout.AttrSK: items[i][layout.AttrSK]}
	})
}

// allRows marks every row of subs unwritten.
func allRows(subs []billing.Period) map[int]bool {
	out := make(map[int]bool, len(subs))
	for i := range subs {
		out[i] = true
	}
	return out
}

// ListBySubscription implements [History.ListBySubscription]: the ID
// pointers, then the rows of each subscription they name.
func (h *SingleTableHistory) ListBySubscription(ctx context.Context, subscriptionID string) ([]billing.Period, error) {
	if subscriptionID == "" {
		return nil, nil
	}
	ptrs, err := h.r.pointers(ctx, subscriptionID)
	if err != nil {
		return nil, err
	}
	var rows []billing.Period
	for _, p := range ptrs {
		// A row that does not decode fails the lookup: it may be one of
		// the subscription's.
		all, err := h.rowsOf(ctx, stringOf(p[layout.AttrUserID]), false)
		if err != nil {
			return nil, err
		}
		for _, row := range all {
			if row.SubscriptionID == subscriptionID {
				rows = append(rows, row)
			}
		}
	}
	sortHistory(rows)
	return rows, nil
}

// ListByUser implements [History.ListByUser]. Rows that do not decode are
// skipped: logged at Warn and reported (see [billing.WithInvalidItems]).
func (h *SingleTableHistory) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	return h.rowsOf(ctx, userID, true)
}

// rowsOf returns the history rows of userID ascending by last_run_date,
// skipping (skip) or failing on the first row that does not decode.
func (h *SingleTableHistory) rowsOf(ctx context.Context, userID string, skip bool) ([]billing.Period, error) {
	ref, err := layout.ParseSubscriptionRef(userID)
	if err != nil {
		return nil, nil // no such user can be stored
	}
	prefix := layout.HistorySK(ref, "")
	op := "history of user " + userID
	in := h.r.chainQuery(ref, prefix, prefix+"~", true)
	var rows []billing.Period
	if skip {
		rows, err = h.r.userRead(op).query(ctx, in, 0)
		if err != nil {
			return nil, fmt.Errorf("billing: %s: %w", op, err)
		}
	} else {
		items, err := h.r.queryAll(ctx, op, in, 0)
		if err != nil {
			return nil, err
		}
		if rows, err = layout.DecodeAll(sdkav.FromSDKItems(items), decodeEngineItem); err != nil {
			return nil, err
		}
	}
	sortHistory(rows)
	return rows, nil
}
