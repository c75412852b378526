package billing

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/timefmt"
)

// This file holds the receipts and the daily jobs' side of [Payments]:
// the due-date queries on the sparse indexes, RecordPayment, MarkReminded,
// and the conditional subscription update they share with UpdateSubscription.

// Attribute names of a receipt item.
const (
	recSubscriptionID = "SubscriptionID"
	recProcessedDate  = "ProcessedDate"
	recAmount         = "ProcessedAmount"
	recTransactionID  = "TransactionID"
)

// Receipt is a processed payment of a [RecurringSubscription], stored at
// PK=<AccountPrefix><AccountID>, SK=REC#<ProcessedDate>#SKU#<SKU> with
// ProcessedDate in UTC, fixed-width RFC3339 with nanoseconds
// ("2006-01-02T15:04:05.000000000Z"), so that sort-key order is time
// order. The table's TTL attribute holds ExpiresAt in Unix seconds.
type Receipt struct {
	AccountID       string
	SubscriptionID  string // no '#'
	SKU             string // no '#'
	ProcessedDate   time.Time
	ProcessedAmount Amount
	// TransactionID is the payment processor's reference.
	TransactionID string
	// ExpiresAt is set by the store: ProcessedDate + the receipt
	// retention, whole seconds.
	ExpiresAt time.Time
}

// ReceiptSK is the sort key of a receipt.
func ReceiptSK(processed time.Time, sku string) (string, error) {
	ts, err := timefmt.Nanos(processed)
	if err != nil {
		return "", payInvalid("ProcessedDate", processed.String(), err.Error())
	}
	return SKReceiptPrefix + ts + "#SKU#" + sku, nil
}

// EncodeReceipt returns the item of r, validating it. ExpiresAt is written
// as is; the stores set it from the retention first.
func (c SingleTableConfig) EncodeReceipt(r Receipt) (map[string]types.AttributeValue, error) {
	c = c.decodeDefaults()
	if err := checkPaymentKey(r.AccountID, r.SubscriptionID, r.SKU); err != nil {
		return nil, err
	}
	if r.ProcessedDate.IsZero() {
		return nil, payInvalid("ProcessedDate", "", "missing")
	}
	if r.ProcessedAmount < 0 {
		return nil, payInvalid("ProcessedAmount", r.ProcessedAmount.String(), "negative")
	}
	sk, err := ReceiptSK(r.ProcessedDate, r.SKU)
	if err != nil {
		return nil, err
	}
	item := map[string]types.AttributeValue{
		AttrPK: attrS(c.AccountPK(r.AccountID)), AttrSK: attrS(sk),
		payEntity: attrS(payEntityReceipt), paySKU: attrS(r.SKU), recSubscriptionID: attrS(r.SubscriptionID),
		recProcessedDate: attrS(strings.Split(sk, "#")[1]), recAmount: attrS(r.ProcessedAmount.String()),
	}
	if r.TransactionID != "" {
		item[recTransactionID] = attrS(r.TransactionID)
	}
	if !r.ExpiresAt.IsZero() {
		item[c.TTLAttribute] = attrN(r.ExpiresAt.Unix())
	}
	return item, nil
}

// DecodeReceipt decodes a receipt item of this layout. Anything else,
// subscriptions included, is a [*FieldError] wrapping [ErrInvalidItem].
func (c SingleTableConfig) DecodeReceipt(item map[string]types.AttributeValue) (Receipt, error) {
	c = c.decodeDefaults()
	r := newItemReader(item)
	rc := Receipt{
		AccountID:      c.accountID(r),
		SubscriptionID: r.required(recSubscriptionID),
		ProcessedDate:  r.timestamp(recProcessedDate),
		TransactionID:  r.str(recTransactionID),
		ExpiresAt:      r.unix(c.TTLAttribute),
	}
	sk := r.required(AttrSK)
	rest, ok := strings.CutPrefix(sk, SKReceiptPrefix)
	ts, sku, ok2 := strings.Cut(rest, "#SKU#")
	if r.err == nil {
		want, err := ReceiptSK(rc.ProcessedDate, sku)
		if !ok || !ok2 || err != nil || want != sk || checkPaymentKey("a", rc.SubscriptionID, sku) != nil {
			r.fail(AttrSK, sk, fmt.Errorf("%w: not a receipt of processed date %s", ErrInvalidItem, ts))
		}
	}
	rc.SKU = sku
	if v := r.str(paySKU); r.err == nil && v != "" && v != sku {
		r.fail(paySKU, v, fmt.Errorf("%w: differs from the sort key's SKU", ErrInvalidItem))
	}
	amt := r.required(recAmount)
	if r.err == nil {
		a, err := ParseAmount(amt)
		if err != nil {
			r.fail(recAmount, amt, err)
		}
		rc.ProcessedAmount = a
	}
	if r.err != nil {
		return Receipt{}, r.err
	}
	return rc, nil
}

// receiptPut is the idempotent put of a receipt: the key must be free or
// hold the same content.
func (p *DynamoPayments) receiptPut(r Receipt) (*types.Put, Receipt, error) {
	r.ExpiresAt = r.ProcessedDate.Add(p.cfg.ReceiptRetention)
	item, err := p.cfg.Table.EncodeReceipt(r)
	if err != nil {
		return nil, r, err
	}
	if r, err = p.cfg.Table.DecodeReceipt(item); err != nil {
		return nil, r, err
	}
	txName := expression.Name(recTransactionID)
	sameTx := expression.AttributeNotExists(txName)
	if tx, ok := item[recTransactionID]; ok {
		sameTx = txName.Equal(expression.Value(tx))
	}
	same := expression.Name(recSubscriptionID).Equal(expression.Value(item[recSubscriptionID])).
		And(expression.Name(recAmount).Equal(expression.Value(item[recAmount])), sameTx)
	expr, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK)).Or(same)).Build()
	if err != nil {
		return nil, r, err
	}
	return &types.Put{
		TableName: &p.cfg.Table.Table, Item: item,
		ConditionExpression:      expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, r, nil
}

func (p *DynamoPayments) receiptOp(r Receipt) txOp {
	sk, _ := ReceiptSK(r.ProcessedDate, r.SKU)
	return txOp{key: p.keyText(r.AccountID, sk), reason: "a receipt with other content exists", exists: true}
}

// CreateReceipt implements [Payments.CreateReceipt] with one conditional PutItem.
func (p *DynamoPayments) CreateReceipt(ctx context.Context, r Receipt) (Receipt, error) {
	put, r, err := p.receiptPut(r)
	if err != nil {
		return Receipt{}, fmt.Errorf("billing: create receipt: %w", err)
	}
	_, err = p.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
		ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
	})
	if err := translateWrite("create receipt", []txOp{p.receiptOp(r)}, err); err != nil {
		return Receipt{}, err
	}
	return r, nil
}

// ReceiptsByAccount implements [Payments.ReceiptsByAccount]: a consistent
// Query, SK BETWEEN "REC#<since>" AND "REC$" (the first key after every
// receipt and before "SUB#"), newest first, all pages.
func (p *DynamoPayments) ReceiptsByAccount(ctx context.Context, accountID string, since time.Time) ([]Receipt, error) {
	if err := checkAccount("receipts by account", accountID); err != nil {
		return nil, err
	}
	lo := SKReceiptPrefix
	if !since.IsZero() {
		ts, err := timefmt.Nanos(since)
		if err != nil {
			return nil, fmt.Errorf("billing: receipts by account: %w: since %v", ErrInvalidQuery, since)
		}
		lo += ts
	}
	expr := mustBuild(expression.NewBuilder().WithKeyCondition(
		expression.Key(AttrPK).Equal(expression.Value(attrS(p.cfg.Table.AccountPK(accountID)))).
			And(expression.Key(AttrSK).Between(expression.Value(attrS(lo)), expression.Value(attrS("REC$"))))))
	in := &dynamodb.QueryInput{
		TableName:                 &p.cfg.Table.Table,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true), ScanIndexForward: aws.Bool(false),
	}
	var recs []Receipt
	for {
		out, err := p.cfg.Client.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("billing: receipts by account (account %s): %w", accountID, err)
		}
		for _, it := range out.Items {
			if !strings.HasPrefix(stringAttr(it[AttrSK]), SKReceiptPrefix) {
				continue
			}
			r, err := p.cfg.Table.DecodeReceipt(it)
			if err != nil {
				return nil, fmt.Errorf("billing: receipts by account: %w", err)
			}
			recs = append(recs, r)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return recs, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// RecordPayment implements [Payments.RecordPayment] with one
// TransactWriteItems: the receipt's idempotent put and the subscription's
// update conditional on prev.Version.
func (p *DynamoPayments) RecordPayment(ctx context.Context, prev RecurringSubscription, r Receipt, nextPayment, nextReminder time.Time) (RecurringSubscription, Receipt, error) {
	fail := func(err error) (RecurringSubscription, Receipt, error) {
		return RecurringSubscription{}, Receipt{}, fmt.Errorf("billing: record payment: %w", err)
	}
	if r.AccountID != prev.AccountID || r.SubscriptionID != prev.SubscriptionID || r.SKU != prev.SKU {
		return fail(payInvalid("SubscriptionID", r.SubscriptionID, "receipt of another subscription"))
	}
	next := prev
	next.NextPaymentDate, next.NextReminderDate, next.LastPaymentDate = nextPayment, nextReminder, PaymentDate(r.ProcessedDate)
	next, err := PrepareSubscriptionUpdate(prev, next, p.now())
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
	ops := []txOp{p.receiptOp(r), {key: p.keyText(prev.AccountID, RecurringSK(prev.SubscriptionID, prev.SKU)), reason: "version changed or subscription deleted"}}
	if err := translateWrite("record payment", ops, err); err != nil {
		return RecurringSubscription{}, Receipt{}, err
	}
	if next, err = roundTripSub(p.cfg.Table, next); err != nil {
		return fail(err)
	}
	return next, r, nil
}

// MarkReminded implements [Payments.MarkReminded] as an UpdateSubscription.
func (p *DynamoPayments) MarkReminded(ctx context.Context, prev RecurringSubscription, nextReminder time.Time) (RecurringSubscription, error) {
	next := prev
	next.LastReminderDate, next.NextReminderDate = PaymentDate(p.now()), nextReminder
	return p.UpdateSubscription(ctx, prev, next)
}

// DuePaymentsByDate implements [Payments.DuePaymentsByDate]: one Query of
// Table.PaymentIndex (NextPaymentDate = day), then a consistent
// BatchGetItem of the page's subscriptions, because the index projects
// only some attributes (not Version) and is eventually consistent: an
// item whose NextPaymentDate has moved since is dropped.
func (p *DynamoPayments) DuePaymentsByDate(ctx context.Context, day time.Time, token string) ([]RecurringSubscription, string, error) {
	return p.due(ctx, "due payments", p.cfg.Table.PaymentIndex, AttrNextPaymentDate, AttrLastPaymentDate, day, token,
		func(s RecurringSubscription) time.Time { return s.NextPaymentDate })
}

// DueRemindersByDate implements [Payments.DueRemindersByDate] like
// [DynamoPayments.DuePaymentsByDate] on Table.ReminderIndex.
func (p *DynamoPayments) DueRemindersByDate(ctx context.Context, day time.Time, token string) ([]RecurringSubscription, string, error) {
	return p.due(ctx, "due reminders", p.cfg.Table.ReminderIndex, AttrNextReminderDate, AttrLastReminderDate, day, token,
		func(s RecurringSubscription) time.Time { return s.NextReminderDate })
}

func (p *DynamoPayments) due(ctx context.Context, op, index, hash, rng string, day time.Time, token string, date func(RecurringSubscription) time.Time) ([]RecurringSubscription, string, error) {
	d, err := payDayText("day", day, false)
	if err != nil || d == "" {
		return nil, "", fmt.Errorf("billing: %s: %w: day %v", op, ErrInvalidQuery, day)
	}
	scope := "payments/" + p.cfg.Table.Table + "/" + index + "/" + d
	start, err := cursor.Decode(scope, token, AttrPK, AttrSK, hash, rng)
	if err != nil {
		return nil, "", fmt.Errorf("billing: %s: %w: %v", op, ErrInvalidCursor, err)
	}
	expr := keyEquals(hash, d)
	out, err := p.cfg.Client.Query(ctx, &dynamodb.QueryInput{
		TableName: &p.cfg.Table.Table, IndexName: aws.String(index),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ExclusiveStartKey:         start, Limit: aws.Int32(int32(p.cfg.PageSize)),
	})
	if err != nil {
		return nil, "", fmt.Errorf("billing: %s %s: %w", op, d, err)
	}
	next, err := cursor.Encode(scope, out.LastEvaluatedKey)
	if err != nil {
		return nil, "", fmt.Errorf("billing: %s %s: cursor: %w", op, d, err)
	}
	full, err := p.batchGet(ctx, op, out.Items)
	if err != nil {
		return nil, "", err
	}
	var page []RecurringSubscription
	for _, it := range out.Items {
		item, ok := full[stringAttr(it[AttrPK])+"\x00"+stringAttr(it[AttrSK])]
		if !ok {
			continue // deleted since
		}
		s, err := p.cfg.Table.DecodeRecurringSubscription(item)
		if err != nil {
			p.cfg.Logger.WarnContext(ctx, "billing: skipping undecodable subscription", "op", op, "day", d, "error", err)
			continue
		}
		if date(s).Equal(PaymentDate(day)) {
			page = append(page, s)
		}
	}
	return page, next, nil
}

// batchGet reads the base-table items of keys consistently, retrying
// unprocessed keys; the result is keyed by PK "\x00" SK.
func (p *DynamoPayments) batchGet(ctx context.Context, op string, keys []map[string]types.AttributeValue) (map[string]map[string]types.AttributeValue, error) {
	got := make(map[string]map[string]types.AttributeValue, len(keys))
	if len(keys) == 0 {
		return got, nil
	}
	req := map[string]types.KeysAndAttributes{p.cfg.Table.Table: {ConsistentRead: aws.Bool(true)}}
	ka := req[p.cfg.Table.Table]
	for _, k := range keys {
		ka.Keys = append(ka.Keys, map[string]types.AttributeValue{AttrPK: k[AttrPK], AttrSK: k[AttrSK]})
	}
	req[p.cfg.Table.Table] = ka
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
		for _, it := range out.Responses[p.cfg.Table.Table] {
			got[stringAttr(it[AttrPK])+"\x00"+stringAttr(it[AttrSK])] = it
		}
		req = out.UnprocessedKeys
	}
	return got, nil
}

// subUpdate builds the conditional update of a subscription item to next
// (already prepared): SET every attribute of its item but the keys and
// CreatedAt, REMOVE the optional ones it lacks, if Version is prev's.
func (p *DynamoPayments) subUpdate(prevVersion int, next RecurringSubscription) (*types.Update, error) {
	item, err := p.cfg.Table.EncodeRecurringSubscription(next)
	if err != nil {
		return nil, err
	}
	var upd expression.UpdateBuilder
	for _, a := range slices.Sorted(maps.Keys(item)) {
		if a == AttrPK || a == AttrSK || a == payCreatedAt {
			continue
		}
		upd = upd.Set(expression.Name(a), expression.Value(item[a]))
	}
	for _, a := range []string{AttrNextPaymentDate, AttrNextReminderDate, payEmail, payDetails} {
		if _, ok := item[a]; !ok {
			upd = upd.Remove(expression.Name(a))
		}
	}
	cond := expression.Name(payVersion).Equal(expression.Value(attrN(int64(prevVersion))))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &types.Update{
		TableName: &p.cfg.Table.Table, Key: p.subKey(next.AccountID, next.SubscriptionID, next.SKU),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}

// roundTripSub returns s as the store keeps it (days, whole seconds).
func roundTripSub(c SingleTableConfig, s RecurringSubscription) (RecurringSubscription, error) {
	item, err := c.EncodeRecurringSubscription(s)
	if err != nil {
		return RecurringSubscription{}, err
	}
	return c.DecodeRecurringSubscription(item)
}
