// Package storetest builds the DynamoDB stores the tests of several
// packages run against: fresh tables on the local server per call, behind
// the limit-checking wrapper.
package storetest

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"maps"
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
func DynamoStoresSeeded(t *testing.T, opts memory.Options, seed []billing.Period) (billing.Repository, billing.History) {
	t.Helper()
	client, tables := legacyTables(t, opts)
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
	put := func(table, sk string, item map[string]av.AttributeValue) {
		key := table + "\x00" + layout.StringOf(item[layout.AttrUserID]) + "\x00" + layout.StringOf(item[sk])
		if n == 25 || keys[key] {
			flush()
		}
		req[table] = append(req[table], types.WriteRequest{PutRequest: &types.PutRequest{Item: sdkav.ToSDK(item)}})
		keys[key] = true
		n++
	}
	var prims, hists []map[string]av.AttributeValue
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

// DynamoRawStores is the conformance suites' [billingtest.RawStoresFunc]
// for the legacy tables: DynamoStores with a writer of raw items into its
// tables.
func DynamoRawStores(t *testing.T) (billing.Repository, billing.History, billingtest.PutRawFunc) {
	t.Helper()
	client, tables := legacyTables(t, memory.Options{})
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	repo, hist := NewDynamoStores(t, dynamostore.Config{Client: w, Tables: tables})
	put := func(ctx context.Context, table string, item map[string]av.AttributeValue) error {
		name := tables.Subscriptions
		switch table {
		case memory.SubscriptionsTable:
		case memory.HistoryTable:
			name = tables.History
		default:
			return fmt.Errorf("storetest: unknown table %q", table)
		}
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &name, Item: sdkav.ToSDK(item)})
		return err
	}
	return repo, hist, put
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

// SingleTableRawStores is the conformance suites' [billingtest.RawStoresFunc]
// for the single table: NewSingleTableStore with a writer of raw items,
// which puts a record's item as a period and a history row's as a
// history row, under the keys the layout gives them.
func SingleTableRawStores(t *testing.T) (billing.Repository, billing.History, billingtest.PutRawFunc) {
	t.Helper()
	repo, client, table := newSingleTableStore(t, nil, memory.Options{})
	cfg := layout.SingleTableConfig(table).WithDefaults()
	put := func(ctx context.Context, tableName string, item map[string]av.AttributeValue) error {
		ref, err := layout.ParseSubscriptionRef(layout.StringOf(item[layout.AttrUserID]))
		if err != nil {
			return err
		}
		item = maps.Clone(item)
		switch tableName {
		case memory.SubscriptionsTable:
			item[layout.AttrSK] = layout.StringAV(layout.PeriodSK(ref, layout.StringOf(item[layout.AttrBillingDate])))
			item[layout.PayEntity] = layout.StringAV(layout.EntityPeriod)
		case memory.HistoryTable:
			item[layout.AttrSK] = layout.StringAV(layout.HistorySK(ref, layout.StringOf(item[layout.AttrLastRunDate])))
			item[layout.PayEntity] = layout.StringAV(layout.EntityHistory)
		default:
			return fmt.Errorf("storetest: unknown table %q", tableName)
		}
		item[layout.AttrPK] = layout.StringAV(cfg.AccountPK(ref.AccountID))
		_, err = client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &cfg.Table, Item: sdkav.ToSDK(item)})
		return err
	}
	return repo, repo.History(), put
}

// NewSingleTableStore returns the engine's store on a fresh single table
// on the local server, behind the limit-checking wrapper, with ACC#
// partitions (the recurring payments layout), reading the sharded due
// index when opts.DueShards is set.
func NewSingleTableStore(t *testing.T, clock billing.Clock, opts memory.Options) *dynamostore.SingleTableRepository {
	t.Helper()
	repo, _, _ := newSingleTableStore(t, clock, opts)
	return repo
}

// newSingleTableStore is NewSingleTableStore, with the client (without
// the wrapper) and the table.
func newSingleTableStore(t *testing.T, clock billing.Clock, opts memory.Options) (*dynamostore.SingleTableRepository, dynamostore.API, dynamostore.SingleTableConfig) {
	t.Helper()
	client := dynamotest.Client(t)
	table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL", DueShards: opts.DueShards}
	dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(table))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	if clock == nil {
		clock = billingtest.NewClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: w, Table: table, Clock: clock, PageSize: opts.PageSize, Collisions: opts.Collisions, Totals: true})
	if err != nil {
		t.Fatal(err)
	}
	return repo, client, table
}

// legacyTables creates fresh legacy tables on the local server in opts'
// index mode and returns the client and their names.
func legacyTables(t *testing.T, opts memory.Options) (*dynamodb.Client, dynamostore.TableConfig) {
	t.Helper()
	client := dynamotest.Client(t)
	tables := dynamostore.TableConfig{
		Subscriptions:   dynamotest.TableName(t, "billing-activity"),
		History:         dynamotest.TableName(t, "billing-activity-history"),
		StatusIndexMode: opts.StatusIndexMode,
		DueShards:       opts.DueShards,
		// The day totals are kept, so the suites check them.
		Totals: dynamotest.TableName(t, "billing-totals"),
	}
	dynamotest.CreateTable(t, client, dynamostore.SubscriptionsTableDefinition(tables))
	dynamotest.CreateTable(t, client, dynamostore.HistoryTableDefinition(tables))
	dynamotest.CreateTable(t, client, dynamostore.TotalsTableDefinition(tables))
	return client, tables
}
