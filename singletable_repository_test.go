package billing_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/dynamotest"
)

// singleTableUser maps a suite user to a subscription of its own account.
func singleTableUser(base string) string {
	return billing.SubscriptionRef{AccountID: base, SubscriptionID: "S1", SKU: "SKU9"}.UserID()
}

var singleTableSuite = billingtest.SuiteOptions{UserID: singleTableUser, SkipStatusQueries: true}

// newSingleTableStore returns the engine's store on a fresh single table
// on the local server, behind the limit-checking wrapper, with ACC#
// partitions (requirements/001).
func newSingleTableStore(t *testing.T, clock billing.Clock, opts billingtest.StoreOptions) *billing.SingleTableRepository {
	t.Helper()
	client := dynamotest.Client(t)
	table := billing.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL"}
	dynamotest.CreateTable(t, client, billing.SingleTableDefinition(table))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	if clock == nil {
		clock = billingtest.NewClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	repo, err := billing.NewSingleTableRepository(billing.SingleTableStoreConfig{Client: w, Table: table, Clock: clock, PageSize: opts.PageSize, Collisions: opts.Collisions})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func TestSingleTableRepositoryConformance(t *testing.T) {
	billingtest.TestRepositoryWith(t, func(t *testing.T, opts billingtest.StoreOptions) (billing.Repository, billing.History) {
		repo := newSingleTableStore(t, nil, opts)
		return repo, repo.History()
	}, singleTableSuite)
}

func TestSingleTableHistoryConformance(t *testing.T) {
	billingtest.TestHistoryWith(t, func(t *testing.T) billing.History {
		return newSingleTableStore(t, nil, billingtest.StoreOptions{}).History()
	}, singleTableSuite)
}

func TestSingleTableLayout(t *testing.T) {
	billingtest.TestSingleTable(t, func(t *testing.T, clock billing.Clock, pageSize int) billingtest.SingleTableStores {
		repo := newSingleTableStore(t, clock, billingtest.StoreOptions{PageSize: pageSize})
		return billingtest.SingleTableStores{Repository: repo, History: repo.History(), Payments: repo.Payments()}
	})
}
