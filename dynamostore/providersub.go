package dynamostore

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
)

// sameInstantCondition is the condition under which an event of the given
// rank, created at the instant of the stored last event, orders after it
// (the order of [entitlement.ProviderEvent.NewerThan]): the stored status and
// cancelAtPeriodEnd, written by the last event, rank lower, or rank the
// same and the stored lastEventId is smaller than eventID.
func sameInstantCondition(rank int, eventID string) expression.ConditionBuilder {
	st, cape := expression.Name(layout.SubStatus), expression.Name(layout.SubCancelAtEnd)
	endedV, expiredV := exprValue(layout.StringAV(string(entitlement.ProviderCanceled))), exprValue(layout.StringAV(string(entitlement.ProviderIncompleteExpired)))
	incompleteV, trueV := exprValue(layout.StringAV(string(entitlement.ProviderIncomplete))), exprValue(boolAV(true))
	ended := st.In(endedV, expiredV)
	notEnded := expression.Not(ended)
	notCape := expression.Not(cape.Equal(trueV)) // also true when the attribute is absent
	incomplete := st.Equal(incompleteV)
	var lower, same expression.ConditionBuilder
	hasLower := true
	switch rank {
	case 3:
		lower, same = notEnded, ended
	case 2:
		lower, same = notEnded.And(notCape), notEnded.And(cape.Equal(trueV))
	case 1:
		lower, same = incomplete.And(notCape), expression.Not(st.In(endedV, expiredV, incompleteV)).And(notCape)
	default:
		same, hasLower = incomplete.And(notCape), false
	}
	cond := same.And(expression.Name(layout.SubLastEventID).LessThan(exprValue(layout.StringAV(eventID))))
	if hasLower {
		cond = lower.Or(cond)
	}
	return cond
}

// ApplyProviderEvent implements [Accounts.ApplyProviderEvent] with one
// conditional UpdateItem. The write happens only if the record does not
// exist, was never written by an event (no lastEventAt), or its last event
// orders before ev (see [entitlement.ProviderEvent.NewerThan]); so an older event never
// overwrites a newer one, a deletion is not undone by an update of the same
// instant, and a replayed event changes nothing: those return applied
// false and no error. Attributes the library does not own (provider) and
// createdAt are kept. lastEventAt is written with a fixed nine-digit
// fraction so that string order in the condition is time order; at the
// same instant the condition ranks the stored status and cancelAtPeriodEnd
// (the last event's), so items written before the rank existed need no
// new attribute.
func (a *Accounts) ApplyProviderEvent(ctx context.Context, ev entitlement.ProviderEvent) (bool, error) {
	n, err := ev.Normalize()
	if err != nil {
		return false, fmt.Errorf("billing: apply provider event %q: %w", ev.EventID, err)
	}
	ev = n
	now := a.now()
	ts, _ := layout.AcctTime(now)
	at, _ := timefmt.Nanos(ev.Created)
	sk := layout.SKSubscriptionPrefix + ev.SubscriptionID
	nowV := exprValue(layout.StringAV(ts))
	created := expression.Name(layout.AcctCreatedAt)
	upd := expression.Set(expression.Name(layout.AcctType), exprValue(layout.StringAV(layout.SubTypeValue))).
		Set(expression.Name(layout.SubID), exprValue(layout.StringAV(ev.SubscriptionID))).
		Set(expression.Name(layout.SubPlanTier), exprValue(layout.StringAV(string(ev.Tier)))).
		Set(expression.Name(layout.SubStatus), exprValue(layout.StringAV(string(ev.Status)))).
		Set(expression.Name(layout.SubCustomer), exprValue(layout.StringAV(ev.Customer))).
		Set(expression.Name(layout.SubCancelAtEnd), exprValue(boolAV(ev.CancelAtPeriodEnd))).
		Set(expression.Name(layout.SubLastEventID), exprValue(layout.StringAV(ev.EventID))).
		Set(expression.Name(layout.SubLastEventAt), exprValue(layout.StringAV(at))).
		Set(expression.Name(layout.AcctUpdatedAt), nowV).
		Set(created, expression.IfNotExists(created, nowV))
	for _, p := range []struct {
		name string
		t    time.Time
	}{{layout.SubPeriodStart, ev.CurrentPeriodStart}, {layout.SubPeriodEnd, ev.CurrentPeriodEnd}} {
		if p.t.IsZero() {
			upd = upd.Remove(expression.Name(p.name))
			continue
		}
		v, _ := layout.AcctTime(p.t)
		upd = upd.Set(expression.Name(p.name), exprValue(layout.StringAV(v)))
	}
	lea, leaV := expression.Name(layout.SubLastEventAt), exprValue(layout.StringAV(at))
	cond := expression.Or(expression.AttributeNotExists(expression.Name(layout.AttrPK)), expression.AttributeNotExists(lea),
		lea.LessThan(leaV), lea.Equal(leaV).And(sameInstantCondition(ev.Rank(), ev.EventID)))
	expr := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
	_, err = a.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &a.tbl.Table,
		Key:                       a.key(ev.UserID, sk),
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if _, ok := isConditionFailed(err); ok {
		a.cfg.Logger.DebugContext(ctx, "billing: provider event not newer than the record; ignored",
			"event", ev.EventID, "subscription", ev.SubscriptionID, "user", ev.UserID)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("billing: apply provider event %s (%s): %w", ev.EventID, a.keyText(ev.UserID, sk), err)
	}
	return true, nil
}

// GetProviderSubscription implements [Accounts.GetProviderSubscription].
func (a *Accounts) GetProviderSubscription(ctx context.Context, userID, subscriptionID string) (entitlement.ProviderSubscription, error) {
	if err := checkAccount("get provider subscription", userID); err != nil {
		return entitlement.ProviderSubscription{}, err
	}
	if subscriptionID == "" {
		return entitlement.ProviderSubscription{}, fmt.Errorf("%w: empty subscription ID", billing.ErrNotFound)
	}
	sk := layout.SKSubscriptionPrefix + subscriptionID
	item, err := a.getItem(ctx, "get provider subscription", userID, sk)
	if err != nil {
		return entitlement.ProviderSubscription{}, err
	}
	if item == nil {
		return entitlement.ProviderSubscription{}, fmt.Errorf("%w: %s", billing.ErrNotFound, a.keyText(userID, sk))
	}
	return a.tbl.DecodeProviderSubscription(sdkav.FromSDK(item))
}

// ListProviderSubscriptions implements [Accounts.ListProviderSubscriptions]
// with one Query (SK begins_with SUBSCRIPTION#). An undecodable item fails
// the call with a [*billing.FieldError] naming it.
func (a *Accounts) ListProviderSubscriptions(ctx context.Context, userID string) ([]entitlement.ProviderSubscription, error) {
	if err := checkAccount("list provider subscriptions", userID); err != nil {
		return nil, err
	}
	items, err := a.queryAccount(ctx, "list provider subscriptions", userID, layout.SKSubscriptionPrefix)
	if err != nil {
		return nil, err
	}
	return layout.DecodeAll(sdkav.FromSDKItems(items), a.tbl.DecodeProviderSubscription)
}
