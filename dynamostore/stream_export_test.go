package dynamostore

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/require"
)

// DeriveHistoryEventType is the event type the stream decoder derives
// for row when the row does not name its change.
func DeriveHistoryEventType(t testing.TB, row billing.Period) billing.EventType {
	t.Helper()
	row.Change = ""
	typ, err := historyEventType(&row)
	require.NoError(t, err)
	return typ
}
