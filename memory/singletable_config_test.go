package memory_test

import (
	"testing"

	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// TestNewSingleTableRejectsWhatDynamoDBRejects: a Table the DynamoDB
// store's config check refuses is refused here too, by the same check.
func TestNewSingleTableRejectsWhatDynamoDBRejects(t *testing.T) {
	for name, table := range map[string]dynamostore.SingleTableConfig{
		"DueShards above the bound":  {DueShards: dynamostore.MaxDueShards + 1},
		"negative DueShards":         {DueShards: -1},
		"DueIndex is PaymentIndex":   {DueShards: 2, DueIndex: "GSI-2", PaymentIndex: "GSI-2"},
		"TTLAttribute is a key":      {TTLAttribute: "PK"},
		"ReminderIndex is PaymentIx": {ReminderIndex: "GSI-1", PaymentIndex: "GSI-1"},
	} {
		require.Panics(t, func() { memory.NewSingleTable(memory.SingleTableOptions{Table: table}) }, name)
	}
	require.NotPanics(t, func() {
		memory.NewSingleTable(memory.SingleTableOptions{Table: dynamostore.SingleTableConfig{DueShards: dynamostore.MaxDueShards}})
	})
}
