package dynamostore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
// made, its answer lost) on both layouts; the long step every mode on both
// (about 60 s).
func TestInvoicesCrashSweep(t *testing.T) {
	for name, legacy := range map[string]bool{"Legacy": true, "SingleTable": false} {
		modes := []billingtest.CrashMode{billingtest.CrashAfter}
		if dynamotest.LongTests() {
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

// TestInvoicesCost measures what one invoice costs without contention: a
// draft, a finalization in the account's own sequence and in a host-wide
// one, and a payment.
func TestInvoicesCost(t *testing.T) {
	client, newStore := storetest.InvoiceTables(t, false)
	s, w := newStore(t, client)
	ctx := t.Context()
	measure := func(name string, calls int, wcu float64, fn func()) {
		t.Helper()
		w.Reset()
		fn()
		t.Logf("%s: %d calls, %.1f WCU, %.1f RCU", name, w.TotalCalls(), w.WriteCapacity(), w.ReadCapacity())
		assert.Equal(t, calls, w.TotalCalls(), name)
		assert.Equal(t, wcu, w.WriteCapacity(), name)
	}
	var own, host billing.Invoice
	measure("draft", 1, 6, func() {
		var err error
		own, err = s.CreateDraft(ctx, billingtest.NewTestInvoice("u1", "p1", 1))
		require.NoError(t, err)
	})
	inv := billingtest.NewTestInvoice("u1", "p2", 2)
	inv.Sequence = "HOST"
	host, err := s.CreateDraft(ctx, inv)
	require.NoError(t, err)
	measure("finalize, account's sequence", 2, 8, func() {
		_, err := s.Finalize(ctx, own.ID, time.Now())
		require.NoError(t, err)
	})
	measure("finalize, host-wide sequence", 3, 8, func() {
		_, err := s.Finalize(ctx, host.ID, time.Now())
		require.NoError(t, err)
	})
	measure("finalize repeated", 1, 0, func() {
		_, err := s.Finalize(ctx, own.ID, time.Now())
		require.NoError(t, err)
	})
	measure("mark paid", 2, 4, func() {
		_, err := s.MarkPaid(ctx, own.ID, "tx1", time.Now())
		require.NoError(t, err)
	})
}

// TestInvoicesItems reads the items an invoice leaves on each layout: the
// wire contract of the invoice items.
func TestInvoicesItems(t *testing.T) {
	for name, legacy := range map[string]bool{"Legacy": true, "SingleTable": false} {
		t.Run(name, func(t *testing.T) {
			client, newStore := storetest.InvoiceTables(t, legacy)
			s, _ := newStore(t, client)
			ctx := t.Context()
			own, err := s.CreateDraft(ctx, billingtest.NewTestInvoice("u1", "p1", 1))
			require.NoError(t, err)
			_, err = s.Finalize(ctx, own.ID, time.Now())
			require.NoError(t, err)
			inv := billingtest.NewTestInvoice("u1", "p2", 2)
			inv.Sequence = "HOST"
			host, err := s.CreateDraft(ctx, inv)
			require.NoError(t, err)
			_, err = s.Finalize(ctx, host.ID, time.Now())
			require.NoError(t, err)

			pkName, skName, account := "pk", "sk", "USER#u1"
			if !legacy {
				pkName, skName, account = "PK", "SK", "ACC#u1"
			}
			out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(dynamostore.InvoicesTable(s))})
			require.NoError(t, err)
			items := map[string]map[string]any{}
			for _, it := range out.Items {
				var m map[string]any
				require.NoError(t, attributevalue.UnmarshalMap(it, &m))
				items[m[pkName].(string)+" "+m[skName].(string)] = m
			}
			_, local, _ := strings.Cut(strings.TrimPrefix(own.ID, "in_"), ".")
			_, hlocal, _ := strings.Cut(strings.TrimPrefix(host.ID, "in_"), ".")
			want := map[string]map[string]any{
				account + " INV#" + local:               {"invoice_status": "open", "number": "u1-0001", "seq": 1.0, "version": 2.0, "invoice_key": "p1", "total": 979.0, "currency": "USD"},
				account + " INVKEY#p1":                  {"invoice_id": own.ID},
				account + " INVH#" + local + "#000001":  {"invoice_status": "draft", "event": "invoice_created"},
				account + " INVH#" + local + "#000002":  {"invoice_status": "open", "event": "invoice_finalized", "number": "u1-0001"},
				account + " SEQ#INV":                    {"last_seq": 1.0},
				account + " INVNO#000000000001":         {"invoice_id": own.ID, "number": "u1-0001"},
				account + " INV#" + hlocal:              {"invoice_status": "open", "number": "HOST-0001", "sequence": "HOST"},
				account + " INVKEY#p2":                  {"invoice_id": host.ID},
				account + " INVH#" + hlocal + "#000001": {"event": "invoice_created"},
				account + " INVH#" + hlocal + "#000002": {"event": "invoice_finalized"},
				"SEQ#HOST SEQ#INV":                      {"last_seq": 1.0},
				"SEQ#HOST INVNO#000000000001":           {"invoice_id": host.ID, "number": "HOST-0001"},
			}
			require.Len(t, items, len(want), "items: %v", keysOf(items))
			for key, attrs := range want {
				require.Contains(t, items, key)
				for a, v := range attrs {
					assert.Equal(t, v, items[key][a], "%s %s", key, a)
				}
			}
		})
	}
}

func keysOf(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestInvoicesTableDefinition(t *testing.T) {
	assert.Nil(t, dynamostore.InvoicesTableDefinition(dynamostore.TableConfig{}), "no invoices table unless named")
	assert.Len(t, dynamostore.TableDefinitions(dynamostore.TableConfig{}), 3)
	defs := dynamostore.TableDefinitions(dynamostore.TableConfig{Invoices: "billing-invoices"})
	require.Len(t, defs, 4, "CreateTables makes the invoices table")
	def := defs[3]
	assert.Equal(t, "billing-invoices", aws.ToString(def.TableName))
	require.Len(t, def.KeySchema, 2)
	assert.Equal(t, "pk", aws.ToString(def.KeySchema[0].AttributeName))
	assert.Equal(t, "sk", aws.ToString(def.KeySchema[1].AttributeName))
	_, err := dynamostore.NewInvoices(dynamostore.Config{Client: dynamostore.API(nil)})
	require.Error(t, err)
}
