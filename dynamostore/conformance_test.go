package dynamostore_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
)

func TestDynamoRepositoryConformance(t *testing.T) {
	billingtest.TestRepository(t, storetest.DynamoStores)
}

func TestDynamoHistoryConformance(t *testing.T) {
	billingtest.TestHistory(t, func(t *testing.T) billing.History {
		_, h := storetest.DynamoStores(t, memory.Options{})
		return h
	})
}
