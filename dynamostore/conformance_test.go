package dynamostore_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
)

// rawSuite gives the suites tables they can write raw items into.
var rawSuite = billingtest.SuiteOptions{RawStores: storetest.DynamoRawStores}

func TestDynamoRepositoryConformance(t *testing.T) {
	billingtest.TestRepositoryWith(t, storetest.DynamoStores, rawSuite)
}

func TestDynamoHistoryConformance(t *testing.T) {
	billingtest.TestHistoryWith(t, func(t *testing.T) billing.History {
		_, h := storetest.DynamoStores(t, memory.Options{})
		return h
	}, rawSuite)
}
