package billing_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/require"
)

// TestInvoiceFleetSharesOneSequence: eight collectors, each a process of
// its own (its own store values on the local server), collect the due
// periods of eight shards at once, issuing every invoice in one host-wide
// sequence: each finalization races the others for the sequence's counter.
// The numbers are 1..N, each once, one per charge, each paid by its
// charge. The README's test command collects 24 periods; CI's long step
// (BILLING_LONG_TESTS=1) 500.
func TestInvoiceFleetSharesOneSequence(t *testing.T) {
	t.Parallel()
	n := 24
	if dynamotest.LongTests() {
		n = 500
	}
	const shards = 8
	client := dynamotest.Client(t)
	tables := dynamostore.TableConfig{
		Subscriptions:   dynamotest.TableName(t, "fleet-activity"),
		History:         dynamotest.TableName(t, "fleet-history"),
		Invoices:        dynamotest.TableName(t, "fleet-invoices"),
		StatusIndexMode: dynamostore.StatusIndexDue, DueShards: shards,
	}
	for _, def := range []func(dynamostore.TableConfig) *dynamodb.CreateTableInput{dynamostore.SubscriptionsTableDefinition,
		dynamostore.HistoryTableDefinition, dynamostore.InvoicesTableDefinition} {
		dynamotest.CreateTable(t, client, def(tables))
	}
	now := benchNow
	clock := billingtest.NewClock(now)
	locker := billingtest.NewLocker(clock, time.Minute) // the fleet's shared lock table
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	store := func() (billing.Repository, billing.Invoices) {
		w := dynamotest.Wrap(client)
		t.Cleanup(func() { w.AssertNoViolations(t) })
		repo, err := dynamostore.NewRepository(dynamostore.Config{Client: w, Tables: tables})
		require.NoError(t, err)
		inv, err := dynamostore.NewInvoices(dynamostore.Config{Client: w, Tables: tables})
		require.NoError(t, err)
		return repo, inv
	}
	repo, inv := store()
	seedDue(t, repo, now, n, 0, func(i int) string { return fmt.Sprintf("fleet-user-%04d", i) })

	var wg sync.WaitGroup
	for k := range shards {
		repo, inv := store()
		c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: locker, Provider: pay, Clock: clock,
			Invoices: inv, Invoicing: billing.Invoicing{Sequence: "FLEET"}, Concurrency: 2})
		require.NoError(t, err)
		wg.Go(func() {
			req := billing.RunRequest{Kind: billing.RunScheduled, Shards: []int{k}}
			for {
				rep, err := c.Run(t.Context(), req)
				if err != nil {
					t.Errorf("shard %d: %v", k, err)
					return
				}
				if len(rep.Failed) > 0 {
					t.Errorf("shard %d: %+v", k, rep.Failed)
				}
				if req.Cursor = rep.Next; req.Cursor == "" {
					return
				}
			}
		})
	}
	wg.Wait()

	calls := pay.Calls()
	require.Len(t, calls, n, "one charge per period")
	var seqs []int64
	for _, call := range calls {
		got, err := inv.Invoice(t.Context(), call.Request.InvoiceID)
		require.NoError(t, err)
		require.Equal(t, billing.InvoicePaid, got.Status, "%+v", got)
		require.Equal(t, call.Result.TransactionID, got.TransactionID)
		require.Equal(t, int64(999), got.Total)
		require.Equal(t, fmt.Sprintf("FLEET-%04d", got.Seq), got.Number)
		byNumber, err := inv.ByNumber(t.Context(), got.UserID, "FLEET", got.Number)
		require.NoError(t, err)
		require.Equal(t, got.ID, byNumber.ID)
		seqs = append(seqs, got.Seq)
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		require.Equal(t, int64(i+1), s, "numbers %v: not 1..%d", seqs, n)
	}
}
