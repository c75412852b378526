package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/tokens"
)

// TokensKey is the PartitionKey of the item in the lock table that holds
// the fleet's processor budget. It cannot collide with a lock key, which
// always starts with "subscription-billing:user_id:".
const TokensKey = "dynabill:processor-tokens"

// Attributes of the token item.
const (
	tokAttrWindow = "win"
	tokAttrUsed   = "used"
	tokAttrRate   = "rate"
	tokAttrCut    = "cut"
	tokAttrSlow   = "slow"
)

// Tokens is [billing.ProcessorTokens] on one item of the lock table
// (string hash key PartitionKey), shared by every process of a fleet.
//
// A Tokens value remembers the item as it last saw it and decides each
// Take or Slow on that with the shared arithmetic of internal/tokens,
// as memory.Tokens does. It then sends one conditional UpdateItem
// and no read: the answer carries the item back, the new one when the
// write applied, the current one when its condition failed (then it
// decides again on that). In the common case a Take is therefore one call.
//
// The condition holds the item to what the decision read. A grant in the
// window last seen adds to the count (used = used + g) on condition that
// the window, rate and pause are unchanged and the count leaves room for
// g, so processes drawing on one window do not need to know its exact
// count; a grant that opens a window replaces the count on condition that
// the window is still the one seen. No window is ever granted more than
// its rate. A Take that finds the last seen window spent answers N == 0
// without a call: windows, counts and pauses only grow, and a window's
// rate only falls, so a window seen spent stays spent.
//
// Calls on one Tokens value run one at a time.
type Tokens struct {
	api   API
	table string
	key   string
	limit int64
	now   func() time.Time

	// turn holds a token while a call runs; it guards seen and exists.
	turn chan struct{}
	// seen is the item as last written or returned; exists is false
	// until an answer has shown the item (the next write then creates it).
	seen   tokens.State
	exists bool
}

// NewTokens returns a budget of limit calls a second kept in table (the
// lock table) under key (Defaults to [TokensKey] when empty), on the
// clock now (Defaults to time.Now when nil).
func NewTokens(api API, table, key string, limit int, now func() time.Time) (*Tokens, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("dynamostore: NewTokens: limit %d, want > 0", limit)
	}
	if key == "" {
		key = TokensKey
	}
	if now == nil {
		now = time.Now
	}
	return &Tokens{api: api, table: table, key: key, limit: int64(limit), now: now, turn: make(chan struct{}, 1)}, nil
}

func (t *Tokens) itemKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{lockAttrPartitionKey: &types.AttributeValueMemberS{Value: t.key}}
}

// lock waits for the turn to call, or for ctx to end.
func (t *Tokens) lock(ctx context.Context) error {
	select {
	case t.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Tokens) unlock() { <-t.turn }

// remember decodes item into seen; a nil item is an absent one.
func (t *Tokens) remember(item map[string]types.AttributeValue) error {
	if item == nil {
		t.seen, t.exists = tokens.State{}, false
		return nil
	}
	var s tokens.State
	for _, a := range []struct {
		name string
		dst  *int64
	}{{tokAttrWindow, &s.Window}, {tokAttrUsed, &s.Used}, {tokAttrRate, &s.Rate}, {tokAttrCut, &s.CutWindow}, {tokAttrSlow, &s.SlowUntil}} {
		v, ok := item[a.name].(*types.AttributeValueMemberN)
		if !ok {
			return &billing.FieldError{Field: a.name, Key: lockAttrPartitionKey + "=" + t.key,
				Err: fmt.Errorf("%w: token item attribute missing or not a number", billing.ErrInvalidItem)}
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return &billing.FieldError{Field: a.name, Value: v.Value, Key: lockAttrPartitionKey + "=" + t.key,
				Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, err)}
		}
		*a.dst = n
	}
	t.seen, t.exists = s, true
	return nil
}

// read remembers the item as a consistent GetItem finds it. It is used only
// when a failed condition comes back without the item, which DynamoDB
// does only when the item is absent.
func (t *Tokens) read(ctx context.Context) error {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.table), Key: t.itemKey(), ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return fmt.Errorf("dynamostore: tokens %s: read: %w", t.key, err)
	}
	return t.remember(out.Item)
}

// update sends one conditional UpdateItem and remembers the item that comes
// back: the new one when the write applied, the current one when the
// condition failed. It reports whether the write applied. On any other
// error nothing is remembered: the write may have applied, and the next
// conditional write finds out.
func (t *Tokens) update(ctx context.Context, cond expression.ConditionBuilder, upd expression.UpdateBuilder) (bool, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return false, fmt.Errorf("dynamostore: tokens %s: build: %w", t.key, err)
	}
	out, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: t.itemKey(),
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if ccf.Item == nil {
			return false, t.read(ctx)
		}
		return false, t.remember(ccf.Item)
	}
	if err != nil {
		return false, fmt.Errorf("dynamostore: tokens %s: write: %w", t.key, err)
	}
	if err := t.remember(out.Attributes); err != nil {
		return false, err
	}
	return true, nil
}

// create is the write of the first state: the whole item, on condition
// that there is none.
func create(next tokens.State) (expression.ConditionBuilder, expression.UpdateBuilder) {
	return expression.AttributeNotExists(expression.Name(lockAttrPartitionKey)),
		expression.Set(expression.Name(tokAttrWindow), exprValue(next.Window)).
			Set(expression.Name(tokAttrUsed), exprValue(next.Used)).
			Set(expression.Name(tokAttrRate), exprValue(next.Rate)).
			Set(expression.Name(tokAttrCut), exprValue(next.CutWindow)).
			Set(expression.Name(tokAttrSlow), exprValue(next.SlowUntil))
}

// grantWrite is the write of a grant of g decided on s, giving next.
func (t *Tokens) grantWrite(s, next tokens.State, g int64) (expression.ConditionBuilder, expression.UpdateBuilder) {
	if !t.exists {
		return create(next)
	}
	// The decision read the window, the rate and the pause.
	cond := expression.Name(tokAttrWindow).Equal(exprValue(s.Window)).
		And(expression.Name(tokAttrRate).Equal(exprValue(s.Rate))).
		And(expression.Name(tokAttrSlow).Equal(exprValue(s.SlowUntil)))
	if next.Window == s.Window {
		// Counts only grow inside a window: add g wherever the count is,
		// as long as it leaves room for g under the rate.
		upd := expression.Set(expression.Name(tokAttrUsed), expression.Name(tokAttrUsed).Plus(exprValue(g)))
		if next.Rate != s.Rate { // a stored rate above this limit
			upd = upd.Set(expression.Name(tokAttrRate), exprValue(next.Rate))
		}
		return cond.And(expression.Name(tokAttrUsed).LessThanEqual(exprValue(next.Rate - g))), upd
	}
	// A new window: its count starts at g, whatever the old one holds
	// (a window seen spent stays spent, so the decision holds).
	upd := expression.Set(expression.Name(tokAttrWindow), exprValue(next.Window)).
		Set(expression.Name(tokAttrUsed), exprValue(next.Used))
	if next.Rate != s.Rate {
		upd = upd.Set(expression.Name(tokAttrRate), exprValue(next.Rate))
	}
	return cond, upd
}

// Take implements [billing.ProcessorTokens].
func (t *Tokens) Take(ctx context.Context, n int) (billing.TokenGrant, error) {
	if n <= 0 {
		return billing.TokenGrant{}, fmt.Errorf("dynamostore: Tokens.Take: n %d, want > 0", n)
	}
	if err := t.lock(ctx); err != nil {
		return billing.TokenGrant{}, err
	}
	defer t.unlock()
	for {
		if err := ctx.Err(); err != nil {
			return billing.TokenGrant{}, err
		}
		s := t.seen
		next, g := tokens.Take(s, t.now(), int64(n), t.limit)
		if g.N == 0 {
			return billing.TokenGrant(g), nil
		}
		cond, upd := t.grantWrite(s, next, int64(g.N))
		ok, err := t.update(ctx, cond, upd)
		if err != nil {
			return billing.TokenGrant{}, err
		}
		if ok {
			return billing.TokenGrant(g), nil
		}
	}
}

// Slow implements [billing.ProcessorTokens].
func (t *Tokens) Slow(ctx context.Context, retryAfter time.Duration) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.unlock()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := t.seen
		next := tokens.Slow(s, t.now(), retryAfter, t.limit)
		if t.exists && next == s {
			// Pauses and cut windows only grow: what was seen already
			// pauses as long and was cut this second.
			return nil
		}
		var cond expression.ConditionBuilder
		var upd expression.UpdateBuilder
		if !t.exists {
			cond, upd = create(next)
		} else {
			// The decision read the pause, the rate and the cut window;
			// grants changing the count meanwhile do not matter to it.
			cond = expression.Name(tokAttrSlow).Equal(exprValue(s.SlowUntil)).
				And(expression.Name(tokAttrRate).Equal(exprValue(s.Rate))).
				And(expression.Name(tokAttrCut).Equal(exprValue(s.CutWindow)))
			for _, a := range []struct {
				name      string
				old, next int64
			}{{tokAttrSlow, s.SlowUntil, next.SlowUntil}, {tokAttrRate, s.Rate, next.Rate}, {tokAttrCut, s.CutWindow, next.CutWindow}} {
				if a.next != a.old {
					upd = upd.Set(expression.Name(a.name), exprValue(a.next))
				}
			}
		}
		ok, err := t.update(ctx, cond, upd)
		if err != nil || ok {
			return err
		}
	}
}
