package memory_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

func TestCouponsConformance(t *testing.T) {
	billingtest.RunCouponConformance(t, func(t *testing.T) billing.Coupons { return memory.NewCoupons() })
}
