package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"github.com/dynabill/billing/notice"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
)

var (
	_ notice.ReminderClaimer = (*Repository)(nil)
	_ notice.ReminderClaimer = (*SingleTableRepository)(nil)
)

// reminderClaim is the claim of a pre-billing reminder on a record's item
// (a legacy record or a single-table period: both are written by the
// record's codec): SET the claim's attributes, on condition that the item
// exists with the reminder's status and subscription_id (when it sets
// them) and is not reminded for this billing date already. It is the
// DynamoDB form of [layout.ReminderClaimRefused].
func reminderClaim(rem notice.Reminder, bd string, attrs map[string]av.AttributeValue) expression.Expression {
	cond := expression.AttributeExists(expression.Name(layout.AttrUserID))
	if rem.Status != "" {
		cond = cond.And(expression.Name(layout.AttrBillingStatus).Equal(exprValue(layout.StringAV(string(rem.Status)))))
	}
	if rem.SubscriptionID != "" {
		cond = cond.And(expression.Name(layout.AttrSubscriptionID).Equal(exprValue(layout.StringAV(rem.SubscriptionID))))
	}
	remindedFor := expression.Name(layout.AttrRemindedFor)
	cond = cond.And(expression.AttributeNotExists(remindedFor).Or(remindedFor.NotEqual(exprValue(layout.StringAV(bd)))))
	var upd expression.UpdateBuilder
	for _, a := range layout.ReminderAttributes() {
		upd = upd.Set(expression.Name(a), exprValue(attrs[a]))
	}
	return mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
}

// reminderRelease removes the claim's attributes from a record's item, on
// condition that it still holds the claim with this ID.
func reminderRelease(id string) expression.Expression {
	var upd expression.UpdateBuilder
	for _, a := range layout.ReminderAttributes() {
		upd = upd.Remove(expression.Name(a))
	}
	cond := expression.Name(layout.AttrReminderClaim).Equal(exprValue(layout.StringAV(id)))
	return mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
}

// claimFailure returns the error of a claim whose condition failed: why
// item (the record's item as the failed write saw it, when the server
// returned it) refuses it. When the server returned no item, which is
// also what it does for an item that does not exist, the item is read
// again. An item that now allows the claim changed in between: a
// conflict.
func claimFailure(ctx context.Context, client API, table *string, key map[string]types.AttributeValue, rem notice.Reminder, bd string, item map[string]av.AttributeValue) error {
	if len(item) == 0 {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return fmt.Errorf("billing: claim reminder (%s): read after a failed condition: %w", rem.Key(), err)
		}
		item = sdkav.FromSDK(out.Item)
	}
	if err := layout.ReminderClaimRefused(rem, bd, item); err != nil {
		return err
	}
	return &billing.ConflictError{Op: "claim reminder", Key: rem.Key(), Reason: "the record changed during the claim", Err: billing.ErrConflict}
}

// claimRecordItem claims rem on the record's item at key with one
// conditional UpdateItem (see [reminderClaim]).
func claimRecordItem(ctx context.Context, client API, table *string, key map[string]types.AttributeValue, rem notice.Reminder, bd string, attrs map[string]av.AttributeValue) error {
	expr := reminderClaim(rem, bd, attrs)
	_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: table, Key: key,
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	if ccf, ok := isConditionFailed(err); ok {
		return claimFailure(ctx, client, table, key, rem, bd, sdkav.FromSDK(ccf.Item))
	}
	return fmt.Errorf("billing: claim reminder (%s): %w", rem.Key(), err)
}

// releaseRecordItem releases the claim with ID id on the record's item at
// key with one conditional UpdateItem (see [reminderRelease]).
func releaseRecordItem(ctx context.Context, client API, table *string, key map[string]types.AttributeValue, c notice.ReminderClaim, id string) error {
	expr := reminderRelease(id)
	_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: table, Key: key,
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if _, ok := isConditionFailed(err); ok {
		return layout.ReminderNotOurs(c)
	}
	if err != nil {
		return fmt.Errorf("billing: release reminder (%s): %w", c.Key(), err)
	}
	return nil
}

// ClaimReminder implements [notice.ReminderClaimer] on the legacy tables:
// one conditional UpdateItem of the record that SETs billing_reminded_for
// (the record's billing_date), billing_reminded_at (at) and
// billing_reminder_claim (the claim's random ID), and nothing else. No
// history row is written: a reminder is not a change of the record's
// state. Update and SetAttempt never touch these attributes; AddAll's
// rewrite of the record carries them (unless the new record sets them).
func (r *Repository) ClaimReminder(ctx context.Context, rem notice.Reminder, at time.Time) (notice.ReminderClaim, error) {
	c, attrs, bd, err := layout.ReminderClaimItem(rem, at)
	if err != nil {
		return notice.ReminderClaim{}, err
	}
	key := map[string]types.AttributeValue{layout.AttrUserID: stringAV(rem.UserID), layout.AttrBillingDate: stringAV(bd)}
	if err := claimRecordItem(ctx, r.cfg.Client, &r.cfg.Tables.Subscriptions, key, rem, bd, attrs); err != nil {
		return notice.ReminderClaim{}, err
	}
	return c, nil
}

// ReleaseReminder implements [notice.ReminderClaimer] on the legacy
// tables: one UpdateItem that REMOVEs the claim's three attributes, on
// condition that billing_reminder_claim is still c's ID.
func (r *Repository) ReleaseReminder(ctx context.Context, c notice.ReminderClaim) error {
	tok, err := layout.ParseReminderToken(c.Token)
	if err != nil {
		return err
	}
	bd, err := timefmt.Seconds(c.BillingDate)
	if err != nil {
		return fmt.Errorf("billing: release reminder (%s): %w: %w", c.Key(), billing.ErrInvalidDate, err)
	}
	key := map[string]types.AttributeValue{layout.AttrUserID: stringAV(c.UserID), layout.AttrBillingDate: stringAV(bd)}
	return releaseRecordItem(ctx, r.cfg.Client, &r.cfg.Tables.Subscriptions, key, c, tok.ID)
}
