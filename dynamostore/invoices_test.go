package dynamostore_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/storetest"
)

func TestInvoicesConformance(t *testing.T) {
	for name, legacy := range map[string]bool{"Legacy": true, "SingleTable": false} {
		t.Run(name, func(t *testing.T) {
			billingtest.RunInvoiceConformance(t, func(t *testing.T) billing.Invoices {
				client, newStore := storetest.InvoiceTables(t, legacy)
				s, _ := newStore(t, client)
				return s
			})
		})
	}
}

// crashClient crashes the k-th write (PutItem, UpdateItem, DeleteItem,
// TransactWriteItems, BatchWriteItem) that reaches it, in a mode of
// billingtest.CrashMode: the request not sent, or sent and its answer
// lost, as an error or a panic.
type crashClient struct {
	dynamostore.API
	mu     sync.Mutex
	k      int
	mode   billingtest.CrashMode
	writes int
	struck bool
}

func crashWrite[In, Out any](c *crashClient, ctx context.Context, in In, call func(context.Context, In, ...func(*dynamodb.Options)) (Out, error)) (Out, error) {
	c.mu.Lock()
	c.writes++
	strike := c.writes == c.k && !c.struck
	c.struck = c.struck || strike
	c.mu.Unlock()
	var zero Out
	if !strike {
		return call(ctx, in)
	}
	switch c.mode {
	case billingtest.CrashBefore:
		return zero, errors.New("injected: write not sent")
	case billingtest.PanicBefore:
		panic("injected: crash before the write")
	}
	if _, err := call(ctx, in); err != nil {
		return zero, err
	}
	if c.mode == billingtest.PanicAfter {
		panic("injected: crash after the write")
	}
	return zero, errors.New("injected: answer lost after the write")
}

func (c *crashClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return crashWrite(c, ctx, in, c.API.PutItem)
}

func (c *crashClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return crashWrite(c, ctx, in, c.API.UpdateItem)
}

func (c *crashClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return crashWrite(c, ctx, in, c.API.DeleteItem)
}

func (c *crashClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return crashWrite(c, ctx, in, c.API.TransactWriteItems)
}

func (c *crashClient) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return crashWrite(c, ctx, in, c.API.BatchWriteItem)
}

// TestInvoicesCrashSweep sweeps a crash over every write of an issuance
// on the local server. The test command sweeps the hardest mode (the write
// made, its answer lost) on both layouts and a crash before the write on
// the single table; the long step every mode on both (about 60 s).
func TestInvoicesCrashSweep(t *testing.T) {
	for name, legacy := range map[string]bool{"Legacy": true, "SingleTable": false} {
		modes := []billingtest.CrashMode{billingtest.CrashAfter}
		if !legacy {
			modes = append(modes, billingtest.PanicBefore)
		}
		if os.Getenv(dynamotest.LongEnv) != "" {
			modes = nil // all
		}
		t.Run(name, func(t *testing.T) {
			client, newStore := storetest.InvoiceTables(t, legacy)
			billingtest.RunInvoiceCrashSweep(t, func(t *testing.T) (billing.Invoices, billingtest.ArmCrash) {
				cc := &crashClient{API: client}
				s, _ := newStore(t, cc)
				return s, func(k int, mode billingtest.CrashMode) func() bool {
					cc.mu.Lock()
					defer cc.mu.Unlock()
					cc.k, cc.mode, cc.writes = k, mode, 0
					return func() bool { cc.mu.Lock(); defer cc.mu.Unlock(); return cc.struck }
				}
			}, modes...)
		})
	}
}
