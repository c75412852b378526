package billing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing/internal/timefmt"
)

// Provider subscription errors.
var (
	// ErrInvalidProviderStatus reports a subscription status other than the
	// six a processor reports. The error is a [*FieldError] naming "status"
	// and the value.
	ErrInvalidProviderStatus = errors.New("billing: invalid provider subscription status")

	// ErrInvalidProviderEvent reports a [ProviderEvent] with a missing or malformed
	// field. The error is a [*FieldError] naming the field.
	ErrInvalidProviderEvent = errors.New("billing: invalid provider event")
)

// ProviderStatus is the status of a subscription billed by an external
// processor, spelled as the processor (Stripe) spells it.
type ProviderStatus string

// The provider subscription statuses.
const (
	ProviderActive            ProviderStatus = "active"
	ProviderCanceled          ProviderStatus = "canceled"
	ProviderPastDue           ProviderStatus = "past_due"
	ProviderTrialing          ProviderStatus = "trialing"
	ProviderIncomplete        ProviderStatus = "incomplete"
	ProviderIncompleteExpired ProviderStatus = "incomplete_expired"
)

// ProviderStatuses returns every known status.
func ProviderStatuses() []ProviderStatus {
	return []ProviderStatus{ProviderActive, ProviderCanceled, ProviderPastDue, ProviderTrialing, ProviderIncomplete, ProviderIncompleteExpired}
}

// Valid reports whether s is a known status.
func (s ProviderStatus) Valid() bool {
	switch s {
	case ProviderActive, ProviderCanceled, ProviderPastDue, ProviderTrialing, ProviderIncomplete, ProviderIncompleteExpired:
		return true
	}
	return false
}

// ParseProviderStatus reads a status strictly: exactly one of the six
// lower-case values. Anything else, including a status a processor adds
// later ("paused", "unpaid"), is a [*FieldError] wrapping
// [ErrInvalidProviderStatus], so that a new status surfaces as an error
// instead of silently granting or denying access.
func ParseProviderStatus(s string) (ProviderStatus, error) {
	if st := ProviderStatus(s); st.Valid() {
		return st, nil
	}
	return "", &FieldError{Field: "status", Value: s, Err: ErrInvalidProviderStatus}
}

// ProviderEvent is one subscription event of the external processor
// (customer.subscription.created/updated/deleted), already mapped by the
// host to the user and the tier.
type ProviderEvent struct {
	// EventID is the processor's event ID ("evt_…"). Required.
	EventID string
	// Created is when the processor created the event; events apply in
	// this order (see [ProviderEvent.NewerThan] for events of the same
	// instant). Required.
	Created time.Time
	// UserID is the account the subscription belongs to. Required.
	UserID string
	// SubscriptionID is the processor's subscription ID ("sub_…"). Required.
	SubscriptionID string
	// Customer is the processor's customer ID ("cus_…"). Required.
	Customer string
	// Tier is the plan's tier: INITIATE, JOURNEYMAN, SAGE or GUILDMASTER
	// (any case). Required.
	Tier Tier
	// Status is the subscription's status. Required.
	Status ProviderStatus
	// CurrentPeriodStart and CurrentPeriodEnd bound the paid period
	// (optional; the end is the grace limit of a cancelled subscription).
	CurrentPeriodStart, CurrentPeriodEnd time.Time
	// CancelAtPeriodEnd reports a cancellation scheduled for the period end.
	CancelAtPeriodEnd bool
}

// MaxProviderID bounds the processor's IDs (event, subscription,
// customer, payment intent) stored in keys and attributes.
const MaxProviderID = 255

// Normalize validates ev and returns it with its tier in canonical case
// and its times in UTC. A bad field is a [*FieldError] naming it, wrapping
// [ErrInvalidProviderEvent], [ErrInvalidProviderStatus], [ErrInvalidTier] or
// [ErrInvalidAccount].
func (ev ProviderEvent) Normalize() (ProviderEvent, error) {
	bad := func(field, value string, err error) (ProviderEvent, error) {
		return ProviderEvent{}, &FieldError{Field: field, Value: value, Err: err}
	}
	if err := CheckAccountID(ev.UserID); err != nil {
		return bad("UserID", ev.UserID, ErrInvalidAccount)
	}
	for _, f := range []struct{ name, v string }{{"EventID", ev.EventID}, {"SubscriptionID", ev.SubscriptionID}, {"Customer", ev.Customer}} {
		if f.v == "" || len(f.v) > MaxProviderID {
			return bad(f.name, f.v, fmt.Errorf("%w: 1 to %d bytes required", ErrInvalidProviderEvent, MaxProviderID))
		}
	}
	if _, err := ParseProviderStatus(string(ev.Status)); err != nil {
		return ProviderEvent{}, err
	}
	t, err := ParseTier(string(ev.Tier))
	if err != nil {
		return ProviderEvent{}, err
	}
	if t == TierFree {
		return bad("tier", string(ev.Tier), fmt.Errorf("%w: a provider subscription has a paid tier", ErrInvalidTier))
	}
	ev.Tier = t
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"Created", &ev.Created}, {"CurrentPeriodStart", &ev.CurrentPeriodStart}, {"CurrentPeriodEnd", &ev.CurrentPeriodEnd}} {
		if f.t.IsZero() {
			if f.name == "Created" {
				return bad(f.name, "", fmt.Errorf("%w: required", ErrInvalidProviderEvent))
			}
			continue
		}
		if _, err := timefmt.Nanos(*f.t); err != nil {
			return bad(f.name, f.t.String(), ErrInvalidDate)
		}
		*f.t = f.t.UTC()
	}
	if !ev.CurrentPeriodStart.IsZero() && !ev.CurrentPeriodEnd.IsZero() && ev.CurrentPeriodEnd.Before(ev.CurrentPeriodStart) {
		return bad("CurrentPeriodEnd", ev.CurrentPeriodEnd.String(), fmt.Errorf("%w: before CurrentPeriodStart", ErrInvalidProviderEvent))
	}
	return ev, nil
}

// NewerThan reports whether ev orders after the last event applied to s.
// Events apply in the order of their Created time. A processor stamps
// events in whole seconds, so events of one change (a deletion and the
// update before it) often share an instant; among those, the event that
// ends more of the subscription orders last, so a deletion or
// cancellation is final over an update of the same instant whatever the
// delivery order:
//
//  1. an incomplete subscription (only ever its first state);
//  2. any other update (active, trialing, past_due, ...);
//  3. an update that sets CancelAtPeriodEnd;
//  4. a cancellation or deletion (status canceled or incomplete_expired).
//
// Events of the same instant and rank are ordered by EventID, so the
// order is total and every store picks the same winner. The rank of the
// last event applied is that of s's Status and CancelAtPeriodEnd, which
// the event wrote. ev is newer when s has no last event (never written by
// an event), when ev was created later, or when it was created at the
// same instant and orders after by rank, then EventID. A replay of the
// last event (same instant, rank and ID) is not newer.
func (ev ProviderEvent) NewerThan(s ProviderSubscription) bool {
	if s.LastEventAt.IsZero() {
		return true
	}
	if !ev.Created.Equal(s.LastEventAt) {
		return ev.Created.After(s.LastEventAt)
	}
	if r, last := providerRank(ev.Status, ev.CancelAtPeriodEnd), providerRank(s.Status, s.CancelAtPeriodEnd); r != last {
		return r > last
	}
	return ev.EventID > s.LastEventID
}

// Rank orders the state ev carries among events of the same instant: see
// providerRank.
func (ev ProviderEvent) Rank() int { return providerRank(ev.Status, ev.CancelAtPeriodEnd) }

// providerRank orders the states events of the same instant carry (see
// [ProviderEvent.NewerThan]): 3 ended, 2 cancelling at the period end, 1
// any other, 0 incomplete.
func providerRank(st ProviderStatus, cancelAtPeriodEnd bool) int {
	switch {
	case st == ProviderCanceled || st == ProviderIncompleteExpired:
		return 3
	case cancelAtPeriodEnd:
		return 2
	case st == ProviderIncomplete:
		return 0
	}
	return 1
}

// sameInstantCondition is the condition under which an event of the given
// rank, created at the instant of the stored last event, orders after it
// (the order of [ProviderEvent.NewerThan]): the stored status and
// cancelAtPeriodEnd, written by the last event, rank lower, or rank the
// same and the stored lastEventId is smaller than eventID.
func sameInstantCondition(rank int, eventID string) expression.ConditionBuilder {
	st, cape := expression.Name(subStatus), expression.Name(subCancelAtEnd)
	endedV, expiredV := expression.Value(attrS(string(ProviderCanceled))), expression.Value(attrS(string(ProviderIncompleteExpired)))
	incompleteV, trueV := expression.Value(attrS(string(ProviderIncomplete))), expression.Value(attrBool(true))
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
	cond := same.And(expression.Name(subLastEventID).LessThan(expression.Value(attrS(eventID))))
	if hasLower {
		cond = lower.Or(cond)
	}
	return cond
}

// ProviderSubscription is the mirror of a processor's subscription: the
// item PK=USER#<id>, SK=SUBSCRIPTION#<subscriptionId>.
type ProviderSubscription struct {
	UserID         string
	SubscriptionID string
	// CustomerID is stripeCustomerId.
	CustomerID string
	// Tier is planTier.
	Tier   Tier
	Status ProviderStatus
	// CurrentPeriodStart and CurrentPeriodEnd bound the paid period; zero
	// when unknown.
	CurrentPeriodStart, CurrentPeriodEnd time.Time
	CancelAtPeriodEnd                    bool
	// AuthProvider is the host's "provider" attribute (local or cognito):
	// read, never written, by the library.
	AuthProvider string
	// LastEventID and LastEventAt identify the newest event applied
	// (attributes added by this library; empty on records written by
	// others, which any event overwrites).
	LastEventID string
	LastEventAt time.Time
	// CreatedAt and UpdatedAt are the record's timestamps.
	CreatedAt, UpdatedAt time.Time
}

// Attribute names of the subscription record, as existing items spell them.
const (
	subID           = "subscriptionId"
	subPlanTier     = "planTier"
	subStatus       = "status"
	subCustomer     = "stripeCustomerId"
	subPeriodStart  = "currentPeriodStart"
	subPeriodEnd    = "currentPeriodEnd"
	subCancelAtEnd  = "cancelAtPeriodEnd"
	subAuthProvider = "provider"
	subLastEventID  = "lastEventId"
	subLastEventAt  = "lastEventAt"
	subTypeValue    = "Subscription"
)

// DecodeProviderSubscription decodes a subscription item of this layout.
// Status and planTier are checked strictly; a bad attribute is a
// [*FieldError] naming it and the item's key.
func (c SingleTableConfig) DecodeProviderSubscription(item map[string]types.AttributeValue) (ProviderSubscription, error) {
	c = c.decodeDefaults()
	r := newItemReader(item)
	s := ProviderSubscription{
		UserID:             c.accountID(r),
		SubscriptionID:     r.str(subID),
		CustomerID:         r.str(subCustomer),
		CurrentPeriodStart: r.timestamp(subPeriodStart),
		CurrentPeriodEnd:   r.timestamp(subPeriodEnd),
		CancelAtPeriodEnd:  r.boolean(subCancelAtEnd),
		AuthProvider:       r.str(subAuthProvider),
		LastEventID:        r.str(subLastEventID),
		LastEventAt:        r.timestamp(subLastEventAt),
		CreatedAt:          r.timestamp(acctCreatedAt),
		UpdatedAt:          r.timestamp(acctUpdatedAt),
	}
	sk := r.required(AttrSK)
	id, ok := strings.CutPrefix(sk, SKSubscriptionPrefix)
	if r.err == nil && (!ok || id == "") {
		r.fail(AttrSK, sk, fmt.Errorf("%w: not a subscription item", ErrInvalidItem))
	}
	if s.SubscriptionID == "" {
		s.SubscriptionID = id
	}
	st, tier := r.required(subStatus), r.required(subPlanTier)
	if r.err != nil {
		return ProviderSubscription{}, r.err
	}
	var err error
	if s.Status, err = ParseProviderStatus(st); err != nil {
		r.fail(subStatus, st, ErrInvalidProviderStatus)
	} else if s.Tier, err = ParseTier(tier); err != nil {
		r.fail(subPlanTier, tier, ErrInvalidTier)
	}
	if r.err != nil {
		return ProviderSubscription{}, r.err
	}
	return s, nil
}

// ApplyProviderEvent implements [Accounts.ApplyProviderEvent] with one
// conditional UpdateItem. The write happens only if the record does not
// exist, was never written by an event (no lastEventAt), or its last event
// orders before ev (see [ProviderEvent.NewerThan]); so an older event never
// overwrites a newer one, a deletion is not undone by an update of the same
// instant, and a replayed event changes nothing: those return applied
// false and no error. Attributes the library does not own (provider) and
// createdAt are kept. lastEventAt is written with a fixed nine-digit
// fraction so that string order in the condition is time order; at the
// same instant the condition ranks the stored status and cancelAtPeriodEnd
// (the last event's), so items written before the rank existed need no
// new attribute.
func (a *DynamoAccounts) ApplyProviderEvent(ctx context.Context, ev ProviderEvent) (bool, error) {
	n, err := ev.Normalize()
	if err != nil {
		return false, fmt.Errorf("billing: apply provider event %q: %w", ev.EventID, err)
	}
	ev = n
	now := a.now()
	ts, _ := acctTime(now)
	at, _ := timefmt.Nanos(ev.Created)
	sk := SKSubscriptionPrefix + ev.SubscriptionID
	nowV := expression.Value(attrS(ts))
	created := expression.Name(acctCreatedAt)
	upd := expression.Set(expression.Name(acctType), expression.Value(attrS(subTypeValue))).
		Set(expression.Name(subID), expression.Value(attrS(ev.SubscriptionID))).
		Set(expression.Name(subPlanTier), expression.Value(attrS(string(ev.Tier)))).
		Set(expression.Name(subStatus), expression.Value(attrS(string(ev.Status)))).
		Set(expression.Name(subCustomer), expression.Value(attrS(ev.Customer))).
		Set(expression.Name(subCancelAtEnd), expression.Value(attrBool(ev.CancelAtPeriodEnd))).
		Set(expression.Name(subLastEventID), expression.Value(attrS(ev.EventID))).
		Set(expression.Name(subLastEventAt), expression.Value(attrS(at))).
		Set(expression.Name(acctUpdatedAt), nowV).
		Set(created, expression.IfNotExists(created, nowV))
	for _, p := range []struct {
		name string
		t    time.Time
	}{{subPeriodStart, ev.CurrentPeriodStart}, {subPeriodEnd, ev.CurrentPeriodEnd}} {
		if p.t.IsZero() {
			upd = upd.Remove(expression.Name(p.name))
			continue
		}
		v, _ := acctTime(p.t)
		upd = upd.Set(expression.Name(p.name), expression.Value(attrS(v)))
	}
	lea, leaV := expression.Name(subLastEventAt), expression.Value(attrS(at))
	cond := expression.Or(expression.AttributeNotExists(expression.Name(AttrPK)), expression.AttributeNotExists(lea),
		lea.LessThan(leaV), lea.Equal(leaV).And(sameInstantCondition(ev.Rank(), ev.EventID)))
	expr := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
	_, err = a.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &a.cfg.Table.Table,
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
func (a *DynamoAccounts) GetProviderSubscription(ctx context.Context, userID, subscriptionID string) (ProviderSubscription, error) {
	if err := checkAccount("get provider subscription", userID); err != nil {
		return ProviderSubscription{}, err
	}
	if subscriptionID == "" {
		return ProviderSubscription{}, fmt.Errorf("%w: empty subscription ID", ErrNotFound)
	}
	sk := SKSubscriptionPrefix + subscriptionID
	item, err := a.getItem(ctx, "get provider subscription", userID, sk)
	if err != nil {
		return ProviderSubscription{}, err
	}
	if item == nil {
		return ProviderSubscription{}, fmt.Errorf("%w: %s", ErrNotFound, a.keyText(userID, sk))
	}
	return a.cfg.Table.DecodeProviderSubscription(item)
}

// ListProviderSubscriptions implements [Accounts.ListProviderSubscriptions]
// with one Query (SK begins_with SUBSCRIPTION#). An undecodable item fails
// the call with a [*FieldError] naming it.
func (a *DynamoAccounts) ListProviderSubscriptions(ctx context.Context, userID string) ([]ProviderSubscription, error) {
	if err := checkAccount("list provider subscriptions", userID); err != nil {
		return nil, err
	}
	items, err := a.queryAccount(ctx, "list provider subscriptions", userID, SKSubscriptionPrefix)
	if err != nil {
		return nil, err
	}
	return decodeAll(items, a.cfg.Table.DecodeProviderSubscription)
}
