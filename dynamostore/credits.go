package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
)

// Balance implements [Accounts.Balance] with one consistent GetItem.
func (a *Accounts) Balance(ctx context.Context, userID string) (entitlement.Credits, error) {
	if err := checkAccount("balance", userID); err != nil {
		return entitlement.Credits{}, err
	}
	return a.readCredits(ctx, "balance", userID, a.now())
}

// readCredits reads the balance with a consistent GetItem, as of now.
func (a *Accounts) readCredits(ctx context.Context, op, userID string, now time.Time) (entitlement.Credits, error) {
	item, err := a.getItem(ctx, op, userID, layout.SKCredits)
	if err != nil {
		return entitlement.Credits{}, err
	}
	if item == nil {
		return entitlement.Credits{UserID: userID}, nil
	}
	return a.tbl.DecodeCredits(sdkav.FromSDK(item), now)
}

// maxExpiryRetries bounds the retries of a credit write that met an
// expired record or a concurrent transaction.
const maxExpiryRetries = 4

// Cancellation reason codes of a transaction's actions.
const (
	codeConditionFailed = "ConditionalCheckFailed"
	codeTxConflict      = "TransactionConflict"
)

// cancelCodes returns the cancellation reasons and their codes of a
// transaction of n actions that err reports cancelled ("" for an action
// without a reason), or nil, nil when err is not a cancellation.
func cancelCodes(err error, n int) ([]types.CancellationReason, []string) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, nil
	}
	reasons := make([]types.CancellationReason, n)
	copy(reasons, tce.CancellationReasons)
	codes := make([]string, n)
	for i, r := range reasons {
		codes[i] = aws.ToString(r.Code)
	}
	return reasons, codes
}

// txBackoff waits before retrying, for the attempt+1-th time, a credit
// transaction cancelled by a concurrent one (nothing was written).
func txBackoff(ctx context.Context, op, key string, attempt int) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("billing: %s (%s): %w", op, key, ctx.Err())
	case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		return nil
	}
}

// incrementExpr is the update adding n credits to a live (unexpired)
// record, creating it if absent: its condition fails only for a record
// past its expiry, whose stale balance must not be revived. setNow names
// attributes set to now; set holds other attributes to set.
func (a *Accounts) incrementExpr(n int64, now time.Time, setNow []string, set map[string]types.AttributeValue) *types.Update {
	ts, _ := layout.AcctTime(now)
	nowV := exprValue(layout.StringAV(ts))
	typ, created, exp := expression.Name(layout.AcctType), expression.Name(layout.AcctCreatedAt), expression.Name(a.tbl.TTLAttribute)
	upd := expression.Set(typ, expression.IfNotExists(typ, exprValue(layout.StringAV(layout.CredTypeBalance)))).
		Set(created, expression.IfNotExists(created, nowV)).
		Set(expression.Name(layout.AcctUpdatedAt), nowV)
	for _, attr := range setNow {
		upd = upd.Set(expression.Name(attr), nowV)
	}
	for _, attr := range slices.Sorted(maps.Keys(set)) {
		upd = upd.Set(expression.Name(attr), exprValue(set[attr]))
	}
	if a.cfg.CreditExpiry > 0 {
		upd = upd.Set(exp, exprValue(layout.NumberAV(now.Add(a.cfg.CreditExpiry).Unix())))
	}
	upd = upd.Add(expression.Name(layout.CredBalance), exprValue(layout.NumberAV(n)))
	expr := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(a.unexpired(now)))
	return &types.Update{
		TableName:                 &a.tbl.Table,
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
}

// unexpired is the condition that the credits record has no expiry or one
// after now.
func (a *Accounts) unexpired(now time.Time) expression.ConditionBuilder {
	exp := expression.Name(a.tbl.TTLAttribute)
	return expression.AttributeNotExists(exp).Or(exp.GreaterThan(exprValue(layout.NumberAV(now.Unix()))))
}

// expireCredits empties a record that is past its expiry and removes the
// expiry, so that the next grant starts from zero. A record that is not
// (or no longer) expired is left alone.
func (a *Accounts) expireCredits(ctx context.Context, userID string, now time.Time) error {
	ts, _ := layout.AcctTime(now)
	exp := expression.Name(a.tbl.TTLAttribute)
	expr := mustBuild(expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(layout.CredBalance), exprValue(layout.NumberAV(0))).
			Set(expression.Name(layout.AcctUpdatedAt), exprValue(layout.StringAV(ts))).
			Remove(exp)).
		WithCondition(exp.LessThanEqual(exprValue(layout.NumberAV(now.Unix())))))
	_, err := a.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &a.tbl.Table,
		Key:                       a.key(userID, layout.SKCredits),
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if _, ok := isConditionFailed(err); ok {
		return nil
	}
	if err != nil {
		return fmt.Errorf("billing: expire credits (%s): %w", a.keyText(userID, layout.SKCredits), err)
	}
	return nil
}

// MonthlyGrant implements [Accounts.MonthlyGrant]. period identifies the
// billing period the payment covers (e.g. the invoice's period start,
// "2025-01-01T00:00:00Z", or "2025-01"): any string of 1 to 256 bytes,
// compared exactly. eventID (optional) is recorded for audit.
//
// The grant is one transaction of two writes: a marker item
// SK=CREDITS#GRANT#<period> put on condition that it does not exist, and
// the increment of the balance (setting lastReset, lastGrantPeriod and
// lastGrantEventId). A redelivered event finds the marker and changes
// nothing, whatever the order in which periods arrive; the marker expires
// by TTL after GrantMarkerRetention. A tier whose quota is 0 writes
// nothing. A transaction cancelled by concurrent writes to the balance is
// retried a few times; a [*billing.ConflictError] after that is safe to retry.
// The AWS SDK's own retry of a transaction whose answer was lost (after
// DynamoDB applied it) finds the marker too, so the call that granted may
// report Applied false; either way the period was granted once.
func (a *Accounts) MonthlyGrant(ctx context.Context, userID string, tier entitlement.Tier, period, eventID string) (entitlement.MonthlyGrantResult, error) {
	if err := checkAccount("monthly grant", userID); err != nil {
		return entitlement.MonthlyGrantResult{}, err
	}
	t, err := entitlement.ParseTier(string(tier))
	if err != nil {
		return entitlement.MonthlyGrantResult{}, fmt.Errorf("billing: monthly grant: %w", err)
	}
	if err := entitlement.CheckGrantPeriod(period); err != nil {
		return entitlement.MonthlyGrantResult{}, fmt.Errorf("billing: monthly grant: %w", err)
	}
	res := entitlement.MonthlyGrantResult{Tier: t, Period: period}
	quota := a.cfg.Quotas.Quota(t)
	if quota == 0 {
		return res, nil
	}
	markerSK := layout.SKCreditGrantPrefix + period
	attrs := map[string]types.AttributeValue{
		layout.AcctType: stringAV(layout.GrantTypeMarker), layout.GrantPeriod: stringAV(period),
		layout.GrantTier: stringAV(string(t)), layout.GrantAmount: numberAV(quota),
	}
	set := map[string]types.AttributeValue{layout.CredLastGrantPeriod: stringAV(period)}
	if eventID != "" {
		attrs[layout.GrantEventID], set[layout.CredLastGrantEvent] = stringAV(eventID), stringAV(eventID)
	}
	out, err := a.runCreditTx(ctx, creditTx{
		op: "monthly grant", userID: userID, markerSK: markerSK, markerAttrs: attrs, retention: a.cfg.GrantMarkerRetention,
		markerReason: "the period was already granted",
		update: func(now time.Time) *types.Update {
			return a.incrementExpr(quota, now, []string{layout.CredLastReset}, set)
		},
	})
	switch {
	case err != nil:
		return res, err
	case out.kind == creditMarkerExists:
		a.cfg.Logger.DebugContext(ctx, "billing: monthly grant already applied", "user", userID, "period", period, "event", eventID)
		return res, nil
	}
	res.Applied, res.Amount = true, quota
	return res, nil
}

// creditTx is a change of a credit balance made once per marker: one
// transaction of the marker item, put on condition that it does not exist,
// and the update of the balance.
type creditTx struct {
	op       string // in errors and logs
	userID   string
	markerSK string
	// markerAttrs are the marker's attributes besides its key, createdAt
	// and expiry, which is retention after the transaction's now.
	markerAttrs  map[string]types.AttributeValue
	retention    time.Duration
	markerReason string // what an existing marker means, in a conflict
	// update is the update of the balance at now, without its key: its
	// condition fails for a record past its expiry, and for take also for
	// a balance too low.
	update func(now time.Time) *types.Update
	// take makes a failed balance condition a refusal (creditRefused)
	// rather than an expired record to empty.
	take bool
	// returnOld asks the cancelled transaction for the items as their
	// conditions saw them (creditOutcome.item).
	returnOld bool
}

// creditOutcomeKind is how a credit transaction ended without error.
type creditOutcomeKind int

const (
	creditApplied      creditOutcomeKind = iota // both writes applied
	creditMarkerExists                          // the marker existed: nothing written
	creditRefused                               // take: the balance condition failed, nothing written
)

// creditOutcome is the outcome of [Accounts.runCreditTx].
type creditOutcome struct {
	kind creditOutcomeKind
	// now is the instant of the last attempt.
	now time.Time
	// item is, with returnOld, the marker (creditMarkerExists) or the
	// balance (creditRefused) as the condition saw it; nil when the
	// server returned none.
	item map[string]types.AttributeValue
}

// creditMarker is a marker item written at now: its key, attrs, createdAt
// and an expiry retention after now.
func (a *Accounts) creditMarker(userID, sk string, attrs map[string]types.AttributeValue, now time.Time, retention time.Duration) map[string]types.AttributeValue {
	ts, _ := layout.AcctTime(now)
	m := a.key(userID, sk)
	maps.Copy(m, attrs)
	m[layout.AcctCreatedAt] = stringAV(ts)
	m[a.tbl.TTLAttribute] = numberAV(now.Add(retention).Unix())
	return m
}

// runCreditTx runs tx until it is applied or answered. A balance past its
// expiry is emptied ([Accounts.expireCredits]) and the transaction
// retried; so is a transaction cancelled by a concurrent one, after a
// backoff; both at most maxExpiryRetries times, then the cancellation is
// translated ([*billing.ConflictError]).
func (a *Accounts) runCreditTx(ctx context.Context, tx creditTx) (creditOutcome, error) {
	balanceKey := a.keyText(tx.userID, layout.SKCredits)
	ops := []txOp{
		{key: a.keyText(tx.userID, tx.markerSK), reason: tx.markerReason, exists: true},
		{key: balanceKey, reason: "the balance kept expiring concurrently, or its expiry attribute is not a number"},
	}
	for attempt := 0; ; attempt++ {
		now := a.now()
		put := putAbsentSDK(&a.tbl.Table, a.creditMarker(tx.userID, tx.markerSK, tx.markerAttrs, now, tx.retention), layout.AttrPK)
		upd := tx.update(now)
		upd.Key = a.key(tx.userID, layout.SKCredits)
		if tx.returnOld {
			put.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
			upd.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		}
		_, err := a.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: put}, {Update: upd},
		}})
		if err == nil {
			return creditOutcome{kind: creditApplied, now: now}, nil
		}
		reasons, codes := cancelCodes(err, 2)
		switch {
		case codes == nil:
		case codes[0] == codeConditionFailed:
			return creditOutcome{kind: creditMarkerExists, now: now, item: reasons[0].Item}, nil
		case codes[1] == codeConditionFailed && tx.take:
			return creditOutcome{kind: creditRefused, now: now, item: reasons[1].Item}, nil
		case attempt >= maxExpiryRetries:
		case codes[1] == codeConditionFailed:
			if err := a.expireCredits(ctx, tx.userID, now); err != nil {
				return creditOutcome{}, err
			}
			continue
		case codes[0] == codeTxConflict || codes[1] == codeTxConflict:
			// A concurrent write to the balance: nothing was written, retry.
			if err := txBackoff(ctx, tx.op, balanceKey, attempt); err != nil {
				return creditOutcome{}, err
			}
			continue
		}
		return creditOutcome{}, translateWrite(tx.op, ops, err)
	}
}
