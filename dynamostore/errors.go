package dynamostore

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
)

// txOp describes one action of a transaction for error translation: which
// operation and key it belongs to, and what a failed condition means.
type txOp struct {
	key     string
	reason  string // what a failed condition of this action means
	exists  bool   // a failed condition means "already exists"
	history bool   // the action is a history row put
	taken   bool   // a failed condition means "the new key of a move is taken"
}

// translateWrite turns DynamoDB's condition and transaction failures into
// the library's errors. ops describe the transaction's actions in order (a
// single-item write has one). Other errors are wrapped with op and key.
func translateWrite(op string, ops []txOp, err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ops) > 0 {
		return conflictFor(op, ops[0])
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for i, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case codeConditionFailed:
				if i < len(ops) {
					return conflictFor(op, ops[i])
				}
			case codeTxConflict:
				return &billing.ConflictError{Op: op, Key: opKey(ops, i), Reason: "a concurrent transaction wrote the same item", Err: billing.ErrConflict}
			}
		}
		// Cancelled for another reason (throttling, validation): not a
		// conflict, nothing was written.
		return fmt.Errorf("billing: %s (%s): transaction cancelled: %w", op, opKey(ops, 0), err)
	}
	return fmt.Errorf("billing: %s (%s): %w", op, opKey(ops, 0), err)
}

// opKey is the key of the transaction's i-th action, or of its first when
// ops does not describe the i-th; "" when ops is empty.
func opKey(ops []txOp, i int) string {
	switch {
	case i < len(ops):
		return ops[i].key
	case len(ops) > 0:
		return ops[0].key
	}
	return ""
}

func conflictFor(op string, o txOp) error {
	e := &billing.ConflictError{Op: op, Key: o.key, Reason: o.reason, Err: billing.ErrConflict, HistoryRow: o.history, Taken: o.taken}
	if o.exists {
		e.Err = billing.ErrAlreadyExists
	}
	return e
}
