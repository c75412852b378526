package dynamostore_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/storetest"
)

func TestCouponsConformance(t *testing.T) {
	for name, legacy := range map[string]bool{"Legacy": true, "SingleTable": false} {
		t.Run(name, func(t *testing.T) {
			billingtest.RunCouponConformance(t, func(t *testing.T) billing.Coupons {
				client, newStore := storetest.CouponTables(t, legacy)
				s, _ := newStore(t, client)
				return s
			})
		})
	}
}
