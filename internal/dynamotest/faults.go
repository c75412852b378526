package dynamotest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ErrInjected is the error FailNth and FailAfterInner return when given a
// nil error.
var ErrInjected = errors.New("dynamotest: injected fault")

// AnyOp selects every operation in FailNth, FailAfterInner, Throttle and Hang.
const AnyOp = "*"

type faultKind int

const (
	failBefore  faultKind = iota // return err, inner not called
	failAfter                    // call inner, then return err
	throttle                     // return a throttling error, inner not called
	hang                         // block until ctx is done
	unprocessed                  // BatchWriteItem forwards only the first keep requests
)

// rule is one injected fault. Rules live in Wrapper.rules, guarded by Wrapper.mu.
type rule struct {
	kind  faultKind
	op    string
	n     int // fires on the n-th matching call (failBefore, failAfter, hang)
	seen  int // matching calls so far
	times int // remaining firings (throttle, unprocessed)
	keep  int // unprocessed: requests forwarded
	err   error
}

func (c *Wrapper) addRule(r *rule) {
	if r.kind != throttle && r.kind != unprocessed && r.n < 1 {
		panic(fmt.Sprintf("dynamotest: call number %d: calls are counted from 1", r.n))
	}
	if r.err == nil {
		r.err = ErrInjected
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rules = append(c.rules, r)
}

// FailNth makes the n-th call of op (counted from 1 when FailNth is called;
// op "*" counts every operation) return err without calling the inner
// client: the request never reached the server. A nil err means
// [ErrInjected].
//
// Every rule counts every call it matches; when several rules pick the same
// call, the one set first applies and the others are used up. Requests that
// break a limit fail before the rules see them.
func (c *Wrapper) FailNth(op string, n int, err error) {
	c.addRule(&rule{kind: failBefore, op: op, n: n, err: err})
}

// FailAfterInner makes the n-th call of op call the inner client, so the
// write is applied, and then return err instead of the response: an outcome
// the caller cannot know, like a timeout after the server committed. Usage
// (items, capacity) is counted. A nil err means [ErrInjected].
func (c *Wrapper) FailAfterInner(op string, n int, err error) {
	c.addRule(&rule{kind: failAfter, op: op, n: n, err: err})
}

// Throttle makes the next times calls of op fail without reaching the server
// with a *types.ProvisionedThroughputExceededException, wrapped like the SDK
// wraps service errors (in a *smithy.OperationError). TransactWriteItems and
// TransactGetItems fail instead the way DynamoDB throttles transactions: a
// *types.TransactionCanceledException whose first cancellation reason is
// "ThrottlingError" (the others "None"). The SDK's own retryer never sees
// these errors: the code under test has to handle them.
func (c *Wrapper) Throttle(op string, times int) {
	c.addRule(&rule{kind: throttle, op: op, times: times})
}

// Unprocessed makes the next times BatchWriteItem calls that reach the server
// forward only the first keep write requests (tables in name order, requests
// in order) and return the others in UnprocessedItems, grouped by table like
// the request. With keep <= 0 nothing is forwarded.
func (c *Wrapper) Unprocessed(times, keep int) {
	c.addRule(&rule{kind: unprocessed, op: "BatchWriteItem", times: times, keep: keep})
}

// Hang makes the n-th call of op block until its context is done and return
// ctx.Err(), without calling the inner client. Give that call a context with
// a deadline.
func (c *Wrapper) Hang(op string, n int) {
	c.addRule(&rule{kind: hang, op: op, n: n})
}

// ClearFaults removes every fault rule.
func (c *Wrapper) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rules = nil
}

// pickFault advances the rules matching op and returns the one that applies
// to this call, or nil. Unprocessed rules are taken by takeUnprocessed
// instead, only for calls that reach the server. c.mu must be held.
func (c *Wrapper) pickFault(op string) *rule {
	var fired *rule
	c.rules = slices.DeleteFunc(c.rules, func(r *rule) bool {
		if r.kind == unprocessed || r.op != op && r.op != AnyOp {
			return false
		}
		var fires, done bool
		if r.kind == throttle {
			fires = r.times > 0
			r.times--
			done = r.times <= 0
		} else {
			r.seen++
			fires = r.seen == r.n
			done = r.seen >= r.n
		}
		if fires && fired == nil {
			fired = r
		}
		return done
	})
	return fired
}

// takeUnprocessed returns how many requests the current BatchWriteItem may
// forward, or -1 when no Unprocessed rule applies.
func (c *Wrapper) takeUnprocessed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range c.rules {
		if r.kind == unprocessed && r.times > 0 {
			r.times--
			if r.times == 0 {
				c.rules = slices.Delete(c.rules, i, i+1)
			}
			return r.keep
		}
	}
	return -1
}

// splitBatch divides the request items: the first keep requests (tables in
// name order) are forwarded, the rest are returned as unprocessed.
func splitBatch(items map[string][]types.WriteRequest, keep int) (forward, rest map[string][]types.WriteRequest) {
	tables := make([]string, 0, len(items))
	for t := range items {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	forward = map[string][]types.WriteRequest{}
	rest = map[string][]types.WriteRequest{}
	for _, t := range tables {
		reqs := items[t]
		k := min(max(keep, 0), len(reqs))
		if k > 0 {
			forward[t] = reqs[:k:k]
		}
		if k < len(reqs) {
			rest[t] = reqs[k:]
		}
		keep -= k
	}
	return forward, rest
}

func throttleError(op string, actions int) error {
	var err error
	switch op {
	case "TransactWriteItems", "TransactGetItems":
		reasons := make([]types.CancellationReason, max(actions, 1))
		for i := range reasons {
			reasons[i].Code = aws.String("None")
		}
		reasons[0] = types.CancellationReason{
			Code:    aws.String("ThrottlingError"),
			Message: aws.String("Throughput exceeds the current capacity of your table or index."),
		}
		err = &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [ThrottlingError] (dynamotest: injected)"),
			CancellationReasons: reasons,
		}
	default:
		err = &types.ProvisionedThroughputExceededException{
			Message: aws.String("The level of configured provisioned throughput for the table was exceeded. (dynamotest: injected)"),
		}
	}
	return &smithy.OperationError{ServiceID: dynamodb.ServiceID, OperationName: op, Err: err}
}
