package dynamostore

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
)

// receiptPut is the idempotent put of a receipt: the key must be free or
// hold the same content.
func (p *Payments) receiptPut(r entitlement.Receipt) (*types.Put, entitlement.Receipt, error) {
	r.ExpiresAt = r.ProcessedDate.Add(p.cfg.ReceiptRetention)
	item, err := p.tbl.EncodeReceipt(r)
	if err != nil {
		return nil, r, err
	}
	if r, err = p.tbl.DecodeReceipt(item); err != nil {
		return nil, r, err
	}
	txName := expression.Name(layout.RecTransactionID)
	sameTx := expression.AttributeNotExists(txName)
	if tx, ok := item[layout.RecTransactionID]; ok {
		sameTx = txName.Equal(exprValue(tx))
	}
	same := expression.Name(layout.RecSubscriptionID).Equal(exprValue(item[layout.RecSubscriptionID])).
		And(expression.Name(layout.RecAmount).Equal(exprValue(item[layout.RecAmount])), sameTx)
	expr, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(layout.AttrPK)).Or(same)).Build()
	if err != nil {
		return nil, r, err
	}
	return &types.Put{
		TableName: &p.tbl.Table, Item: sdkav.ToSDK(item),
		ConditionExpression:      expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, r, nil
}

func (p *Payments) receiptOp(r entitlement.Receipt) txOp {
	sk, _ := layout.ReceiptSK(r.ProcessedDate, r.SKU)
	return txOp{key: p.keyText(r.AccountID, sk), reason: "a receipt with other content exists", exists: true}
}

// CreateReceipt implements [Payments.CreateReceipt] with one conditional PutItem.
func (p *Payments) CreateReceipt(ctx context.Context, r entitlement.Receipt) (entitlement.Receipt, error) {
	put, r, err := p.receiptPut(r)
	if err != nil {
		return entitlement.Receipt{}, fmt.Errorf("billing: create receipt: %w", err)
	}
	_, err = p.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
		ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
	})
	if err := translateWrite("create receipt", []txOp{p.receiptOp(r)}, err); err != nil {
		return entitlement.Receipt{}, err
	}
	return r, nil
}

// ReceiptsByAccount implements [Payments.ReceiptsByAccount]: a consistent
// Query, SK BETWEEN "REC#<since>" AND "REC$" (the first key after every
// receipt and before "SUB#"), newest first, all pages.
func (p *Payments) ReceiptsByAccount(ctx context.Context, accountID string, since time.Time) ([]entitlement.Receipt, error) {
	if err := checkAccount("receipts by account", accountID); err != nil {
		return nil, err
	}
	lo := layout.SKReceiptPrefix
	if !since.IsZero() {
		ts, err := timefmt.Nanos(since)
		if err != nil {
			return nil, fmt.Errorf("billing: receipts by account: %w: since %v", billing.ErrInvalidQuery, since)
		}
		lo += ts
	}
	expr := mustBuild(expression.NewBuilder().WithKeyCondition(
		expression.Key(layout.AttrPK).Equal(exprValue(layout.StringAV(p.tbl.AccountPK(accountID)))).
			And(expression.Key(layout.AttrSK).Between(exprValue(layout.StringAV(lo)), exprValue(layout.StringAV("REC$"))))))
	in := &dynamodb.QueryInput{
		TableName:                 &p.tbl.Table,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true), ScanIndexForward: aws.Bool(false),
	}
	var recs []entitlement.Receipt
	for out, err := range queryPages(ctx, p.cfg.Client, in) {
		if err != nil {
			return nil, fmt.Errorf("billing: receipts by account (account %s): %w", accountID, err)
		}
		for _, it := range out.Items {
			if !strings.HasPrefix(stringOf(it[layout.AttrSK]), layout.SKReceiptPrefix) {
				continue
			}
			r, err := p.tbl.DecodeReceipt(sdkav.FromSDK(it))
			if err != nil {
				return nil, fmt.Errorf("billing: receipts by account: %w", err)
			}
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// RecordPayment implements [Payments.RecordPayment] with one
// TransactWriteItems: the receipt's idempotent put and the subscription's
// update conditional on prev.Version.
func (p *Payments) RecordPayment(ctx context.Context, prev entitlement.RecurringSubscription, r entitlement.Receipt, nextPayment, nextReminder time.Time) (entitlement.RecurringSubscription, entitlement.Receipt, error) {
	fail := func(err error) (entitlement.RecurringSubscription, entitlement.Receipt, error) {
		return entitlement.RecurringSubscription{}, entitlement.Receipt{}, fmt.Errorf("billing: record payment: %w", err)
	}
	if r.AccountID != prev.AccountID || r.SubscriptionID != prev.SubscriptionID || r.SKU != prev.SKU {
		return fail(layout.PayInvalid("SubscriptionID", r.SubscriptionID, "receipt of another subscription"))
	}
	next := prev
	next.NextPaymentDate, next.NextReminderDate, next.LastPaymentDate = nextPayment, nextReminder, entitlement.PaymentDate(r.ProcessedDate)
	next, err := layout.PrepareSubscriptionUpdate(prev, next, p.now())
	if err != nil {
		return fail(err)
	}
	put, r, err := p.receiptPut(r)
	if err != nil {
		return fail(err)
	}
	upd, err := p.subUpdate(prev.Version, next)
	if err != nil {
		return fail(err)
	}
	_, err = p.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Put: put}, {Update: upd}},
	})
	ops := []txOp{p.receiptOp(r), {key: p.keyText(prev.AccountID, layout.RecurringSK(prev.SubscriptionID, prev.SKU)), reason: "version changed or subscription deleted"}}
	if err := translateWrite("record payment", ops, err); err != nil {
		return entitlement.RecurringSubscription{}, entitlement.Receipt{}, err
	}
	if next, err = layout.RoundTripSub(p.tbl, next); err != nil {
		return fail(err)
	}
	return next, r, nil
}

// MarkReminded implements [Payments.MarkReminded] as an UpdateSubscription.
func (p *Payments) MarkReminded(ctx context.Context, prev entitlement.RecurringSubscription, nextReminder time.Time) (entitlement.RecurringSubscription, error) {
	next := prev
	next.LastReminderDate, next.NextReminderDate = entitlement.PaymentDate(p.now()), nextReminder
	return p.UpdateSubscription(ctx, prev, next)
}

// DuePaymentsByDate implements [Payments.DuePaymentsByDate]: one Query of
// Table.PaymentIndex (NextPaymentDate = day), then a consistent
// BatchGetItem of the page's subscriptions, because the index projects
// only some attributes (not Version) and is eventually consistent: an
// item whose NextPaymentDate has moved since is dropped.
func (p *Payments) DuePaymentsByDate(ctx context.Context, day time.Time, token string) ([]entitlement.RecurringSubscription, string, error) {
	return p.due(ctx, "due payments", p.tbl.PaymentIndex, layout.AttrNextPaymentDate, layout.AttrLastPaymentDate, day, token,
		func(s entitlement.RecurringSubscription) time.Time { return s.NextPaymentDate })
}

// DueRemindersByDate implements [Payments.DueRemindersByDate] like
// [Payments.DuePaymentsByDate] on Table.ReminderIndex.
func (p *Payments) DueRemindersByDate(ctx context.Context, day time.Time, token string) ([]entitlement.RecurringSubscription, string, error) {
	return p.due(ctx, "due reminders", p.tbl.ReminderIndex, layout.AttrNextReminderDate, layout.AttrLastReminderDate, day, token,
		func(s entitlement.RecurringSubscription) time.Time { return s.NextReminderDate })
}

func (p *Payments) due(ctx context.Context, op, index, hash, rng string, day time.Time, token string, date func(entitlement.RecurringSubscription) time.Time) ([]entitlement.RecurringSubscription, string, error) {
	d, err := layout.PayDayText("day", day, false)
	if err != nil || d == "" {
		return nil, "", fmt.Errorf("billing: %s: %w: day %v", op, billing.ErrInvalidQuery, day)
	}
	scope := "payments/" + p.tbl.Table + "/" + index + "/" + d
	start, err := cursor.Decode(scope, token, layout.AttrPK, layout.AttrSK, hash, rng)
	if err != nil {
		return nil, "", fmt.Errorf("billing: %s: %w: %v", op, billing.ErrInvalidCursor, err)
	}
	expr := keyEquals(hash, d)
	out, err := p.cfg.Client.Query(ctx, &dynamodb.QueryInput{
		TableName: &p.tbl.Table, IndexName: aws.String(index),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ExclusiveStartKey:         sdkav.ToSDK(start), Limit: aws.Int32(int32(p.cfg.PageSize)),
	})
	if err != nil {
		return nil, "", fmt.Errorf("billing: %s %s: %w", op, d, err)
	}
	next, err := cursor.Encode(scope, sdkav.FromSDK(out.LastEvaluatedKey))
	if err != nil {
		return nil, "", fmt.Errorf("billing: %s %s: cursor: %w", op, d, err)
	}
	full, err := p.batchGet(ctx, op, out.Items)
	if err != nil {
		return nil, "", err
	}
	var page []entitlement.RecurringSubscription
	for _, it := range out.Items {
		item, ok := full[stringOf(it[layout.AttrPK])+"\x00"+stringOf(it[layout.AttrSK])]
		if !ok {
			continue // deleted since
		}
		s, err := p.tbl.DecodeRecurringSubscription(sdkav.FromSDK(item))
		if err != nil {
			p.cfg.Logger.WarnContext(ctx, "billing: skipping undecodable subscription", "op", op, "day", d, "error", err)
			continue
		}
		if date(s).Equal(entitlement.PaymentDate(day)) {
			page = append(page, s)
		}
	}
	return page, next, nil
}

// batchGet reads the base-table items of keys consistently, retrying
// unprocessed keys; the result is keyed by PK "\x00" SK.
func (p *Payments) batchGet(ctx context.Context, op string, keys []map[string]types.AttributeValue) (map[string]map[string]types.AttributeValue, error) {
	got := make(map[string]map[string]types.AttributeValue, len(keys))
	if len(keys) == 0 {
		return got, nil
	}
	req := map[string]types.KeysAndAttributes{p.tbl.Table: {ConsistentRead: aws.Bool(true)}}
	ka := req[p.tbl.Table]
	for _, k := range keys {
		ka.Keys = append(ka.Keys, map[string]types.AttributeValue{layout.AttrPK: k[layout.AttrPK], layout.AttrSK: k[layout.AttrSK]})
	}
	req[p.tbl.Table] = ka
	for attempt := 0; len(req) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("billing: %s: %w", op, ctx.Err())
			case <-time.After(time.Duration(min(attempt, 10)) * 20 * time.Millisecond):
			}
		}
		out, err := p.cfg.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("billing: %s: batch get: %w", op, err)
		}
		for _, it := range out.Responses[p.tbl.Table] {
			got[stringOf(it[layout.AttrPK])+"\x00"+stringOf(it[layout.AttrSK])] = it
		}
		req = out.UnprocessedKeys
	}
	return got, nil
}

// subUpdate builds the conditional update of a subscription item to next
// (already prepared): SET every attribute of its item but the keys and
// CreatedAt, REMOVE the optional ones it lacks, if Version is prev's.
func (p *Payments) subUpdate(prevVersion int, next entitlement.RecurringSubscription) (*types.Update, error) {
	item, err := p.tbl.EncodeRecurringSubscription(next)
	if err != nil {
		return nil, err
	}
	var upd expression.UpdateBuilder
	for _, a := range slices.Sorted(maps.Keys(item)) {
		if a == layout.AttrPK || a == layout.AttrSK || a == layout.PayCreatedAt {
			continue
		}
		upd = upd.Set(expression.Name(a), exprValue(item[a]))
	}
	for _, a := range []string{layout.AttrNextPaymentDate, layout.AttrNextReminderDate, layout.PayEmail, layout.PayDetails} {
		if _, ok := item[a]; !ok {
			upd = upd.Remove(expression.Name(a))
		}
	}
	cond := expression.Name(layout.PayVersion).Equal(exprValue(layout.NumberAV(int64(prevVersion))))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &types.Update{
		TableName: &p.tbl.Table, Key: p.subKey(next.AccountID, next.SubscriptionID, next.SKU),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}
