// Package storetest builds the DynamoDB stores the tests of several
// packages run against: fresh tables on the local server per call, behind
// the limit-checking wrapper.
package storetest

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/memory"
)

// DynamoStores is the conformance suites' factory for the DynamoDB
// implementation: fresh tables on the local server per call, behind the
// limit-checking wrapper (a violated DynamoDB limit fails the test).
func DynamoStores(t *testing.T, opts memory.Options) (billing.Repository, billing.History) {
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
