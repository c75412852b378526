package dynamostore

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
)

// creditOp is a balance change that carries a request ID.
type creditOp struct {
	name  string // in errors and logs
	code  string // stored in the request marker's op attribute
	stamp string // attribute set to now, if any
	take  bool   // subtract n on condition balance >= n (else add n)
}

var (
	opGrant   = creditOp{name: "grant", code: "GRANT"}
	opTopUp   = creditOp{name: "top up", code: "TOP_UP", stamp: layout.CredLastTopUp}
	opConsume = creditOp{name: "consume", code: "CONSUME", take: true}
)

// Grant implements [Accounts.Grant]: one transaction of the request marker
// and the increment of the balance, then a consistent read of the balance
// (see [Accounts.Consume]).
func (a *Accounts) Grant(ctx context.Context, userID string, n int64, requestID string) (entitlement.Credits, error) {
	return a.change(ctx, opGrant, userID, n, requestID)
}

// TopUp implements [Accounts.TopUp] like [Accounts.Grant], also setting
// lastTopUp.
func (a *Accounts) TopUp(ctx context.Context, userID string, n int64, requestID string) (entitlement.Credits, error) {
	return a.change(ctx, opTopUp, userID, n, requestID)
}

// Consume implements [Accounts.Consume].
//
// Grant, TopUp and Consume are each one transaction of two writes: a
// marker item SK=CREDITS#REQUEST#<requestID> (type CreditRequest, with the
// operation, n, createdAt and a TTL of RequestMarkerRetention) put on
// condition that it does not exist, and the change of the balance: for
// Consume, balance - n on condition balance >= n and the record not
// expired; for Grant and TopUp, balance + n on condition the record is not
// expired (an expired record is first emptied, so that expired credits are
// not revived, and the transaction retried). A transaction cancelled by a
// concurrent one is retried a few times; a [*billing.ConflictError] after
// that is safe to retry with the same request ID.
//
// The Credits returned after a change are read with a consistent GetItem
// just after the transaction (a transaction returns no values): they
// include the change and may include concurrent changes of the same
// balance. If that read fails the change stands, and a retry with the same
// request ID returns the balance with Repeated set.
//
// A marker that exists means the request ID was applied: nothing is
// written and the balance is read as above, with Repeated set; a marker of
// another operation or amount is [entitlement.ErrRequestIDReused]. The
// AWS SDK's own retry of a transaction whose answer was lost (after
// DynamoDB applied it) finds the marker too, so a first call may report
// Repeated; either way the change was applied once.
//
// A refused Consume costs no read: the transaction returns the balance
// item as the condition saw it (ReturnValuesOnConditionCheckFailure), and
// the [*entitlement.InsufficientCreditsError] carries its balance (0 for
// no record or an expired one).
func (a *Accounts) Consume(ctx context.Context, userID string, n int64, requestID string) (entitlement.Credits, error) {
	return a.change(ctx, opConsume, userID, n, requestID)
}

func (a *Accounts) change(ctx context.Context, op creditOp, userID string, n int64, requestID string) (entitlement.Credits, error) {
	if err := checkAccount(op.name, userID); err != nil {
		return entitlement.Credits{}, err
	}
	if err := entitlement.CheckCreditAmount(n); err != nil {
		return entitlement.Credits{}, fmt.Errorf("billing: %s: %w", op.name, err)
	}
	if err := entitlement.CheckRequestID(requestID); err != nil {
		return entitlement.Credits{}, fmt.Errorf("billing: %s: %w", op.name, err)
	}
	markerSK := layout.SKCreditRequestPrefix + requestID
	out, err := a.runCreditTx(ctx, creditTx{
		op: op.name, userID: userID, markerSK: markerSK, retention: a.cfg.RequestMarkerRetention,
		markerAttrs: map[string]types.AttributeValue{
			layout.AcctType: stringAV(layout.RequestTypeMarker), layout.RequestOp: stringAV(op.code),
			layout.RequestAmount: numberAV(n),
		},
		markerReason: "the request ID was already applied",
		update:       func(now time.Time) *types.Update { return a.changeExpr(op, n, now) },
		take:         op.take, returnOld: true,
	})
	if err != nil {
		return entitlement.Credits{}, err
	}
	switch out.kind {
	case creditMarkerExists:
		return a.repeated(ctx, op, userID, n, markerSK, out.item, out.now)
	case creditRefused:
		return entitlement.Credits{}, a.insufficient(userID, n, out.item, out.now)
	}
	return a.readCredits(ctx, op.name, userID, out.now)
}

// changeExpr is the update of the balance by op: see [Accounts.incrementExpr]
// for an addition; a consume subtracts n from a live record holding at
// least n.
func (a *Accounts) changeExpr(op creditOp, n int64, now time.Time) *types.Update {
	if !op.take {
		var stamps []string
		if op.stamp != "" {
			stamps = []string{op.stamp}
		}
		return a.incrementExpr(n, now, stamps, nil)
	}
	ts, _ := layout.AcctTime(now)
	bal, nv := expression.Name(layout.CredBalance), exprValue(layout.NumberAV(n))
	expr := mustBuild(expression.NewBuilder().
		WithUpdate(expression.Set(bal, bal.Minus(nv)).Set(expression.Name(layout.AcctUpdatedAt), exprValue(layout.StringAV(ts)))).
		WithCondition(bal.GreaterThanEqual(nv).And(a.unexpired(now))))
	return &types.Update{
		TableName:                 &a.tbl.Table,
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
}

// repeated answers a request whose marker exists: the current balance
// with Repeated set when the marker records the same operation and
// amount, [entitlement.ErrRequestIDReused] otherwise. marker is the item
// the cancelled transaction returned; when the server returned none it
// is read.
func (a *Accounts) repeated(ctx context.Context, op creditOp, userID string, n int64, markerSK string, marker map[string]types.AttributeValue, now time.Time) (entitlement.Credits, error) {
	if len(marker) == 0 {
		var err error
		if marker, err = a.getItem(ctx, op.name, userID, markerSK); err != nil {
			return entitlement.Credits{}, err
		}
		if marker == nil { // deleted by TTL since the transaction
			return entitlement.Credits{}, &billing.ConflictError{Op: op.name, Key: a.keyText(userID, markerSK),
				Reason: "the request marker expired during the call", Err: billing.ErrConflict}
		}
	}
	var amount string
	if v, ok := marker[layout.RequestAmount].(*types.AttributeValueMemberN); ok {
		amount = v.Value
	}
	if prev := stringOf(marker[layout.RequestOp]); prev != op.code || amount != strconv.FormatInt(n, 10) {
		return entitlement.Credits{}, fmt.Errorf("billing: %s (%s): %w: applied as %s of %s, now %s of %d",
			op.name, a.keyText(userID, markerSK), entitlement.ErrRequestIDReused, prev, amount, op.code, n)
	}
	a.cfg.Logger.DebugContext(ctx, "billing: credits request already applied", "user", userID, "op", op.name, "sk", markerSK)
	c, err := a.readCredits(ctx, op.name, userID, now)
	if err != nil {
		return entitlement.Credits{}, err
	}
	c.Repeated = true
	return c, nil
}

// insufficient is the error of a consume of n refused by the balance
// condition; item is the balance item as the condition saw it (nil for
// none).
func (a *Accounts) insufficient(userID string, n int64, item map[string]types.AttributeValue, now time.Time) error {
	ie := &entitlement.InsufficientCreditsError{UserID: userID, Requested: n}
	if len(item) > 0 {
		old, err := a.tbl.DecodeCredits(sdkav.FromSDK(item), now)
		if err != nil {
			return fmt.Errorf("billing: consume: %w", err)
		}
		ie.Balance = old.Balance
	}
	return ie
}
