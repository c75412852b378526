package billingtest

import (
	"testing"

	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// NewMemoryStore returns an empty [memory.Store] with opts, failing t when
// [memory.New] refuses them: a test fixes its options, so a refusal is
// the test's own mistake.
func NewMemoryStore(t testing.TB, opts memory.Options) *memory.Store {
	t.Helper()
	s, err := memory.New(opts)
	require.NoError(t, err, "memory.New")
	return s
}

// NewMemorySingleTable returns an empty [memory.SingleTable] with opts,
// failing t when [memory.NewSingleTable] refuses them.
func NewMemorySingleTable(t testing.TB, opts memory.SingleTableOptions) *memory.SingleTable {
	t.Helper()
	s, err := memory.NewSingleTable(opts)
	require.NoError(t, err, "memory.NewSingleTable")
	return s
}
