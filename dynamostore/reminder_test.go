package dynamostore_test

import (
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/stretchr/testify/require"
)

// rawItem reads an item as stored, with a consistent read; nil when there
// is none.
func rawItem(t testing.TB, client *dynamodb.Client, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	if len(out.Item) == 0 {
		return nil
	}
	return out.Item
}

// TestDynamoReminderWorkers: two workers racing on one reminder send it
// once, a rerun the same day sends nothing, a failed send is released and
// its retry sends once, on the legacy tables; each claim changes only its
// own attributes of the record.
func TestDynamoReminderWorkers(t *testing.T) {
	billingtest.TestReminderWorkers(t, func(t *testing.T, _ billing.Clock) billingtest.ReminderStore {
		client := dynamotest.Client(t)
		tables := dynamostore.TableConfig{
			Subscriptions: dynamotest.TableName(t, "billing-activity"),
			History:       dynamotest.TableName(t, "billing-activity-history"),
		}
		dynamotest.CreateTable(t, client, dynamostore.SubscriptionsTableDefinition(tables))
		dynamotest.CreateTable(t, client, dynamostore.HistoryTableDefinition(tables))
		w := dynamotest.Wrap(client)
		t.Cleanup(func() { w.AssertNoViolations(t) })
		repo, _ := storetest.NewDynamoStores(t, dynamostore.Config{Client: w, Tables: tables})
		return billingtest.ReminderStore{
			Repository: repo,
			Items: func(t testing.TB, rec *billing.Period) map[string]map[string]av.AttributeValue {
				key := map[string]av.AttributeValue{
					layout.AttrUserID: layout.StringAV(rec.UserID), layout.AttrBillingDate: layout.StringAV(layout.BillingDateKey(rec)),
				}
				return presentItems(map[string]map[string]av.AttributeValue{
					billingtest.ReminderRecordItem: sdkav.FromSDK(rawItem(t, client, tables.Subscriptions, sdkav.ToSDK(key))),
				})
			},
		}
	}, billingtest.SuiteOptions{})
}

// TestSingleTableReminderWorkers is TestDynamoReminderWorkers on the
// single table, where a claim also sets the subscription item's
// LastReminderDate (with its Version and UpdatedAt) and nothing else.
func TestSingleTableReminderWorkers(t *testing.T) {
	billingtest.TestReminderWorkers(t, func(t *testing.T, clock billing.Clock) billingtest.ReminderStore {
		client := dynamotest.Client(t)
		table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL"}
		dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(table))
		w := dynamotest.Wrap(client)
		t.Cleanup(func() { w.AssertNoViolations(t) })
		repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: w, Table: table, Clock: clock})
		require.NoError(t, err)
		return billingtest.ReminderStore{
			Repository: repo,
			Items: func(t testing.TB, rec *billing.Period) map[string]map[string]av.AttributeValue {
				ref, err := layout.ParseSubscriptionRef(rec.UserID)
				require.NoError(t, err)
				pk := layout.StringAV(layout.SingleTableConfig(table).AccountPK(ref.AccountID))
				return presentItems(map[string]map[string]av.AttributeValue{
					billingtest.ReminderRecordItem: sdkav.FromSDK(rawItem(t, client, table.Table, sdkav.ToSDK(map[string]av.AttributeValue{
						layout.AttrPK: pk, layout.AttrSK: layout.StringAV(layout.PeriodSK(ref, layout.BillingDateKey(rec))),
					}))),
					billingtest.ReminderSubscriptionItem: sdkav.FromSDK(rawItem(t, client, table.Table, sdkav.ToSDK(map[string]av.AttributeValue{
						layout.AttrPK: pk, layout.AttrSK: layout.StringAV(ref.SK()),
					}))),
				})
			},
		}
	}, singleTableSuite)
}

// presentItems leaves out the roles without an item.
func presentItems(m map[string]map[string]av.AttributeValue) map[string]map[string]av.AttributeValue {
	for role, item := range m {
		if item == nil {
			delete(m, role)
		}
	}
	return m
}
