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
// Each Take or Slow reads the item consistently, decides with
// [billing.GrantTokens] or [billing.SlowTokens] as [billing.MemoryTokens]
// does, and writes the result conditional on the window and count it
// read; a lost race reads and decides again.
type Tokens struct {
	api   API
	table string
	key   string
	limit int64
	now   func() time.Time
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
	return &Tokens{api: api, table: table, key: key, limit: int64(limit), now: now}, nil
}

func (t *Tokens) itemKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{lockAttrPartitionKey: &types.AttributeValueMemberS{Value: t.key}}
}

func (t *Tokens) read(ctx context.Context) (billing.TokenState, bool, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.table), Key: t.itemKey(), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return billing.TokenState{}, false, fmt.Errorf("dynamostore: tokens %s: read: %w", t.key, err)
	}
	if out.Item == nil {
		return billing.TokenState{}, false, nil
	}
	num := func(name string) int64 {
		if v, ok := out.Item[name].(*types.AttributeValueMemberN); ok {
			n, _ := strconv.ParseInt(v.Value, 10, 64)
			return n
		}
		return 0
	}
	return billing.TokenState{Window: num(tokAttrWindow), Used: num(tokAttrUsed), Rate: num(tokAttrRate),
		CutWindow: num(tokAttrCut), SlowUntil: num(tokAttrSlow)}, true, nil
}

// write stores next conditional on the item still holding old (or being
// absent when exists is false). It reports false on a lost race.
func (t *Tokens) write(ctx context.Context, old, next billing.TokenState, exists bool) (bool, error) {
	var cond expression.ConditionBuilder
	if exists {
		cond = expression.Name(tokAttrWindow).Equal(exprValue(old.Window)).
			And(expression.Name(tokAttrUsed).Equal(exprValue(old.Used))).
			And(expression.Name(tokAttrRate).Equal(exprValue(old.Rate))).
			And(expression.Name(tokAttrSlow).Equal(exprValue(old.SlowUntil)))
	} else {
		cond = expression.AttributeNotExists(expression.Name(lockAttrPartitionKey))
	}
	upd := expression.Set(expression.Name(tokAttrWindow), exprValue(next.Window)).
		Set(expression.Name(tokAttrUsed), exprValue(next.Used)).
		Set(expression.Name(tokAttrRate), exprValue(next.Rate)).
		Set(expression.Name(tokAttrCut), exprValue(next.CutWindow)).
		Set(expression.Name(tokAttrSlow), exprValue(next.SlowUntil))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return false, fmt.Errorf("dynamostore: tokens %s: build: %w", t.key, err)
	}
	_, err = t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: t.itemKey(),
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dynamostore: tokens %s: write: %w", t.key, err)
	}
	return true, nil
}

// Take implements [billing.ProcessorTokens].
func (t *Tokens) Take(ctx context.Context, n int) (billing.TokenGrant, error) {
	if n <= 0 {
		return billing.TokenGrant{}, fmt.Errorf("dynamostore: Tokens.Take: n %d, want > 0", n)
	}
	for {
		if err := ctx.Err(); err != nil {
			return billing.TokenGrant{}, err
		}
		s, exists, err := t.read(ctx)
		if err != nil {
			return billing.TokenGrant{}, err
		}
		next, g := billing.GrantTokens(s, t.now(), int64(n), t.limit)
		if g.N == 0 && next == s {
			return g, nil
		}
		ok, err := t.write(ctx, s, next, exists)
		if err != nil {
			return billing.TokenGrant{}, err
		}
		if ok {
			return g, nil
		}
	}
}

// Slow implements [billing.ProcessorTokens].
func (t *Tokens) Slow(ctx context.Context, retryAfter time.Duration) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, exists, err := t.read(ctx)
		if err != nil {
			return err
		}
		ok, err := t.write(ctx, s, billing.SlowTokens(s, t.now(), retryAfter, t.limit), exists)
		if err != nil || ok {
			return err
		}
	}
}
