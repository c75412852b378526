package billing_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/dynamotest"
)

// dynamoStores is the conformance suites' factory for the DynamoDB
// implementation: fresh tables on the local server per call, behind the
// limit-checking wrapper (a violated DynamoDB limit fails the test).
func dynamoStores(t *testing.T, opts billingtest.StoreOptions) (billing.Repository, billing.History) {
	t.Helper()
	client := dynamotest.Client(t)
	tables := billing.TableConfig{
		Subscriptions:   dynamotest.TableName(t, "billing-activity"),
		History:         dynamotest.TableName(t, "billing-activity-history"),
		StatusIndexMode: opts.StatusIndexMode,
	}
	dynamotest.CreateTable(t, client, billing.SubscriptionsTableDefinition(tables))
	dynamotest.CreateTable(t, client, billing.HistoryTableDefinition(tables))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	return newDynamoStores(t, billing.DynamoConfig{Client: w, Tables: tables, PageSize: opts.PageSize, Collisions: opts.Collisions})
}

// newDynamoStores returns the repository and history of cfg.
func newDynamoStores(t *testing.T, cfg billing.DynamoConfig) (*billing.DynamoRepository, *billing.DynamoHistory) {
	t.Helper()
	repo, err := billing.NewDynamoRepository(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := billing.NewDynamoHistory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return repo, hist
}

func TestDynamoRepositoryConformance(t *testing.T) {
	billingtest.TestRepository(t, dynamoStores)
}

func TestDynamoHistoryConformance(t *testing.T) {
	billingtest.TestHistory(t, func(t *testing.T) billing.History {
		_, h := dynamoStores(t, billingtest.StoreOptions{})
		return h
	})
}
