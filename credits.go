package billing

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Credit errors.
var (
	// ErrInsufficientCredits reports a consume larger than the balance.
	// The error is an [*InsufficientCreditsError] carrying the balance.
	ErrInsufficientCredits = errors.New("billing: insufficient credits")

	// ErrInvalidCredits reports a credit amount outside 1..[MaxCreditAmount]
	// or an invalid monthly grant period.
	ErrInvalidCredits = errors.New("billing: invalid credit amount")
)

// MaxCreditAmount bounds the n of one grant, top-up or consume, so that
// balances stay far from int64 overflow.
const MaxCreditAmount int64 = 1_000_000_000_000

// maxGrantPeriod bounds a monthly grant period, which becomes part of a
// sort key.
const maxGrantPeriod = 256

// Attribute names of the credits balance (as existing items spell them)
// and of the monthly grant markers (added by this library).
const (
	credBalance         = "balance"
	credLastTopUp       = "lastTopUp"
	credLastReset       = "lastReset"
	credLastGrantPeriod = "lastGrantPeriod"
	credLastGrantEvent  = "lastGrantEventId"
	credTypeBalance     = "Credits"
	grantTypeMarker     = "CreditGrant"
	grantPeriod         = "period"
	grantTier           = "tier"
	grantAmount         = "amount"
	grantEventID        = "eventId"
)

// Credits is a user's credit balance: the item PK=USER#<id>,
// SK=CREDITS#BALANCE.
type Credits struct {
	// UserID is the account ID.
	UserID string
	// Balance is the number of credits available now: 0 when there is no
	// record, and 0 when the record is past ExpiresAt (DynamoDB deletes
	// expired items up to a few days late; until then they read as empty).
	Balance int64
	// Expired reports that the record is past ExpiresAt.
	Expired bool
	// ExpiresAt is when the whole balance expires; zero for never. Stored
	// as Unix seconds in the table's TTL attribute (expiresAt).
	ExpiresAt time.Time
	// LastTopUp is the time of the last [Accounts.TopUp].
	LastTopUp time.Time
	// LastReset is the time of the last applied [Accounts.MonthlyGrant].
	LastReset time.Time
	// LastGrantPeriod and LastGrantEventID identify the last applied
	// monthly grant (attributes added by this library; optional on read).
	LastGrantPeriod  string
	LastGrantEventID string
	// CreatedAt and UpdatedAt are the record's timestamps.
	CreatedAt, UpdatedAt time.Time
}

// InsufficientCreditsError reports a consume the balance cannot cover.
type InsufficientCreditsError struct {
	UserID string
	// Balance is the balance seen when the condition failed (0 for no
	// record or an expired one).
	Balance int64
	// Requested is the amount asked for.
	Requested int64
}

// Error implements error.
func (e *InsufficientCreditsError) Error() string {
	return fmt.Sprintf("%v: user %s has %d, needs %d", ErrInsufficientCredits, e.UserID, e.Balance, e.Requested)
}

// Unwrap returns [ErrInsufficientCredits].
func (e *InsufficientCreditsError) Unwrap() error { return ErrInsufficientCredits }

// CreditQuotas maps a tier to its monthly credit grant.
type CreditQuotas map[Tier]int64

// DefaultCreditQuotas returns the monthly quotas per tier: FREE 0,
// INITIATE 2, JOURNEYMAN 5, SAGE 15, GUILDMASTER 15 (founder passes grant
// the quota of their tier: FOUNDING_MEMBER that of SAGE, GUILD_BUILDER that
// of GUILDMASTER).
func DefaultCreditQuotas() CreditQuotas {
	return CreditQuotas{TierFree: 0, TierInitiate: 2, TierJourneyman: 5, TierSage: 15, TierGuildmaster: 15}
}

// WithDefaults returns a copy of q in which every tier missing from q has
// its default quota. A key that is not a tier or a quota outside
// 0..MaxCreditAmount is an error.
func (q CreditQuotas) WithDefaults() (CreditQuotas, error) {
	out := DefaultCreditQuotas()
	for t, n := range q {
		if !t.Valid() {
			return nil, &FieldError{Field: "quota tier", Value: string(t), Err: ErrInvalidTier}
		}
		if n < 0 || n > MaxCreditAmount {
			return nil, &FieldError{Field: "quota of " + string(t), Value: fmt.Sprint(n), Err: ErrInvalidCredits}
		}
		out[t] = n
	}
	return out, nil
}

// Quota returns the monthly grant of tier t (0 for an unknown tier).
func (q CreditQuotas) Quota(t Tier) int64 { return q[t] }

// MonthlyGrantResult reports what [Accounts.MonthlyGrant] did.
type MonthlyGrantResult struct {
	// Applied is true when this call granted the quota; false when the
	// period was already granted or the quota is 0 (nothing written).
	Applied bool
	// Tier is the parsed tier, Period the period as given.
	Tier   Tier
	Period string
	// Amount is the number of credits added by this call.
	Amount int64
}

// CheckCreditAmount returns an error wrapping [ErrInvalidCredits] unless
// 1 <= n <= MaxCreditAmount.
func CheckCreditAmount(n int64) error {
	if n <= 0 || n > MaxCreditAmount {
		return fmt.Errorf("%w: %d (want 1..%d)", ErrInvalidCredits, n, MaxCreditAmount)
	}
	return nil
}

// CheckGrantPeriod returns an error wrapping [ErrInvalidCredits] for an
// empty period or one longer than 256 bytes.
func CheckGrantPeriod(period string) error {
	if period == "" || len(period) > maxGrantPeriod {
		return fmt.Errorf("%w: grant period %q (1 to %d bytes)", ErrInvalidCredits, period, maxGrantPeriod)
	}
	return nil
}

// accountID returns the account ID of a partition key of this layout.
func (c SingleTableConfig) accountID(r *itemReader) string {
	pk := r.required(AttrPK)
	id, ok := strings.CutPrefix(pk, c.AccountPrefix)
	if r.err == nil && (!ok || id == "") {
		r.fail(AttrPK, pk, fmt.Errorf("%w: not an account partition (prefix %q)", ErrInvalidItem, c.AccountPrefix))
	}
	return id
}

// DecodeCredits decodes a credits item of this layout as read at now: an
// expired record has Balance 0 and Expired set.
func (c SingleTableConfig) DecodeCredits(item map[string]types.AttributeValue, now time.Time) (Credits, error) {
	c = c.decodeDefaults()
	r := newItemReader(item)
	cr := Credits{
		UserID:           c.accountID(r),
		Balance:          r.num(credBalance),
		ExpiresAt:        r.unix(c.TTLAttribute),
		LastTopUp:        r.timestamp(credLastTopUp),
		LastReset:        r.timestamp(credLastReset),
		LastGrantPeriod:  r.str(credLastGrantPeriod),
		LastGrantEventID: r.str(credLastGrantEvent),
		CreatedAt:        r.timestamp(acctCreatedAt),
		UpdatedAt:        r.timestamp(acctUpdatedAt),
	}
	if sk := r.str(AttrSK); r.err == nil && sk != SKCredits {
		r.fail(AttrSK, sk, fmt.Errorf("%w: not a credits item", ErrInvalidItem))
	}
	if r.err != nil {
		return Credits{}, r.err
	}
	if !cr.ExpiresAt.IsZero() && !now.Before(cr.ExpiresAt) {
		cr.Balance, cr.Expired = 0, true
	}
	return cr, nil
}

// Balance implements [Accounts.Balance] with one consistent GetItem.
func (a *DynamoAccounts) Balance(ctx context.Context, userID string) (Credits, error) {
	if err := checkAccount("balance", userID); err != nil {
		return Credits{}, err
	}
	item, err := a.getItem(ctx, "balance", userID, SKCredits)
	if err != nil {
		return Credits{}, err
	}
	if item == nil {
		return Credits{UserID: userID}, nil
	}
	return a.cfg.Table.DecodeCredits(item, a.now())
}

// Grant implements [Accounts.Grant]: one UpdateItem (ADD balance), unless
// the record has expired (see [DynamoAccounts.Consume]).
func (a *DynamoAccounts) Grant(ctx context.Context, userID string, n int64) (Credits, error) {
	return a.increment(ctx, "grant", userID, n, "")
}

// TopUp implements [Accounts.TopUp].
func (a *DynamoAccounts) TopUp(ctx context.Context, userID string, n int64) (Credits, error) {
	return a.increment(ctx, "top up", userID, n, credLastTopUp)
}

// maxExpiryRetries bounds the retries of a credit write that met an
// expired record or a concurrent transaction.
const maxExpiryRetries = 4

// incrementExpr is the update adding n credits to a live (unexpired)
// record, creating it if absent: its condition fails only for a record
// past its expiry, whose stale balance must not be revived. setNow names
// attributes set to now; set holds other attributes to set.
func (a *DynamoAccounts) incrementExpr(n int64, now time.Time, setNow []string, set map[string]types.AttributeValue) *types.Update {
	ts, _ := acctTime(now)
	nowV := expression.Value(attrS(ts))
	typ, created, exp := expression.Name(acctType), expression.Name(acctCreatedAt), expression.Name(a.cfg.Table.TTLAttribute)
	upd := expression.Set(typ, expression.IfNotExists(typ, expression.Value(attrS(credTypeBalance)))).
		Set(created, expression.IfNotExists(created, nowV)).
		Set(expression.Name(acctUpdatedAt), nowV)
	for _, attr := range setNow {
		upd = upd.Set(expression.Name(attr), nowV)
	}
	for _, attr := range slices.Sorted(maps.Keys(set)) {
		upd = upd.Set(expression.Name(attr), expression.Value(set[attr]))
	}
	if a.cfg.CreditExpiry > 0 {
		upd = upd.Set(exp, expression.Value(attrN(now.Add(a.cfg.CreditExpiry).Unix())))
	}
	upd = upd.Add(expression.Name(credBalance), expression.Value(attrN(n)))
	expr := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(a.unexpired(now)))
	return &types.Update{
		TableName:                 &a.cfg.Table.Table,
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
}

// unexpired is the condition that the credits record has no expiry or one
// after now.
func (a *DynamoAccounts) unexpired(now time.Time) expression.ConditionBuilder {
	exp := expression.Name(a.cfg.Table.TTLAttribute)
	return expression.AttributeNotExists(exp).Or(exp.GreaterThan(expression.Value(attrN(now.Unix()))))
}

func (a *DynamoAccounts) increment(ctx context.Context, op, userID string, n int64, setNow string) (Credits, error) {
	if err := checkAccount(op, userID); err != nil {
		return Credits{}, err
	}
	if err := CheckCreditAmount(n); err != nil {
		return Credits{}, fmt.Errorf("billing: %s: %w", op, err)
	}
	var stamps []string
	if setNow != "" {
		stamps = []string{setNow}
	}
	for attempt := 0; ; attempt++ {
		now := a.now()
		u := a.incrementExpr(n, now, stamps, nil)
		out, err := a.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: u.TableName, Key: a.key(userID, SKCredits),
			UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
			ReturnValues: types.ReturnValueAllNew,
		})
		if err == nil {
			return a.cfg.Table.DecodeCredits(out.Attributes, now)
		}
		if _, ok := isConditionFailed(err); !ok || attempt >= maxExpiryRetries {
			return Credits{}, a.creditWriteError(op, userID, err)
		}
		if err := a.expireCredits(ctx, userID, now); err != nil {
			return Credits{}, err
		}
	}
}

func (a *DynamoAccounts) creditWriteError(op, userID string, err error) error {
	return translateWrite(op, []txOp{{key: a.keyText(userID, SKCredits),
		reason: "the balance kept expiring concurrently, or its expiry attribute is not a number"}}, err)
}

// expireCredits empties a record that is past its expiry and removes the
// expiry, so that the next grant starts from zero. A record that is not
// (or no longer) expired is left alone.
func (a *DynamoAccounts) expireCredits(ctx context.Context, userID string, now time.Time) error {
	ts, _ := acctTime(now)
	exp := expression.Name(a.cfg.Table.TTLAttribute)
	expr := mustBuild(expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(credBalance), expression.Value(attrN(0))).
			Set(expression.Name(acctUpdatedAt), expression.Value(attrS(ts))).
			Remove(exp)).
		WithCondition(exp.LessThanEqual(expression.Value(attrN(now.Unix())))))
	_, err := a.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &a.cfg.Table.Table,
		Key:                       a.key(userID, SKCredits),
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if _, ok := isConditionFailed(err); ok {
		return nil
	}
	if err != nil {
		return fmt.Errorf("billing: expire credits (%s): %w", a.keyText(userID, SKCredits), err)
	}
	return nil
}

// Consume implements [Accounts.Consume]: one UpdateItem that subtracts n on
// condition balance >= n and the record not expired. On failure DynamoDB
// returns the old item (ReturnValuesOnConditionCheckFailure), so the
// error's balance costs no extra read.
func (a *DynamoAccounts) Consume(ctx context.Context, userID string, n int64) (Credits, error) {
	if err := checkAccount("consume", userID); err != nil {
		return Credits{}, err
	}
	if err := CheckCreditAmount(n); err != nil {
		return Credits{}, fmt.Errorf("billing: consume: %w", err)
	}
	now := a.now()
	ts, _ := acctTime(now)
	bal, nv := expression.Name(credBalance), expression.Value(attrN(n))
	expr := mustBuild(expression.NewBuilder().
		WithUpdate(expression.Set(bal, bal.Minus(nv)).Set(expression.Name(acctUpdatedAt), expression.Value(attrS(ts)))).
		WithCondition(bal.GreaterThanEqual(nv).And(a.unexpired(now))))
	out, err := a.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &a.cfg.Table.Table,
		Key:                                 a.key(userID, SKCredits),
		UpdateExpression:                    expr.Update(),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return a.cfg.Table.DecodeCredits(out.Attributes, now)
	}
	ccf, ok := isConditionFailed(err)
	if !ok {
		return Credits{}, fmt.Errorf("billing: consume (%s): %w", a.keyText(userID, SKCredits), err)
	}
	ie := &InsufficientCreditsError{UserID: userID, Requested: n}
	if len(ccf.Item) > 0 {
		old, derr := a.cfg.Table.DecodeCredits(ccf.Item, now)
		if derr != nil {
			return Credits{}, fmt.Errorf("billing: consume: %w", derr)
		}
		ie.Balance = old.Balance
	}
	return Credits{}, ie
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
// retried a few times; a [*ConflictError] after that is safe to retry.
func (a *DynamoAccounts) MonthlyGrant(ctx context.Context, userID string, tier Tier, period, eventID string) (MonthlyGrantResult, error) {
	if err := checkAccount("monthly grant", userID); err != nil {
		return MonthlyGrantResult{}, err
	}
	t, err := ParseTier(string(tier))
	if err != nil {
		return MonthlyGrantResult{}, fmt.Errorf("billing: monthly grant: %w", err)
	}
	if err := CheckGrantPeriod(period); err != nil {
		return MonthlyGrantResult{}, fmt.Errorf("billing: monthly grant: %w", err)
	}
	res := MonthlyGrantResult{Tier: t, Period: period}
	quota := a.cfg.Quotas.Quota(t)
	if quota == 0 {
		return res, nil
	}
	markerSK := SKCreditGrantPrefix + period
	ops := []txOp{
		{key: a.keyText(userID, markerSK), reason: "the period was already granted", exists: true},
		{key: a.keyText(userID, SKCredits), reason: "the balance kept expiring concurrently, or its expiry attribute is not a number"},
	}
	for attempt := 0; ; attempt++ {
		now := a.now()
		ts, _ := acctTime(now)
		marker := a.key(userID, markerSK)
		marker[acctType], marker[grantPeriod], marker[grantTier] = attrS(grantTypeMarker), attrS(period), attrS(string(t))
		marker[grantAmount], marker[acctCreatedAt] = attrN(quota), attrS(ts)
		marker[a.cfg.Table.TTLAttribute] = attrN(now.Add(a.cfg.GrantMarkerRetention).Unix())
		set := map[string]types.AttributeValue{credLastGrantPeriod: attrS(period)}
		if eventID != "" {
			marker[grantEventID], set[credLastGrantEvent] = attrS(eventID), attrS(eventID)
		}
		upd := a.incrementExpr(quota, now, []string{credLastReset}, set)
		upd.Key = a.key(userID, SKCredits)
		_, err := a.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: putAbsent(&a.cfg.Table.Table, marker, AttrPK)},
			{Update: upd},
		}})
		if err == nil {
			res.Applied, res.Amount = true, quota
			return res, nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			return res, translateWrite("monthly grant", ops, err)
		}
		codes := make([]string, 2)
		for i, r := range tce.CancellationReasons {
			if i < len(codes) {
				codes[i] = aws.ToString(r.Code)
			}
		}
		switch {
		case codes[0] == "ConditionalCheckFailed":
			a.cfg.Logger.DebugContext(ctx, "billing: monthly grant already applied", "user", userID, "period", period, "event", eventID)
			return res, nil
		case attempt >= maxExpiryRetries:
		case codes[1] == "ConditionalCheckFailed":
			if err := a.expireCredits(ctx, userID, now); err != nil {
				return res, err
			}
			continue
		case codes[0] == "TransactionConflict" || codes[1] == "TransactionConflict":
			// A concurrent write to the balance: nothing was written, retry.
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("billing: monthly grant (%s): %w", a.keyText(userID, SKCredits), ctx.Err())
			case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
			}
			continue
		}
		return res, translateWrite("monthly grant", ops, err)
	}
}
