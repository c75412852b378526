package memory_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// TestNewRejectsInvalidOptions: options out of range are an error naming
// the field, never a panic, and no store.
func TestNewRejectsInvalidOptions(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  memory.Options
		field string
	}{
		{"negative PageSize", memory.Options{PageSize: -1}, "Options.PageSize"},
		{"unknown StatusIndexMode", memory.Options{StatusIndexMode: dynamostore.StatusIndexDue + 1}, "Options.StatusIndexMode"},
		{"negative StatusIndexMode", memory.Options{StatusIndexMode: -1}, "Options.StatusIndexMode"},
		{"negative DueShards", memory.Options{DueShards: -1}, "Options.DueShards"},
		{"DueShards above the bound", memory.Options{DueShards: dynamostore.MaxDueShards + 1}, "Options.DueShards"},
		{"due mode without DueShards", memory.Options{StatusIndexMode: dynamostore.StatusIndexDue}, "Options.StatusIndexMode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s *memory.Store
			var err error
			require.NotPanics(t, func() { s, err = memory.New(c.opts) })
			require.ErrorContains(t, err, c.field)
			require.Nil(t, s)
		})
	}
	for _, opts := range []memory.Options{{}, {PageSize: 1, StatusIndexMode: dynamostore.StatusIndexDue, DueShards: dynamostore.MaxDueShards}} {
		s, err := memory.New(opts)
		require.NoError(t, err, "%+v", opts)
		require.NotNil(t, s)
	}
}

// TestNewSingleTableRejectsInvalidOptions: the twin refuses what
// dynamostore.NewSingleTableRepository refuses, a Table its config check
// rejects by the same check, with an error naming the field, never a
// panic.
func TestNewSingleTableRejectsInvalidOptions(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  memory.SingleTableOptions
		field string
	}{
		{"negative PageSize", memory.SingleTableOptions{PageSize: -1}, "SingleTableOptions.PageSize"},
		{"negative CatchUpDays", memory.SingleTableOptions{CatchUpDays: -1}, "SingleTableOptions.CatchUpDays"},
		{"negative ReminderLeadDays", memory.SingleTableOptions{ReminderLeadDays: -1}, "SingleTableOptions.ReminderLeadDays"},
		{"negative ReceiptRetention", memory.SingleTableOptions{ReceiptRetention: -time.Hour}, "SingleTableOptions.ReceiptRetention"},
		{"AccountPrefix clashes with the ID pointers", memory.SingleTableOptions{Table: dynamostore.SingleTableConfig{AccountPrefix: "PERIOD"}}, "SingleTableOptions.Table.AccountPrefix"},
		{"DueShards above the bound", memory.SingleTableOptions{Table: dynamostore.SingleTableConfig{DueShards: dynamostore.MaxDueShards + 1}}, "DueShards"},
		{"negative DueShards", memory.SingleTableOptions{Table: dynamostore.SingleTableConfig{DueShards: -1}}, "DueShards"},
		{"DueIndex is PaymentIndex", memory.SingleTableOptions{Table: dynamostore.SingleTableConfig{DueShards: 2, DueIndex: "GSI-2", PaymentIndex: "GSI-2"}}, "DueIndex"},
		{"TTLAttribute is a key", memory.SingleTableOptions{Table: dynamostore.SingleTableConfig{TTLAttribute: "PK"}}, "TTLAttribute"},
		{"ReminderIndex is PaymentIndex", memory.SingleTableOptions{Table: dynamostore.SingleTableConfig{ReminderIndex: "GSI-1", PaymentIndex: "GSI-1"}}, "ReminderIndex"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s *memory.SingleTable
			var err error
			require.NotPanics(t, func() { s, err = memory.NewSingleTable(c.opts) })
			require.ErrorContains(t, err, c.field)
			require.Nil(t, s)
		})
	}
	s, err := memory.NewSingleTable(memory.SingleTableOptions{Table: dynamostore.SingleTableConfig{DueShards: dynamostore.MaxDueShards}})
	require.NoError(t, err)
	require.NotNil(t, s)
}
