package storetest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
)

// CouponTables makes a fresh invoices table of the legacy layout (legacy
// true), where the legacy coupon store keeps its items, or a fresh single
// table on the local server, and returns a constructor of coupon stores
// on it: each call wraps client in a limit-checking counter of its own,
// as a separate process would hold its own store.
func CouponTables(t *testing.T, legacy bool) (client *dynamodb.Client, newStore func(t *testing.T, c dynamostore.API) (*dynamostore.Coupons, *dynamotest.Wrapper)) {
	t.Helper()
	client = dynamotest.Client(t)
	var tables dynamostore.TableConfig
	var single dynamostore.SingleTableConfig
	if legacy {
		tables = dynamostore.TableConfig{Invoices: dynamotest.TableName(t, "billing-invoices")}
		dynamotest.CreateTable(t, client, dynamostore.InvoicesTableDefinition(tables))
	} else {
		single = dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL"}
		dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(single))
	}
	return client, func(t *testing.T, c dynamostore.API) (*dynamostore.Coupons, *dynamotest.Wrapper) {
		t.Helper()
		w := dynamotest.Wrap(c)
		t.Cleanup(func() { w.AssertNoViolations(t) })
		var s *dynamostore.Coupons
		var err error
		if legacy {
			s, err = dynamostore.NewCoupons(dynamostore.Config{Client: w, Tables: tables})
		} else {
			s, err = dynamostore.NewSingleTableCoupons(dynamostore.SingleTableStoreConfig{Client: w, Table: single})
		}
		if err != nil {
			t.Fatal(err)
		}
		return s, w
	}
}
