package billing_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// The collector benchmarks: what a scheduled run costs per collected
// subscription.
//
// BenchmarkCollectorDynamoDB runs the scheduled run over benchDue due
// SCHEDULED records among benchNotDue later ones (every collection
// succeeds and opens the next period) on the local DynamoDB server, in
// the legacy table's status index modes and on the single-table layout
// (three SKUs per account; its payment-index walk, and its due index of 8
// shards), with the DynamoDB locker, and reports per
// collected subscription the DynamoDB calls (locks included), the items
// read, and the write and read capacity units computed by dynamotest's
// wrapper from item sizes (its RCU under-counts filtered pages: the legacy
// index's read amplification shows in items-read). On moto, slow
// transactions make leases live past a heartbeat now and then, which adds
// a few lock writes. With DYNAMODB_ENDPOINT set (DynamoDB Local), it also asks the
// server for ConsumedCapacity and reports what it says, as server-WCU and
// server-RCU; moto answers constants, so they are not reported there.
// BenchmarkCollectorInMemory reports collections per second on the
// in-memory store (the engine's own overhead, with no storage latency),
// and the heap allocations and bytes per collection of the timed runs,
// with 1,000 and 4,000 due records (docs/performance.md).
//
//	CI=true go test -run XXX -bench Collector -benchtime 1x .
//	DYNAMODB_ENDPOINT=http://localhost:8000 go test -run XXX -bench CollectorDynamoDB -benchtime 3x .

// benchDue is the number of due records a benchmark run collects, among
// benchNotDue records billed later.
const (
	benchDue    = 100
	benchNotDue = 300
)

func BenchmarkCollectorDynamoDB(b *testing.B) {
	type storeLayout struct {
		name string
		// stores creates fresh tables and returns the repository on
		// client and the lock table.
		stores func(b *testing.B, client *dynamodb.Client) (repo func(dynamostore.API) billing.Repository, userID func(int) string, locks string)
		// invoices, when set, makes the invoice store the collector
		// issues into, on the same tables' client.
		invoices func(b *testing.B, client *dynamodb.Client) func(dynamostore.API) billing.Invoices
	}
	legacy := func(mode dynamostore.StatusIndexMode) storeLayout {
		return storeLayout{name: mode.String(), stores: func(b *testing.B, client *dynamodb.Client) (func(dynamostore.API) billing.Repository, func(int) string, string) {
			tables := dynamostore.TableConfig{
				Subscriptions:   dynamotest.TableName(b, "bench-activity"),
				History:         dynamotest.TableName(b, "bench-history"),
				Locks:           dynamotest.TableName(b, "bench-locks"),
				StatusIndexMode: mode,
			}
			if mode == dynamostore.StatusIndexDue {
				tables.DueShards = 8
			}
			dynamotest.CreateTable(b, client, dynamostore.SubscriptionsTableDefinition(tables))
			dynamotest.CreateTable(b, client, dynamostore.HistoryTableDefinition(tables))
			dynamotest.CreateTable(b, client, dynamostore.LockTableDefinition(tables.Locks))
			return func(c dynamostore.API) billing.Repository {
				repo, err := dynamostore.NewRepository(dynamostore.Config{Client: c, Tables: tables})
				require.NoError(b, err)
				return repo
			}, func(i int) string { return fmt.Sprintf("bench-user-%05d", i) }, tables.Locks
		}}
	}
	single := func(name string, dueShards int) storeLayout {
		return storeLayout{name: name, stores: func(b *testing.B, client *dynamodb.Client) (func(dynamostore.API) billing.Repository, func(int) string, string) {
			table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(b, "bench-payments"), AccountPrefix: "ACC#", DueShards: dueShards}
			locks := dynamotest.TableName(b, "bench-locks")
			dynamotest.CreateTable(b, client, dynamostore.SingleTableDefinition(table))
			dynamotest.CreateTable(b, client, dynamostore.LockTableDefinition(locks))
			skus := []string{"STREAM", "MUSIC", "NEWS"}
			return func(c dynamostore.API) billing.Repository {
					repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: c, Table: table,
						Clock: billingtest.NewClock(benchNow)})
					require.NoError(b, err)
					return repo
				}, func(i int) string {
					return layout.SubscriptionRef{AccountID: fmt.Sprintf("bench-%05d", i/3), SubscriptionID: fmt.Sprint("s", i), SKU: skus[i%3]}.UserID()
				}, locks
		}}
	}
	// withInvoices is l with the collector issuing invoices into a table
	// of their own (one per account's sequence, the default).
	withInvoices := func(l storeLayout) storeLayout {
		l.name += "+invoices"
		l.invoices = func(b *testing.B, client *dynamodb.Client) func(dynamostore.API) billing.Invoices {
			tables := dynamostore.TableConfig{Invoices: dynamotest.TableName(b, "bench-invoices")}
			dynamotest.CreateTable(b, client, dynamostore.InvoicesTableDefinition(tables))
			return func(c dynamostore.API) billing.Invoices {
				inv, err := dynamostore.NewInvoices(dynamostore.Config{Client: c, Tables: tables})
				require.NoError(b, err)
				return inv
			}
		}
		return l
	}
	for _, l := range []storeLayout{legacy(dynamostore.StatusIndexLegacy), legacy(dynamostore.StatusIndexSorted), legacy(dynamostore.StatusIndexDue),
		withInvoices(legacy(dynamostore.StatusIndexDue)), single("single-table", 0), single("single-table-due", 8)} {
		b.Run(l.name, func(b *testing.B) {
			client := dynamotest.Client(b)
			now := benchNow
			var calls, lockCalls, itemsRead, collected int
			var wcu, rcu, lockWCU, gsiWCU float64
			var server serverCapacity
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// Fresh tables per iteration: moto's transactions copy the
				// tables they touch, so their cost grows with the tables.
				newRepo, userID, locks := l.stores(b, client)
				seedDue(b, newRepo(client), now, benchDue, benchNotDue, userID)

				gc := newGSICounter(client)
				w := dynamotest.Wrap(gc)
				cc := &consumedCounter{API: w}
				repo := newRepo(cc)
				var inv billing.Invoices
				if l.invoices != nil {
					inv = l.invoices(b, client)(cc)
				}
				// The locks get a wrapper of their own: their heartbeats
				// depend on how long the run takes, the data calls do not.
				wl := dynamotest.Wrap(client)
				locker, err := dynamostore.NewLocker(wl, dynamostore.WithLockTable(locks))
				require.NoError(b, err)
				c := newBenchCollector(b, repo, locker, now, inv)
				b.StartTimer()
				rep := runToEnd(b, c, billing.RunScheduled)
				b.StopTimer()
				require.NoError(b, locker.Close(context.Background()))
				if rep.Collected != benchDue {
					b.Fatalf("collected %d of %d due records: %+v", rep.Collected, benchDue, rep.Failed)
				}
				w.AssertNoViolations(b)
				calls += w.TotalCalls()
				lockCalls += wl.TotalCalls()
				lockWCU += wl.WriteCapacity()
				itemsRead += w.ItemsRead()
				wcu += w.WriteCapacity()
				_, gw := gc.total()
				gsiWCU += gw
				rcu += w.ReadCapacity()
				collected += rep.Collected
				server.add(cc.total())
				b.StartTimer()
			}
			n := float64(collected)
			b.ReportMetric(float64(calls)/n, "calls/collected")
			b.ReportMetric(float64(lockCalls)/n, "lock-calls/collected")
			b.ReportMetric(lockWCU/n, "lock-WCU/collected")
			b.ReportMetric(wcu/n, "WCU/collected")
			b.ReportMetric(gsiWCU/n, "GSI-WCU/collected")
			b.ReportMetric(rcu/n, "RCU/collected")
			b.ReportMetric(float64(itemsRead)/n, "items-read/collected")
			if server.reported && os.Getenv(dynamotest.EnvEndpoint) != "" {
				b.ReportMetric(server.write/n, "server-WCU/collected")
				b.ReportMetric(server.read/n, "server-RCU/collected")
			}
		})
	}
}

func BenchmarkCollectorInMemory(b *testing.B) {
	for _, due := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("due=%d", due), func(b *testing.B) {
			now := benchNow
			var collected int
			var spent, cpuSpent time.Duration
			var allocs, bytes uint64
			var before, after runtime.MemStats
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				store := billingtest.NewMemoryStore(b, memory.Options{})
				seedDue(b, store.Repository(), now, due, 0, func(i int) string { return fmt.Sprintf("bench-user-%05d", i) })
				c := newBenchCollector(b, store.Repository(), nil, now)
				runtime.GC() // the seeding's garbage is not the run's to collect
				runtime.ReadMemStats(&before)
				b.StartTimer()
				began, cpu := time.Now(), processCPU()
				rep := runToEnd(b, c, billing.RunScheduled)
				spent += time.Since(began)
				cpuSpent += processCPU() - cpu
				b.StopTimer()
				runtime.ReadMemStats(&after)
				allocs += after.Mallocs - before.Mallocs
				bytes += after.TotalAlloc - before.TotalAlloc
				if rep.Collected != due {
					b.Fatalf("collected %d of %d", rep.Collected, due)
				}
				collected += rep.Collected
				b.StartTimer()
			}
			n := float64(collected)
			b.ReportMetric(n/spent.Seconds(), "collections/s")
			if cpuSpent > 0 {
				b.ReportMetric(float64(cpuSpent.Microseconds())/n, "cpu-us/collection")
			}
			b.ReportMetric(float64(allocs)/n, "allocs/collection")
			b.ReportMetric(float64(bytes)/n, "B/collection")
		})
	}
}

// benchNow is the time of the benchmarks' runs.
var benchNow = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// seedDue writes due SCHEDULED records billed before now and notDue
// billed after it, one per user (the i-th is userID(i)).
func seedDue(b testing.TB, repo billing.Repository, now time.Time, due, notDue int, userID func(int) string) {
	b.Helper()
	recs := make([]billing.Period, due+notDue)
	for i := range recs {
		bd := now.Add(-time.Duration(i+1) * time.Minute).Truncate(time.Second)
		if i >= due {
			bd = now.Add(time.Duration(i+1) * time.Hour).Truncate(time.Second)
		}
		recs[i] = billing.Period{
			UserID: userID(i), SubscriptionID: fmt.Sprintf("bench-sub-%05d", i),
			BillingDate: bd, AnchorDay: bd.Day(), BillingPeriod: billing.BillingPeriod(bd), Status: billing.StatusScheduled,
			Amount: billing.MustParseAmount("9.99"), Term: billing.TermMonthly, ReceiptTierName: "Plus:v2",
			CreatedDate: now.AddDate(0, -1, 0), LastRunDate: now.AddDate(0, -1, 0),
		}
	}
	if _, err := repo.AddAll(context.Background(), recs); err != nil {
		b.Fatal(err)
	}
}

// newBenchCollector returns a collector on repo whose provider collects
// every charge at once; a nil locker means the in-memory one.
func newBenchCollector(b *testing.B, repo billing.Repository, locker billing.Locker, now time.Time, inv ...billing.Invoices) *billing.Collector {
	b.Helper()
	clock := billingtest.NewClock(now)
	if locker == nil {
		locker = billingtest.NewLocker(clock, 0)
	}
	var invoices billing.Invoices
	if len(inv) > 0 {
		invoices = inv[0]
	}
	c, err := billing.NewCollector(billing.Config{
		Repository: repo, Locker: locker, Clock: clock, Invoices: invoices,
		Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}),
	})
	require.NoError(b, err)
	return c
}

// benchTotals sums the reports of a run's invocations.
type benchTotals struct {
	Attempted, Collected int
	Failed               []billing.ItemFailure
}

// runToEnd runs kind through every continuation and sums the reports.
func runToEnd(b *testing.B, c *billing.Collector, kind billing.RunKind) (total benchTotals) {
	b.Helper()
	req := billing.RunRequest{Kind: kind}
	for {
		rep, err := c.Run(context.Background(), req)
		require.NoError(b, err)
		total.Attempted += rep.Attempted
		total.Collected += rep.Collected
		total.Failed = append(total.Failed, rep.Failed...)
		if req.Cursor = rep.Next; req.Cursor == "" {
			return total
		}
	}
}

// serverCapacity sums the capacity a server reported.
type serverCapacity struct {
	read, write float64
	reported    bool
}

func (c *serverCapacity) add(o serverCapacity) {
	c.read += o.read
	c.write += o.write
	c.reported = c.reported || o.reported
}

// consumedCounter asks the server for ConsumedCapacity (TOTAL) on every
// data-plane call and sums what it answers, reads and writes apart. The
// caller's inputs are copied, never changed.
type consumedCounter struct {
	dynamostore.API
	mu sync.Mutex
	c  serverCapacity
}

var _ dynamostore.API = (*consumedCounter)(nil)

func (cc *consumedCounter) total() serverCapacity {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.c
}

func (cc *consumedCounter) record(write bool, caps ...types.ConsumedCapacity) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, c := range caps {
		u := aws.ToFloat64(c.CapacityUnits)
		if u == 0 {
			continue
		}
		cc.c.reported = true
		if write {
			cc.c.write += u
		} else {
			cc.c.read += u
		}
	}
}

func oneCapacity(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

const capacityTotal = types.ReturnConsumedCapacityTotal

func (cc *consumedCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = capacityTotal
	out, err := cc.API.GetItem(ctx, &cp, optFns...)
	if err == nil {
		cc.record(false, oneCapacity(out.ConsumedCapacity)...)
	}
	return out, err
}

func (cc *consumedCounter) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = capacityTotal
	out, err := cc.API.Query(ctx, &cp, optFns...)
	if err == nil {
		cc.record(false, oneCapacity(out.ConsumedCapacity)...)
	}
	return out, err
}

func (cc *consumedCounter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = capacityTotal
	out, err := cc.API.PutItem(ctx, &cp, optFns...)
	if err == nil {
		cc.record(true, oneCapacity(out.ConsumedCapacity)...)
	}
	return out, err
}

func (cc *consumedCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = capacityTotal
	out, err := cc.API.UpdateItem(ctx, &cp, optFns...)
	if err == nil {
		cc.record(true, oneCapacity(out.ConsumedCapacity)...)
	}
	return out, err
}

func (cc *consumedCounter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = capacityTotal
	out, err := cc.API.DeleteItem(ctx, &cp, optFns...)
	if err == nil {
		cc.record(true, oneCapacity(out.ConsumedCapacity)...)
	}
	return out, err
}

func (cc *consumedCounter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = capacityTotal
	out, err := cc.API.TransactWriteItems(ctx, &cp, optFns...)
	if err == nil {
		cc.record(true, out.ConsumedCapacity...)
	}
	return out, err
}

func (cc *consumedCounter) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = capacityTotal
	out, err := cc.API.BatchWriteItem(ctx, &cp, optFns...)
	if err == nil {
		cc.record(true, out.ConsumedCapacity...)
	}
	return out, err
}
