package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dynabill/billing/internal/sdkav"
	"github.com/dynabill/billing/notice"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
)

// ClaimReminder implements [notice.ReminderClaimer] on the single table:
// one transaction of two conditional updates.
//
//   - The period: billing_reminded_for, billing_reminded_at and
//     billing_reminder_claim, on the legacy tables' condition (see
//     [Repository.ClaimReminder]): this is what makes the claim once per
//     period and billing date.
//   - Its subscription item: LastReminderDate becomes at's day, with the
//     item's Version (one up) and UpdatedAt, conditional on the version
//     read just before, as every write of the item is; its other
//     attributes keep their bytes. When only that version moved (another
//     period of the subscription was written meanwhile) the item is read
//     again and the transaction retried.
//
// A period whose subscription item is missing is claimed alone.
func (r *SingleTableRepository) ClaimReminder(ctx context.Context, rem notice.Reminder, at time.Time) (notice.ReminderClaim, error) {
	c, attrs, bd, err := layout.ReminderClaimItem(rem, at)
	if err != nil {
		return notice.ReminderClaim{}, err
	}
	ref, err := layout.ParseSubscriptionRef(rem.UserID)
	if err != nil {
		return notice.ReminderClaim{}, &billing.ConflictError{Op: "claim reminder", Key: rem.Key(),
			Reason: "record does not exist: the user ID names no subscription", Err: billing.ErrConflict}
	}
	pkey := r.periodKey(ref, bd)
	expr := reminderClaim(rem, bd, attrs)
	period := &types.Update{
		TableName: r.table(), Key: pkey,
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	day := entitlement.PaymentDate(at)
	for attempt := 0; ; attempt++ {
		cur, raw, ok, err := r.readSubscription(ctx, ref)
		if err != nil {
			return notice.ReminderClaim{}, fmt.Errorf("billing: claim reminder (%s): %w", rem.Key(), err)
		}
		if !ok {
			if err := claimRecordItem(ctx, r.cfg.Client, r.table(), pkey, rem, bd, attrs); err != nil {
				return notice.ReminderClaim{}, err
			}
			return c, nil
		}
		sub, err := r.reminderSubUpdate(ref, cur, day)
		if err != nil {
			return notice.ReminderClaim{}, fmt.Errorf("billing: claim reminder (%s): %w", rem.Key(), err)
		}
		_, err = r.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{{Update: period}, {Update: sub}},
		})
		if err == nil {
			c.Token = layout.ReminderToken{ID: c.Token, Sub: true, Version: cur.Version + 1,
				PrevLastReminder: stringOf(raw[layout.AttrLastReminderDate])}.String()
			return c, nil
		}
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) {
			rs := tce.CancellationReasons
			if len(rs) > 0 && aws.ToString(rs[0].Code) == "ConditionalCheckFailed" {
				return notice.ReminderClaim{}, claimFailure(ctx, r.cfg.Client, r.table(), pkey, rem, bd, sdkav.FromSDK(rs[0].Item))
			}
			if attempt < maxSubRetries && retryableClaim(rs) {
				continue
			}
		}
		return notice.ReminderClaim{}, fmt.Errorf("billing: claim reminder (%s): %w", rem.Key(), err)
	}
}

// retryableClaim reports whether a claim's transaction was cancelled only
// because the subscription item's version moved or a concurrent
// transaction held one of its items: read again and retry.
func retryableClaim(reasons []types.CancellationReason) bool {
	retry := false
	for i, r := range reasons {
		switch code := aws.ToString(r.Code); {
		case code == "TransactionConflict" || (i == 1 && code == "ConditionalCheckFailed"):
			retry = true
		case code != "" && code != "None":
			return false
		}
	}
	return retry
}

// ReleaseReminder implements [notice.ReminderClaimer] on the single
// table: the period's claim attributes are REMOVEd on condition that it
// still holds c's claim ID, and in the same transaction the subscription
// item's LastReminderDate is put back as it was before the claim, if the
// item's version is still the one the claim left (nothing else wrote it
// since). When it moved, the period is released alone and
// LastReminderDate keeps the claim's day.
func (r *SingleTableRepository) ReleaseReminder(ctx context.Context, c notice.ReminderClaim) error {
	tok, err := layout.ParseReminderToken(c.Token)
	if err != nil {
		return err
	}
	bd, err := timefmt.Seconds(c.BillingDate)
	if err != nil {
		return fmt.Errorf("billing: release reminder (%s): %w: %w", c.Key(), billing.ErrInvalidDate, err)
	}
	ref, err := layout.ParseSubscriptionRef(c.UserID)
	if err != nil {
		return layout.ReminderNotOurs(c)
	}
	pkey := r.periodKey(ref, bd)
	if tok.Sub {
		if done, err := r.releaseWithSubscription(ctx, ref, pkey, c, tok); done || err != nil {
			return err
		}
	}
	return releaseRecordItem(ctx, r.cfg.Client, r.table(), pkey, c, tok.ID)
}

// releaseWithSubscription is ReleaseReminder's transaction with the
// subscription item. done is false when the item's version moved (or
// its previous LastReminderDate cannot be put back): the period is then
// to be released alone.
func (r *SingleTableRepository) releaseWithSubscription(ctx context.Context, ref layout.SubscriptionRef, pkey map[string]types.AttributeValue, c notice.ReminderClaim, tok layout.ReminderToken) (done bool, err error) {
	var prev time.Time
	if tok.PrevLastReminder != "" {
		if prev, err = time.Parse(layout.PayDayLayout, tok.PrevLastReminder); err != nil {
			return false, nil
		}
	}
	cur, _, ok, err := r.readSubscription(ctx, ref)
	if err != nil || !ok || cur.Version != tok.Version {
		return false, nil
	}
	sub, err := r.reminderSubUpdate(ref, cur, prev)
	if err != nil {
		return false, nil
	}
	expr := reminderRelease(tok.ID)
	_, err = r.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName: r.table(), Key: pkey,
			UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		}}, {Update: sub}},
	})
	if err == nil {
		return true, nil
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		if rs := tce.CancellationReasons; len(rs) > 0 && aws.ToString(rs[0].Code) == "ConditionalCheckFailed" {
			return true, layout.ReminderNotOurs(c)
		}
		return false, nil
	}
	return true, fmt.Errorf("billing: release reminder (%s): %w", c.Key(), err)
}

// periodKey is the key of a period.
func (r *SingleTableRepository) periodKey(ref layout.SubscriptionRef, billingDateKey string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{layout.AttrPK: stringAV(r.tbl.AccountPK(ref.AccountID)), layout.AttrSK: stringAV(layout.PeriodSK(ref, billingDateKey))}
}

// readSubscription reads and decodes a subscription item with a
// consistent read; ok is false when there is none.
func (r *SingleTableRepository) readSubscription(ctx context.Context, ref layout.SubscriptionRef) (entitlement.RecurringSubscription, map[string]types.AttributeValue, bool, error) {
	key := map[string]types.AttributeValue{layout.AttrPK: stringAV(r.tbl.AccountPK(ref.AccountID)), layout.AttrSK: stringAV(ref.SK())}
	out, err := r.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: r.table(), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return entitlement.RecurringSubscription{}, nil, false, fmt.Errorf("read subscription (%s): %w", r.keyText(ref.AccountID, ref.SK()), err)
	}
	if len(out.Item) == 0 {
		return entitlement.RecurringSubscription{}, nil, false, nil
	}
	cur, err := r.tbl.DecodeRecurringSubscription(sdkav.FromSDK(out.Item))
	if err != nil {
		return entitlement.RecurringSubscription{}, nil, false, fmt.Errorf("subscription (%s): %w", r.keyText(ref.AccountID, ref.SK()), err)
	}
	return cur, out.Item, true, nil
}

// reminderSubUpdate is the update of the subscription item cur (as read)
// to LastReminderDate lastReminder, UpdatedAt now and the next version,
// conditional on cur's version: only the attributes whose encoding
// changes are SET (see [writeBack]).
func (r *SingleTableRepository) reminderSubUpdate(ref layout.SubscriptionRef, cur entitlement.RecurringSubscription, lastReminder time.Time) (*types.Update, error) {
	was, err := r.tbl.EncodeRecurringSubscription(cur)
	if err != nil {
		return nil, err
	}
	next := cur
	next.LastReminderDate, next.UpdatedAt, next.Version = lastReminder, r.pay.now(), cur.Version+1
	enc, err := r.tbl.EncodeRecurringSubscription(next)
	if err != nil {
		return nil, err
	}
	key := map[string]types.AttributeValue{layout.AttrPK: stringAV(r.tbl.AccountPK(ref.AccountID)), layout.AttrSK: stringAV(ref.SK())}
	cond := expression.Name(layout.PayVersion).Equal(exprValue(layout.NumberAV(int64(cur.Version))))
	return updateAction(r.table(), key, was, enc, cond)
}
