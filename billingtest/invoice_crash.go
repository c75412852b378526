package billingtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

// CrashMode says how an armed fault strikes a store's write.
type CrashMode int

const (
	// CrashBefore fails the write: it is not made, the call returns an error.
	CrashBefore CrashMode = iota
	// CrashAfter makes the write and loses its answer: the call returns an
	// error (a timeout after the server committed).
	CrashAfter
	// PanicBefore and PanicAfter stop the process (a panic) before the
	// write is made, or after.
	PanicBefore
	PanicAfter
)

func (m CrashMode) String() string {
	return [...]string{"CrashBefore", "CrashAfter", "PanicBefore", "PanicAfter"}[m]
}

// ArmCrash makes the k-th write of the store from now on (counted from 1)
// fail in mode, and returns a function that reports whether it has struck.
type ArmCrash func(k int, mode CrashMode) (struck func() bool)

// RunInvoiceCrashSweep checks that no crash issues an invoice twice or
// skips a number. For every mode and every k it runs an issuance on the
// store newStore returns (accounts and sequences of their own per run, so
// the stores may share tables) — four invoices of two accounts, two in the first account's
// own sequence and two in a host-wide one, each drafted, finalized and
// paid, the first refunded in part — with the k-th write armed to crash;
// the run stops at the crash, as a process would, and then runs again
// from the top without faults. After the rerun each key has one invoice,
// each sequence is numbered 1..2 without gap or duplicate, every invoice
// is paid by its own transaction, its history rows are versions 1..V with
// the events in order, and the refund is one credit note. k runs until a
// run's fault does not strike (every write of the run has been crashed).
//
// modes picks the modes swept; none means all four.
func RunInvoiceCrashSweep(t *testing.T, newStore func(t *testing.T) (billing.Invoices, ArmCrash), modes ...CrashMode) {
	if len(modes) == 0 {
		modes = []CrashMode{CrashBefore, CrashAfter, PanicBefore, PanicAfter}
	}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			for k := 1; ; k++ {
				require.Less(t, k, 100, "the issuance writes more than expected")
				s, arm := newStore(t)
				struck := arm(k, mode)
				ns := fmt.Sprintf("%s-%d-", mode, k) // the runs may share tables
				err := crashIssue(t.Context(), s, ns)
				if !struck() {
					require.NoError(t, err, "k=%d: a run without a fault", k)
					t.Logf("%s: swept k = 1..%d", mode, k-1)
					return
				}
				require.Error(t, err, "k=%d: the fault struck, the run must not report success", k)
				require.NoError(t, crashIssue(t.Context(), s, ns), "k=%d: the rerun", k)
				checkCrashIssue(t, s, ns, k)
			}
		})
	}
}

// crashIssue is the issuance of RunInvoiceCrashSweep; a panic is returned
// as an error.
func crashIssue(ctx context.Context, s billing.Invoices, ns string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	at := invoiceT0.Add(time.Hour)
	for i := range 4 {
		inv := NewTestInvoice(ns+[]string{"u1", "u2"}[i/3], fmt.Sprintf("p%d", i), i)
		inv.Created = time.Time{} // the store's now: a rerun makes another ID, its key finds the first
		if i%2 == 1 {
			inv.Sequence = ns + "HOST"
		}
		d, err := s.CreateDraft(ctx, inv)
		if err != nil {
			return err
		}
		if _, err := s.Finalize(ctx, d.ID, at); err != nil {
			return err
		}
		if _, err := s.MarkPaid(ctx, d.ID, fmt.Sprintf("tx%d", i), at); err != nil {
			return err
		}
		if i == 0 {
			if _, err := s.IssueCreditNote(ctx, &billing.CreditNote{Key: "refund0", InvoiceID: d.ID, Total: 100,
				Lines: []billing.InvoiceLine{{Description: "Refund", Amount: 100, Kind: billing.LineCredit}}}); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkCrashIssue(t *testing.T, s billing.Invoices, ns string, k int) {
	t.Helper()
	ctx := t.Context()
	RequireGaplessInvoices(t, s, []string{ns + "u1"}, "", 2)
	RequireGaplessInvoices(t, s, []string{ns + "u1", ns + "u2"}, ns+"HOST", 2)
	n := 0
	for _, u := range []string{ns + "u1", ns + "u2"} {
		page, _, err := s.ByUser(ctx, u, "", 100)
		require.NoError(t, err)
		for _, inv := range page {
			n++
			assert.Equal(t, billing.InvoicePaid, inv.Status, "k=%d %s", k, inv.Key)
			assert.Equal(t, "tx"+inv.Key[1:], inv.TransactionID, "k=%d", k)
			rows, err := s.History(ctx, inv.ID)
			require.NoError(t, err)
			want := []string{"invoice_created", "invoice_finalized", "invoice_paid"}
			if inv.Key == "p0" {
				want = append(want, "credit_note_issued")
				assert.Equal(t, int64(100), inv.AmountCredited, "k=%d", k)
				notes, err := s.CreditNotes(ctx, inv.ID)
				require.NoError(t, err)
				require.Len(t, notes, 1, "k=%d: one credit note per refund", k)
				assert.Equal(t, ns+"u1-CN-0001", notes[0].Number)
			}
			var got []string
			for i, r := range rows {
				got = append(got, r.Event)
				assert.Equal(t, int64(i+1), r.Version, "k=%d %s", k, inv.Key)
			}
			assert.Equal(t, want, got, "k=%d %s: one history row per change", k, inv.Key)
		}
	}
	assert.Equal(t, 4, n, "k=%d: one invoice per key", k)
}
