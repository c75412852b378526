package memory_test

import (
	"errors"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

func TestInvoicesConformance(t *testing.T) {
	billingtest.RunInvoiceConformance(t, func(t *testing.T) billing.Invoices { return memory.NewInvoices(nil) })
}

func TestInvoicesCrashSweep(t *testing.T) {
	billingtest.RunInvoiceCrashSweep(t, func(t *testing.T) (billing.Invoices, billingtest.ArmCrash) {
		s := memory.NewInvoices(nil)
		return s, func(k int, mode billingtest.CrashMode) func() bool {
			writes, struck := 0, false
			after := mode == billingtest.CrashAfter || mode == billingtest.PanicAfter
			s.SetFault(func(op string, applied bool) error {
				if !applied {
					writes++
				}
				if writes != k || applied != after || struck {
					return nil
				}
				struck = true
				if mode == billingtest.PanicBefore || mode == billingtest.PanicAfter {
					panic("crash at " + op)
				}
				return errors.New("injected: " + op)
			})
			return func() bool { return struck }
		}
	})
}
