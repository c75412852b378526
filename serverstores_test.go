package billing_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
)

// singleTableOnServer is the single table on the local DynamoDB server for
// the engine's by-store tests. The README's test command runs those tests
// on both in-memory layouts and on the legacy tables on the server, and
// leaves this case to CI's long step (dynamotest.Long): the server answers
// one request at a time, and the single table's cases were half of its
// time in this package. dynamostore's conformance suites run the single
// table on the server in the README's command.
func singleTableOnServer(t *testing.T, clock billing.Clock, opts memory.Options) *dynamostore.SingleTableRepository {
	t.Helper()
	dynamotest.Long(t)
	return storetest.NewSingleTableStore(t, clock, opts)
}
