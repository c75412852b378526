package memory_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

func TestInvoicesConformance(t *testing.T) {
	billingtest.RunInvoiceConformance(t, func(t *testing.T) billing.Invoices { return memory.NewInvoices(nil) })
}
