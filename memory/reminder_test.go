package memory_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

func TestMemoryReminderWorkers(t *testing.T) {
	billingtest.TestReminderWorkers(t, func(t *testing.T, _ billing.Clock) billingtest.ReminderStore {
		s := billingtest.NewMemoryStore(t, memory.Options{})
		return billingtest.ReminderStore{
			Repository: s.Repository(),
			Items: func(t testing.TB, rec *billing.Period) map[string]map[string]av.AttributeValue {
				return items(map[string]map[string]av.AttributeValue{
					billingtest.ReminderRecordItem: s.RawRecord(rec.UserID, layout.BillingDateKey(rec)),
				})
			},
		}
	}, billingtest.SuiteOptions{})
}

func TestMemorySingleTableReminderWorkers(t *testing.T) {
	billingtest.TestReminderWorkers(t, func(t *testing.T, clock billing.Clock) billingtest.ReminderStore {
		s := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock})
		return billingtest.ReminderStore{
			Repository: s.Repository(),
			Items: func(t testing.TB, rec *billing.Period) map[string]map[string]av.AttributeValue {
				ref, err := layout.ParseSubscriptionRef(rec.UserID)
				require.NoError(t, err)
				return items(map[string]map[string]av.AttributeValue{
					billingtest.ReminderRecordItem:       s.RawPeriod(rec.UserID, layout.BillingDateKey(rec)),
					billingtest.ReminderSubscriptionItem: s.RawSubscription(ref),
				})
			},
		}
	}, billingtest.SuiteOptions{UserID: func(base string) string {
		return layout.SubscriptionRef{AccountID: base, SubscriptionID: "S1", SKU: "SKU9"}.UserID()
	}})
}

// items leaves out the roles without an item.
func items(m map[string]map[string]av.AttributeValue) map[string]map[string]av.AttributeValue {
	for role, item := range m {
		if item == nil {
			delete(m, role)
		}
	}
	return m
}
