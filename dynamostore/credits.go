package dynamostore

import (
	"context"
	"errors"
	"fmt"
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
	return a.tbl.DecodeCredits(item, now)
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
	nowV := expression.Value(layout.StringAV(ts))
	typ, created, exp := expression.Name(layout.AcctType), expression.Name(layout.AcctCreatedAt), expression.Name(a.tbl.TTLAttribute)
	upd := expression.Set(typ, expression.IfNotExists(typ, expression.Value(layout.StringAV(layout.CredTypeBalance)))).
		Set(created, expression.IfNotExists(created, nowV)).
		Set(expression.Name(layout.AcctUpdatedAt), nowV)
	for _, attr := range setNow {
		upd = upd.Set(expression.Name(attr), nowV)
	}
	for _, attr := range slices.Sorted(maps.Keys(set)) {
		upd = upd.Set(expression.Name(attr), expression.Value(set[attr]))
	}
	if a.cfg.CreditExpiry > 0 {
		upd = upd.Set(exp, expression.Value(layout.NumberAV(now.Add(a.cfg.CreditExpiry).Unix())))
	}
	upd = upd.Add(expression.Name(layout.CredBalance), expression.Value(layout.NumberAV(n)))
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
	return expression.AttributeNotExists(exp).Or(exp.GreaterThan(expression.Value(layout.NumberAV(now.Unix()))))
}

// expireCredits empties a record that is past its expiry and removes the
// expiry, so that the next grant starts from zero. A record that is not
// (or no longer) expired is left alone.
func (a *Accounts) expireCredits(ctx context.Context, userID string, now time.Time) error {
	ts, _ := layout.AcctTime(now)
	exp := expression.Name(a.tbl.TTLAttribute)
	expr := mustBuild(expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(layout.CredBalance), expression.Value(layout.NumberAV(0))).
			Set(expression.Name(layout.AcctUpdatedAt), expression.Value(layout.StringAV(ts))).
			Remove(exp)).
		WithCondition(exp.LessThanEqual(expression.Value(layout.NumberAV(now.Unix())))))
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
	ops := []txOp{
		{key: a.keyText(userID, markerSK), reason: "the period was already granted", exists: true},
		{key: a.keyText(userID, layout.SKCredits), reason: "the balance kept expiring concurrently, or its expiry attribute is not a number"},
	}
	for attempt := 0; ; attempt++ {
		now := a.now()
		ts, _ := layout.AcctTime(now)
		marker := a.key(userID, markerSK)
		marker[layout.AcctType], marker[layout.GrantPeriod], marker[layout.GrantTier] = layout.StringAV(layout.GrantTypeMarker), layout.StringAV(period), layout.StringAV(string(t))
		marker[layout.GrantAmount], marker[layout.AcctCreatedAt] = layout.NumberAV(quota), layout.StringAV(ts)
		marker[a.tbl.TTLAttribute] = layout.NumberAV(now.Add(a.cfg.GrantMarkerRetention).Unix())
		set := map[string]types.AttributeValue{layout.CredLastGrantPeriod: layout.StringAV(period)}
		if eventID != "" {
			marker[layout.GrantEventID], set[layout.CredLastGrantEvent] = layout.StringAV(eventID), layout.StringAV(eventID)
		}
		upd := a.incrementExpr(quota, now, []string{layout.CredLastReset}, set)
		upd.Key = a.key(userID, layout.SKCredits)
		_, err := a.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: putAbsent(&a.tbl.Table, marker, layout.AttrPK)},
			{Update: upd},
		}})
		if err == nil {
			res.Applied, res.Amount = true, quota
			return res, nil
		}
		_, codes := cancelCodes(err, 2)
		switch {
		case codes == nil:
		case codes[0] == codeConditionFailed:
			a.cfg.Logger.DebugContext(ctx, "billing: monthly grant already applied", "user", userID, "period", period, "event", eventID)
			return res, nil
		case attempt >= maxExpiryRetries:
		case codes[1] == codeConditionFailed:
			if err := a.expireCredits(ctx, userID, now); err != nil {
				return res, err
			}
			continue
		case codes[0] == codeTxConflict || codes[1] == codeTxConflict:
			// A concurrent write to the balance: nothing was written, retry.
			if err := txBackoff(ctx, "monthly grant", a.keyText(userID, layout.SKCredits), attempt); err != nil {
				return res, err
			}
			continue
		}
		return res, translateWrite("monthly grant", ops, err)
	}
}
