package dynamotest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// API is the subset of *dynamodb.Client the library's storage adapters use,
// with the SDK's signatures: the seam for counting and fault injection.
type API interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, params *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchWriteItem(ctx context.Context, params *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	BatchGetItem(ctx context.Context, params *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	TransactGetItems(ctx context.Context, params *dynamodb.TransactGetItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error)
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DeleteTable(ctx context.Context, params *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(ctx context.Context, params *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

var (
	_ API = (*dynamodb.Client)(nil)
	_ API = (*Wrapper)(nil)
)

// maxLog bounds Log, so that load tests cannot grow it without end.
const maxLog = 100_000

// Wrapper wraps an [API]: it counts calls, items and capacity units, enforces
// DynamoDB limits the server under test may not, and injects faults. It is
// safe for concurrent use. The zero value is not usable: call [Wrap].
type Wrapper struct {
	inner API

	mu         sync.Mutex
	calls      map[string]int
	total      int
	log        []string
	itemsRead  int
	itemsWrite int
	rcu, wcu   float64
	violations []error
	rules      []*rule
	keys       map[string][]string // table -> key attribute names, see keyNames
}

// Wrap returns a Wrapper that forwards to inner.
func Wrap(inner API) *Wrapper {
	return &Wrapper{inner: inner, calls: map[string]int{}, keys: map[string][]string{}}
}

// Calls returns how many times op (an SDK operation name such as "PutItem")
// was called since Wrap or Reset, including calls that failed: rejected for
// a limit, failed by a fault rule, or failed by the server.
func (c *Wrapper) Calls(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// TotalCalls returns the number of calls of every operation.
func (c *Wrapper) TotalCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// ItemsRead returns the items read: ScannedCount for Query and Scan (items
// evaluated, before any filter), items returned for GetItem, BatchGetItem
// and TransactGetItems.
func (c *Wrapper) ItemsRead() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.itemsRead
}

// ItemsWritten returns the items put, updated or deleted by successful
// calls (and by calls failed with FailAfterInner). Requests returned in
// UnprocessedItems are not counted, and neither are ConditionChecks.
func (c *Wrapper) ItemsWritten() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.itemsWrite
}

// ReadCapacity returns the read capacity units consumed, computed from item
// sizes (see the package documentation).
func (c *Wrapper) ReadCapacity() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rcu
}

// WriteCapacity returns the write capacity units consumed, computed from item
// sizes (see the package documentation).
func (c *Wrapper) WriteCapacity() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wcu
}

// Violations returns the limits broken since Wrap or Reset, in order; each
// is a *LimitError.
func (c *Wrapper) Violations() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.violations...)
}

// AssertNoViolations marks the test as failed for each limit broken.
func (c *Wrapper) AssertNoViolations(t testing.TB) {
	t.Helper()
	for _, err := range c.Violations() {
		t.Errorf("%v", err)
	}
}

// Log returns the operations called, in order (at most the first 100 000
// since Wrap or Reset).
func (c *Wrapper) Log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

// Reset zeroes the counters and clears Log and Violations. Fault rules and
// the key schemas learnt stay.
func (c *Wrapper) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = map[string]int{}
	c.total, c.itemsRead, c.itemsWrite, c.rcu, c.wcu = 0, 0, 0, 0, 0
	c.log, c.violations = nil, nil
}

// String summarises the counters, for test logs and benchmark reports.
func (c *Wrapper) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("calls=%d read=%d items/%.1f RCU written=%d items/%.1f WCU violations=%d",
		c.total, c.itemsRead, c.rcu, c.itemsWrite, c.wcu, len(c.violations))
}

func (c *Wrapper) usage(itemsRead, itemsWritten int, rcu, wcu float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.itemsRead += itemsRead
	c.itemsWrite += itemsWritten
	c.rcu += rcu
	c.wcu += wcu
}

// call describes one operation for run.
type call[Out any] struct {
	op      string
	actions int                                // transaction size, for throttling reasons
	check   func(context.Context) error        // request limits; nil for none
	do      func(context.Context) (Out, error) // the inner call
	account func(Out) error                    // usage; may report a limit the response breaks
}

// run counts the call, checks limits, applies the fault rules, calls the
// inner client and accounts for the response.
func run[Out any](ctx context.Context, c *Wrapper, k call[Out]) (Out, error) {
	var zero Out
	c.mu.Lock()
	c.calls[k.op]++
	c.total++
	if len(c.log) < maxLog {
		c.log = append(c.log, k.op)
	}
	c.mu.Unlock()

	if k.check != nil {
		if err := k.check(ctx); err != nil {
			return zero, c.violation(err)
		}
	}
	c.mu.Lock()
	f := c.pickFault(k.op)
	c.mu.Unlock()
	if f != nil {
		switch f.kind {
		case failBefore:
			return zero, f.err
		case throttle:
			return zero, throttleError(k.op, k.actions)
		case hang:
			<-ctx.Done()
			return zero, ctx.Err()
		}
	}
	out, err := k.do(ctx)
	if err == nil && k.account != nil {
		if lerr := k.account(out); lerr != nil {
			out, err = zero, c.violation(lerr)
		}
	}
	if f != nil && f.kind == failAfter {
		return zero, f.err
	}
	return out, err
}

func (c *Wrapper) violation(err error) error {
	var le *LimitError
	if errors.As(err, &le) {
		c.mu.Lock()
		c.violations = append(c.violations, err)
		c.mu.Unlock()
	}
	return err
}
