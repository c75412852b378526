// Package render writes the documents a customer downloads: an invoice
// ([billing.Invoice]) or a credit note ([billing.CreditNote]) as an HTML
// page or a PDF file, headed by the seller (name, address, tax ID, logo).
//
// It is a package of its own so that a host that does not render never
// links the PDF writer (github.com/go-pdf/fpdf) or the locale data
// (github.com/bojanz/currency): the root package and the stores do not
// import it.
//
// # Use
//
// Make one [Renderer] when the host starts, from its [Config]; a bad logo
// or font is an error then. Each call writes one document:
//
//	r, err := render.New(render.Config{Seller: render.Seller{
//		Name:    "Acme Video Ltd",
//		Address: []string{"1 Main Street", "Dublin D02 X285", "Ireland"},
//		TaxID:   "VAT IE1234567T",
//		Logo:    logoPNG,
//	}})
//	...
//	inv, err := invoices.Invoice(ctx, id) // a billing.Invoices store
//	...
//	w.Header().Set("Content-Type", "application/pdf")
//	err = r.PDF(w, inv)
//
// # What a document shows
//
// The seller; "Invoice" and its number (a draft says DRAFT and has none);
// the account billed; the issue and due dates; the status (PAID and the
// date it was paid, VOID and the date, OPEN, UNCOLLECTIBLE); a row per
// line with its description, the period it covers, the quantity, the unit
// amount and the amount (a discount or a credit shown taken off); the
// subtotal, discounts, tax, total, amount paid and amount due; and, below,
// the currency, the periods billed, the processor's transaction and the
// invoice's ID. A credit note shows its own number, the number and total
// of the invoice it credits, its reason, its lines and what it credits.
//
// Amounts are written in the Config's locale with the currency's symbol
// and grouping ($1,234.50; 1.234,50 €), with the currency's ISO 4217
// digits: 500 JPY is ¥500, never ¥5.00. Labels are English. The same
// document and Config give the same bytes: a PDF is dated by the invoice
// (issued, else created), never by the time it is written.
package render
