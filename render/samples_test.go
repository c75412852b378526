package render_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/render"
)

// The sample documents of the golden files and the screenshot: what the
// stores hold after the engine issued them.

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// sampleSeller is the seller of every sample, with the logo of testdata.
func sampleSeller(t testing.TB) render.Seller {
	t.Helper()
	logo, err := os.ReadFile(filepath.Join("testdata", "logo.png"))
	require.NoError(t, err)
	return render.Seller{
		Name:    "Acme Video Ltd",
		Address: []string{"1 Grand Canal Square", "Dublin D02 X285", "Ireland"},
		TaxID:   "VAT IE1234567T",
		Logo:    logo,
		Footer:  "Questions about this invoice? billing@acme.example · Acme Video Ltd, registered in Ireland no. 612345.",
	}
}

func newRenderer(t testing.TB) *render.Renderer {
	t.Helper()
	r, err := render.New(render.Config{Seller: sampleSeller(t)})
	require.NoError(t, err)
	return r
}

// sampleUSD is a paid invoice of a plan, seats, a proration and annual
// support, with a 20% discount and 23% VAT: amounts in the thousands.
func sampleUSD() billing.Invoice {
	return billing.Invoice{
		ID: "in_YWNjdC0xMDQy.20250314T000005.000000000Z_3f2a9c1b7d4e", UserID: "acct-1042", Key: "sub-1042-2025-03",
		Sequence: "ACME", Prefix: "ACME", Number: "ACME-0042", Seq: 42, Currency: "USD",
		Lines: []billing.InvoiceLine{
			{Description: "Plus plan, monthly", PeriodStart: at("2025-03-14T00:00:00Z"), PeriodEnd: at("2025-04-14T00:00:00Z"),
				Quantity: 1, UnitAmount: 1999, Amount: 1999, Kind: billing.LinePlan},
			{Description: "Extra seats", PeriodStart: at("2025-03-14T00:00:00Z"), PeriodEnd: at("2025-04-14T00:00:00Z"),
				Quantity: 3, UnitAmount: 500, Amount: 1500, Kind: billing.LinePlan},
			{Description: "Upgrade from Basic to Plus for the 12 days left of the previous period", PeriodStart: at("2025-03-02T00:00:00Z"),
				PeriodEnd: at("2025-03-14T00:00:00Z"), Amount: 812, Kind: billing.LineProration},
			{Description: "Annual priority support", PeriodStart: at("2025-03-14T00:00:00Z"), PeriodEnd: at("2026-03-14T00:00:00Z"),
				Quantity: 1, UnitAmount: 120000, Amount: 120000, Kind: billing.LinePlan},
			{Description: "LAUNCH20: 20% off", Amount: 24862, Kind: billing.LineDiscount},
			{Description: "VAT 23% (Ireland)", Amount: 22873, Kind: billing.LineTax},
		},
		Subtotal: 124311, Discounts: 24862, Tax: 22873, Total: 122322, AmountPaid: 122322, AmountDue: 0,
		Status: billing.InvoicePaid, Created: at("2025-03-14T00:00:05Z"), IssuedAt: at("2025-03-14T00:00:06Z"),
		DueAt: at("2025-03-28T00:00:00Z"), PaidAt: at("2025-03-14T00:00:09Z"),
		PeriodIDs: []string{"sub-1042-2025-03"}, TransactionID: "pi_3QxYzA2eZvKYlo2C1h8fG7kP",
		Version: 3, Event: "invoice_paid",
	}
}

// sampleJPY is an open invoice in yen: no minor unit, nothing scaled.
func sampleJPY() billing.Invoice {
	return billing.Invoice{
		ID: "in_a2Fpc2hhLTc.20250401T030000.000000000Z_9c0d1e2f3a4b", UserID: "kaisha-7", Key: "sub-k7-2025-04",
		Prefix: "kaisha-7", Number: "kaisha-7-0003", Seq: 3, Currency: "JPY",
		Lines: []billing.InvoiceLine{
			{Description: "Standard plan, monthly", PeriodStart: at("2025-04-01T00:00:00Z"), PeriodEnd: at("2025-05-01T00:00:00Z"),
				Quantity: 1, UnitAmount: 98000, Amount: 98000, Kind: billing.LinePlan},
			{Description: "Storage add-on, per 100 GB", PeriodStart: at("2025-04-01T00:00:00Z"), PeriodEnd: at("2025-05-01T00:00:00Z"),
				Quantity: 4, UnitAmount: 1250, Amount: 5000, Kind: billing.LinePlan},
			{Description: "Consumption tax 10%", Amount: 10300, Kind: billing.LineTax},
		},
		Subtotal: 103000, Tax: 10300, Total: 113300, AmountDue: 113300,
		Status: billing.InvoiceOpen, Created: at("2025-04-01T03:00:00Z"), IssuedAt: at("2025-04-01T03:00:01Z"),
		DueAt: at("2025-04-15T00:00:00Z"), PeriodIDs: []string{"sub-k7-2025-04"}, Version: 2, Event: "invoice_finalized",
	}
}

// sampleDraft is a draft: no number, no issue date.
func sampleDraft() billing.Invoice {
	return billing.Invoice{
		ID: "in_YWNjdC0xMDQy.20250414T000002.000000000Z_77aa55cc3311", UserID: "acct-1042", Key: "sub-1042-2025-04",
		Sequence: "ACME", Prefix: "ACME", Currency: "USD",
		Lines: []billing.InvoiceLine{
			{Description: "Plus plan, monthly", PeriodStart: at("2025-04-14T00:00:00Z"), PeriodEnd: at("2025-05-14T00:00:00Z"),
				Quantity: 1, UnitAmount: 1999, Amount: 1999, Kind: billing.LinePlan},
			{Description: "VAT 23% (Ireland)", Amount: 460, Kind: billing.LineTax},
		},
		Subtotal: 1999, Tax: 460, Total: 2459, AmountDue: 2459,
		Status: billing.InvoiceDraft, Created: at("2025-04-14T00:00:02Z"), DueAt: at("2025-04-28T00:00:00Z"),
		PeriodIDs: []string{"sub-1042-2025-04"}, Version: 1, Event: "invoice_created",
	}
}

// sampleVoid is an invoice voided after it was numbered: the period was
// waived.
func sampleVoid() billing.Invoice {
	return billing.Invoice{
		ID: "in_dXNlci01NQ.20250301T000001.000000000Z_0b1c2d3e4f50", UserID: "user-55", Key: "sub-55-2025-03",
		Prefix: "user-55", Number: "user-55-0002", Seq: 2, Currency: "EUR",
		Lines: []billing.InvoiceLine{
			{Description: "Basic plan, monthly", PeriodStart: at("2025-03-01T00:00:00Z"), PeriodEnd: at("2025-04-01T00:00:00Z"),
				Quantity: 1, UnitAmount: 999, Amount: 999, Kind: billing.LinePlan},
		},
		Subtotal: 999, Total: 999, AmountDue: 999,
		Status: billing.InvoiceVoid, Created: at("2025-03-01T00:00:01Z"), IssuedAt: at("2025-03-01T00:00:02Z"),
		DueAt: at("2025-03-15T00:00:00Z"), VoidedAt: at("2025-03-03T10:30:00Z"),
		PeriodIDs: []string{"sub-55-2025-03"}, Version: 3, Event: "invoice_voided",
	}
}

// sampleNote is a refund of the USD invoice's annual support, and the
// invoice as the note left it.
func sampleNote() (billing.CreditNote, billing.Invoice) {
	inv := sampleUSD()
	inv.AmountCredited = 73800
	inv.Version, inv.Event = 4, "credit_note_issued"
	note := billing.CreditNote{
		ID: "cn_YWNjdC0xMDQy.20250314T000005.000000000Z_3f2a9c1b7d4e_5e6f7a8b9c0d1e2f", Key: "refund-support-1042",
		InvoiceID: inv.ID, UserID: inv.UserID, Currency: inv.Currency, Sequence: inv.Sequence, Prefix: inv.Prefix,
		Number: "ACME-CN-0007", Seq: 7,
		Lines: []billing.InvoiceLine{
			{Description: "Annual priority support, cancelled within 30 days", PeriodStart: at("2025-03-14T00:00:00Z"),
				PeriodEnd: at("2026-03-14T00:00:00Z"), Quantity: 1, UnitAmount: 60000, Amount: 60000, Kind: billing.LinePlan},
			{Description: "VAT 23% (Ireland)", Amount: 13800, Kind: billing.LineTax},
		},
		Total: 73800, Reason: "Cancelled within the 30-day guarantee", IssuedAt: at("2025-03-20T16:45:00Z"),
	}
	return note, inv
}
