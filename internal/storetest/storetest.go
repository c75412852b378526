// Package storetest builds the DynamoDB stores the tests of several
// packages run against: fresh tables on the local server per call, behind
// the limit-checking wrapper.
package storetest

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
)

// DynamoStores is the conformance suites' factory for the DynamoDB
// implementation: fresh tables on the local server per call, behind the
// limit-checking wrapper (a violated DynamoDB limit fails the test).
func DynamoStores(t *testing.T, opts memory.Options) (billing.Repository, billing.History) {
	t.Helper()
	return DynamoStoresSeeded(t, opts, nil)
}

// DynamoStoresSeeded is DynamoStores with seed and its history rows
// written first, as AddAll would write them after its collision policy but
// in plain batch writes (no due keys, no conditions): for tests that need many records, since the local server
// copies the whole table for every action of a transaction, which makes
// seeding thousands through Add or AddAll take minutes.
func DynamoStoresSeeded(t *testing.T, opts memory.Options, seed []billing.Subscription) (billing.Repository, billing.History) {
	t.Helper()
	client := dynamotest.Client(t)
	tables := dynamostore.TableConfig{
		Subscriptions:   dynamotest.TableName(t, "billing-activity"),
		History:         dynamotest.TableName(t, "billing-activity-history"),
		StatusIndexMode: opts.StatusIndexMode,
		DueShards:       opts.DueShards,
	}
	dynamotest.CreateTable(t, client, dynamostore.SubscriptionsTableDefinition(tables))
	dynamotest.CreateTable(t, client, dynamostore.HistoryTableDefinition(tables))
	collisions := opts.Collisions
	if collisions == nil {
		collisions = layout.DefaultCollisionPolicy
	}
	seed, err := collisions(seed) // keys made distinct, as AddAll would
	if err != nil {
		t.Fatal(err)
	}
	// One batch holds at most 25 puts, none two of one key (a later row
	// of a key overwrites the earlier, as the batches come in order).
	req, keys := map[string][]types.WriteRequest{}, map[string]bool{}
	n := 0
	flush := func() {
		for len(req) > 0 {
			out, err := client.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: req})
			if err != nil {
				t.Fatalf("seeding %d records: %v", len(seed), err)
			}
			req = out.UnprocessedItems
		}
		req, keys, n = map[string][]types.WriteRequest{}, map[string]bool{}, 0
	}
	put := func(table, sk string, item map[string]types.AttributeValue) {
		key := table + "\x00" + layout.StringOf(item[layout.AttrUserID]) + "\x00" + layout.StringOf(item[sk])
		if n == 25 || keys[key] {
			flush()
		}
		req[table] = append(req[table], types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		keys[key] = true
		n++
	}
	var prims, hists []map[string]types.AttributeValue
	for i := range seed {
		prim, err := layout.EncodeItem(&seed[i])
		if err != nil {
			t.Fatal(err)
		}
		hist, err := layout.EncodeHistoryItem(&seed[i])
		if err != nil {
			t.Fatal(err)
		}
		prims, hists = append(prims, prim), append(hists, hist)
	}
	// A table's items in batches of their own: the local server checks a
	// batch's keys for duplicates without telling the tables apart.
	for _, it := range prims {
		put(tables.Subscriptions, layout.AttrBillingDate, it)
	}
	flush()
	for _, it := range hists {
		put(tables.History, layout.AttrLastRunDate, it)
	}
	flush()
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	return NewDynamoStores(t, dynamostore.Config{Client: w, Tables: tables, PageSize: opts.PageSize, Collisions: opts.Collisions})
}

// NewDynamoStores returns the repository and history of cfg.
func NewDynamoStores(t *testing.T, cfg dynamostore.Config) (*dynamostore.Repository, *dynamostore.History) {
	t.Helper()
	repo, err := dynamostore.NewRepository(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := dynamostore.NewHistory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return repo, hist
}

// NewSingleTableStore returns the engine's store on a fresh single table
// on the local server, behind the limit-checking wrapper, with ACC#
// partitions (the recurring payments layout), reading the sharded due
// index when opts.DueShards is set.
func NewSingleTableStore(t *testing.T, clock billing.Clock, opts memory.Options) *dynamostore.SingleTableRepository {
	t.Helper()
	client := dynamotest.Client(t)
	table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL", DueShards: opts.DueShards}
	dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(table))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	if clock == nil {
		clock = billingtest.NewClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: w, Table: table, Clock: clock, PageSize: opts.PageSize, Collisions: opts.Collisions})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}
