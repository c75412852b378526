package render

import (
	"strconv"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

// view is a document as both formats lay it out: every value a string
// already written (amounts in the locale, dates in the time zone).
type view struct {
	// Kind is "Invoice" or "Credit note"; Number its number, or "DRAFT".
	Kind, Number string
	Draft        bool
	// Status is the status line ("PAID 2025-03-14"), "" on a credit note.
	Status string
	// Seller is the heading; Customer the account billed (or credited),
	// under the heading Party.
	Seller          Seller
	Party, Customer string
	// Facts are the label-value pairs beside the heading: dates, the
	// invoice a note credits.
	Facts []pair
	Lines []line
	// Totals end the table.
	Totals []total
	// Notes are the references below: periods, transaction, ID, currency.
	Notes []pair
	// Created is the document's date: when it was issued, or made.
	Created time.Time
}

type pair struct{ Label, Value string }

// total is a row below the lines; Strong ones are in bold.
type total struct {
	Label, Value string
	Strong       bool
}

// line is one row of the table.
type line struct {
	Description, Period, Quantity, UnitAmount, Amount string
}

// noDate is what a date not set shows.
const noDate = "—"

func (r *Renderer) date(t time.Time) string {
	if t.IsZero() {
		return noDate
	}
	return t.In(r.cfg.Location).Format("2006-01-02")
}

// invoiceView lays out inv; cp1252 writes amounts for the PDF's
// built-in font.
func (r *Renderer) invoiceView(inv *billing.Invoice, cp1252 bool) view {
	m := r.money(inv.Currency, cp1252)
	v := view{Kind: "Invoice", Number: inv.Number, Seller: r.cfg.Seller, Party: "Billed to", Customer: inv.UserID,
		Created: inv.IssuedAt}
	if inv.Status == billing.InvoiceDraft || inv.Number == "" {
		v.Number, v.Draft = "DRAFT", true
	}
	if v.Created.IsZero() {
		v.Created = inv.Created
	}
	v.Status = strings.ToUpper(string(inv.Status))
	switch inv.Status {
	case billing.InvoicePaid:
		v.Status += " " + r.date(inv.PaidAt)
	case billing.InvoiceVoid:
		v.Status += " " + r.date(inv.VoidedAt)
	case billing.InvoiceUncollectible:
		v.Status += " " + r.date(inv.UncollectibleAt)
	}
	v.Facts = []pair{{"Issue date", r.date(inv.IssuedAt)}, {"Due date", r.date(inv.DueAt)}, {"Status", v.Status}}
	v.Lines = r.lines(inv.Lines, m, true)
	taxLabel := "Tax"
	if inv.TaxInclusive {
		taxLabel = "Total includes tax" // part of the total, not added to it
	}
	v.Totals = []total{
		{"Subtotal", m.format(inv.Subtotal, false), false},
		{"Discounts", m.format(inv.Discounts, true), false},
		{taxLabel, m.format(inv.Tax, false), false},
		{"Total", m.format(inv.Total, false), true},
		{"Amount paid", m.format(inv.AmountPaid, false), false},
	}
	if inv.AmountCredited > 0 {
		v.Totals = append(v.Totals, total{"Credited", m.format(inv.AmountCredited, true), false})
	}
	v.Totals = append(v.Totals, total{"Amount due", m.format(inv.AmountDue, false), true})
	v.Notes = []pair{{"Currency", inv.Currency}}
	if len(inv.PeriodIDs) > 0 {
		v.Notes = append(v.Notes, pair{"Periods billed", strings.Join(inv.PeriodIDs, ", ")})
	}
	if inv.TransactionID != "" {
		v.Notes = append(v.Notes, pair{"Transaction", inv.TransactionID})
	}
	v.Notes = append(v.Notes, pair{"Reference", inv.ID})
	return v
}

// noteView lays out note, against inv.
func (r *Renderer) noteView(note *billing.CreditNote, inv *billing.Invoice, cp1252 bool) view {
	m := r.money(note.Currency, cp1252)
	v := view{Kind: "Credit note", Number: note.Number, Seller: r.cfg.Seller, Party: "Credited to", Customer: note.UserID,
		Created: note.IssuedAt}
	if v.Number == "" {
		v.Number, v.Draft = "DRAFT", true
	}
	invNumber := inv.Number
	if invNumber == "" {
		invNumber = "DRAFT"
	}
	v.Facts = []pair{{"Issue date", r.date(note.IssuedAt)}, {"Credits invoice", invNumber},
		{"Invoice total", m.format(inv.Total, false)}}
	if note.Reason != "" {
		v.Facts = append(v.Facts, pair{"Reason", note.Reason})
	}
	v.Lines = r.lines(note.Lines, m, false)
	v.Totals = []total{{"Total credited", m.format(note.Total, false), true}}
	v.Notes = []pair{{"Currency", note.Currency}}
	if inv.TransactionID != "" {
		v.Notes = append(v.Notes, pair{"Transaction", inv.TransactionID})
	}
	v.Notes = append(v.Notes, pair{"Reference", note.ID}, pair{"Invoice reference", inv.ID})
	return v
}

// lines writes the rows. On an invoice (signed) a discount or a credit
// is shown taken off; a credit note's lines are all what it credits.
func (r *Renderer) lines(ls []billing.InvoiceLine, m *money, signed bool) []line {
	out := make([]line, len(ls))
	for i, l := range ls {
		off := signed && (l.Kind == billing.LineDiscount || l.Kind == billing.LineCredit || l.Kind == billing.LineUnusedTime)
		row := line{Description: l.Description, Amount: m.format(l.Amount, off)}
		if !l.PeriodStart.IsZero() || !l.PeriodEnd.IsZero() {
			row.Period = r.date(l.PeriodStart) + " – " + r.date(l.PeriodEnd)
		}
		if l.Quantity > 0 {
			row.Quantity = strconv.FormatInt(l.Quantity, 10)
		}
		if l.UnitAmount > 0 {
			row.UnitAmount = m.format(l.UnitAmount, false)
		}
		out[i] = row
	}
	return out
}
