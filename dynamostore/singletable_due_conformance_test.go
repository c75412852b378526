package dynamostore_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// newDueSingleTableStore is the engine's store on a fresh single table
// with the due index of shards shards, on the local server behind the
// limit-checking wrapper.
func newDueSingleTableStore(t *testing.T, clock billing.Clock, opts memory.Options, shards int) *dynamostore.SingleTableRepository {
	t.Helper()
	client := dynamotest.Client(t)
	table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL", DueShards: shards}
	dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(table))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	if clock == nil {
		clock = billingtest.NewClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: w, Table: table, Clock: clock, PageSize: opts.PageSize, Collisions: opts.Collisions})
	require.NoError(t, err)
	return repo
}

// TestSingleTableDueQueryConformance: with due shards the single table
// passes the status-query group in the due mode, as the legacy table does.
func TestSingleTableDueQueryConformance(t *testing.T) {
	billingtest.TestStatusQueriesWith(t, func(t *testing.T, opts memory.Options) (billing.Repository, billing.History) {
		repo := newDueSingleTableStore(t, nil, opts, opts.DueShards)
		return repo, repo.History()
	}, singleTableSuite, dynamostore.StatusIndexDue)
}

// TestSingleTableDueLayout runs the single-table suite with due shards.
func TestSingleTableDueLayout(t *testing.T) {
	billingtest.TestSingleTable(t, func(t *testing.T, clock billing.Clock, pageSize int) billingtest.SingleTableStores {
		repo := newDueSingleTableStore(t, clock, memory.Options{PageSize: pageSize}, 3)
		return billingtest.SingleTableStores{Repository: repo, History: repo.History(), Payments: repo.Payments()}
	})
}
