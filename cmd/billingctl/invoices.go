package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
)

var invoicesListCmd = &command{
	name:     "invoices list",
	synopsis: "--user USER [--limit N]",
	doc: `a user's invoices, newest first
One line per invoice: its number (- for a draft), status, total and amount
due, due and paid dates, and ID. On the single table USER is the account (the
part of a subscription's user ID before the first #). --json prints each
invoice with its lines. A user without invoices prints none and exits 0.`,
	run: runInvoicesList,
}

var invoicesShowCmd = &command{
	name:     "invoices show",
	synopsis: "INVOICE_ID | --number N --user USER [--sequence S]",
	doc: `one invoice: its fields, lines, history rows and credit notes
By ID, or by its number in the user's own sequence (or in the shared
sequence S). The history has one row per version, oldest first: the invoice
as each change left it. An unknown invoice exits 1.`,
	run: runInvoicesShow,
}

var invoicesPDFCmd = &command{
	name:     "invoices pdf",
	synopsis: "ID -o FILE --seller NAME [--html] [--address LINE]... [--tax-id ID] [--logo FILE]",
	doc: `write the document a customer downloads: an invoice or credit note as PDF or HTML
ID is an invoice's (in_...) or a credit note's (cn_...); --number N --user
USER [--sequence S] finds an invoice by number instead. The document is
package render's, headed by the seller of the flags; -o - writes it on
stdout. An unknown ID exits 1.`,
	run: runInvoicesPDF,
}

// invoices returns the invoice store of the chosen layout.
func (a *app) invoices() (*dynamostore.Invoices, error) {
	client, err := a.dynamo()
	if err != nil {
		return nil, err
	}
	if a.single() {
		return dynamostore.NewSingleTableInvoices(dynamostore.SingleTableStoreConfig{Client: client, Table: a.singleTable()})
	}
	return dynamostore.NewInvoices(dynamostore.Config{Client: client, Tables: a.tables()})
}

// invoiceNotFoundError is an unknown invoice or credit note.
type invoiceNotFoundError struct{ what string }

func (e *invoiceNotFoundError) Error() string { return "unknown " + e.what }

// notFound turns the store's ErrNotFound into an *invoiceNotFoundError.
func notFound(err error, what string) error {
	if errors.Is(err, billing.ErrNotFound) {
		return &invoiceNotFoundError{what: what}
	}
	return err
}

// invoiceKey is how a command names an invoice: ID, or number and user.
type invoiceKey struct {
	number, user, sequence *string
}

func (k *invoiceKey) register(fs *flag.FlagSet) {
	k.number = fs.String("number", "", "find the invoice by its `number` (with --user) instead of its ID")
	k.user = fs.String("user", "", "the `user` (account) whose sequence --number is in")
	k.sequence = fs.String("sequence", "", "the shared `sequence` --number is in (default: the user's own)")
}

// check checks the arguments pos and the flags name one invoice.
func (k *invoiceKey) check(c *command, pos []string) error {
	switch {
	case *k.number != "" && len(pos) > 0:
		return usagef(c.name, "give an ID or --number, not both")
	case *k.number != "" && *k.user == "":
		return usagef(c.name, "--number needs --user, the account whose invoice it is")
	case *k.number == "" && len(pos) != 1:
		return usagef(c.name, "want one ID argument (or --number N --user USER), got %d", len(pos))
	}
	return nil
}

// find reads the invoice pos (one ID) or the flags name (see check).
func (k *invoiceKey) find(a *app, store billing.Invoices, pos []string) (billing.Invoice, error) {
	if *k.number != "" {
		inv, err := store.ByNumber(a.ctx, *k.user, *k.sequence, *k.number)
		what := fmt.Sprintf("invoice number %s of user %s", *k.number, *k.user)
		if *k.sequence != "" {
			what = fmt.Sprintf("invoice number %s in sequence %s", *k.number, *k.sequence)
		}
		return inv, notFound(err, what)
	}
	inv, err := store.Invoice(a.ctx, pos[0])
	return inv, notFound(err, "invoice ID "+pos[0])
}

func runInvoicesList(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	user := fs.String("user", "", "the `user` (account) whose invoices to list (required)")
	limit := fs.Int("limit", 100, "list at most `N` invoices, the newest")
	if err := a.parseNoArgs(c, fs, args); err != nil {
		return err
	}
	if *user == "" {
		return usagef(c.name, "--user is required")
	}
	if *limit < 1 {
		return usagef(c.name, "--limit %d: want 1 or more", *limit)
	}
	store, err := a.invoices()
	if err != nil {
		return err
	}
	var all []billing.Invoice
	after := ""
	for len(all) < *limit {
		page, next, err := store.ByUser(a.ctx, *user, after, min(*limit-len(all), 100))
		if err != nil {
			return err
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		after = next
	}
	if a.g.json {
		out := make([]invoiceJSON, len(all))
		for i := range all {
			out[i] = toInvoiceJSON(&all[i])
		}
		return writeJSON(a.stdout, out)
	}
	if len(all) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no invoices for user %s\n", *user)
		return err
	}
	tw := newTable(a.stdout)
	fmt.Fprintln(tw, "NUMBER\tSTATUS\tTOTAL\tAMOUNT_DUE\tDUE\tPAID\tID")
	for i := range all {
		inv := &all[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(inv.Number), inv.Status, money(inv, inv.Total),
			money(inv, inv.AmountDue), day(inv.DueAt), day(inv.PaidAt), inv.ID)
	}
	return tw.Flush()
}

func runInvoicesShow(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	var key invoiceKey
	key.register(fs)
	pos, err := a.parse(c, fs, args)
	if err != nil {
		return err
	}
	if err := key.check(c, pos); err != nil {
		return err
	}
	store, err := a.invoices()
	if err != nil {
		return err
	}
	inv, err := key.find(a, store, pos)
	if err != nil {
		return err
	}
	hist, err := store.History(a.ctx, inv.ID)
	if err != nil {
		return err
	}
	notes, err := store.CreditNotes(a.ctx, inv.ID)
	if err != nil {
		return err
	}
	if a.g.json {
		out := struct {
			Invoice     invoiceJSON    `json:"invoice"`
			History     []invoiceJSON  `json:"history"`
			CreditNotes []creditNoteJS `json:"credit_notes"`
		}{Invoice: toInvoiceJSON(&inv), History: make([]invoiceJSON, len(hist)), CreditNotes: make([]creditNoteJS, len(notes))}
		for i := range hist {
			out.History[i] = toInvoiceJSON(&hist[i])
		}
		for i := range notes {
			out.CreditNotes[i] = toCreditNoteJSON(&notes[i])
		}
		return writeJSON(a.stdout, out)
	}
	return writeInvoice(a.stdout, &inv, hist, notes)
}

// writeInvoice prints an invoice's fields, lines, history and notes.
func writeInvoice(w io.Writer, inv *billing.Invoice, hist []billing.Invoice, notes []billing.CreditNote) error {
	tw := newTable(w)
	seq := inv.Sequence
	if seq == "" {
		seq = "(the user's own)"
	}
	tax := money(inv, inv.Tax)
	if inv.TaxInclusive {
		tax += " (included in the total)"
	}
	for _, f := range [][2]string{
		{"id", inv.ID}, {"number", dash(inv.Number)}, {"sequence", seq}, {"user_id", inv.UserID}, {"key", inv.Key},
		{"status", string(inv.Status)}, {"currency", inv.Currency},
		{"subtotal", money(inv, inv.Subtotal)}, {"discounts", money(inv, inv.Discounts)}, {"tax", tax},
		{"total", money(inv, inv.Total)}, {"amount_paid", money(inv, inv.AmountPaid)}, {"amount_due", money(inv, inv.AmountDue)},
		{"amount_credited", money(inv, inv.AmountCredited)},
		{"created", dash(fmtTime(inv.Created))}, {"issued_at", dash(fmtTime(inv.IssuedAt))}, {"due_at", dash(fmtTime(inv.DueAt))},
		{"paid_at", dash(fmtTime(inv.PaidAt))}, {"voided_at", dash(fmtTime(inv.VoidedAt))},
		{"uncollectible_at", dash(fmtTime(inv.UncollectibleAt))},
		{"periods", dash(strings.Join(inv.PeriodIDs, ", "))}, {"transaction_id", dash(inv.TransactionID)},
		{"version", strconv.FormatInt(inv.Version, 10)},
	} {
		fmt.Fprintf(tw, "  %s\t%s\n", f[0], f[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nLines:")
	tw = newTable(w)
	fmt.Fprintln(tw, "KIND\tDESCRIPTION\tPERIOD\tQUANTITY\tUNIT_AMOUNT\tAMOUNT")
	for _, l := range inv.Lines {
		period := "-"
		if !l.PeriodStart.IsZero() || !l.PeriodEnd.IsZero() {
			period = day(l.PeriodStart) + ".." + day(l.PeriodEnd)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", l.Kind, l.Description, period, l.Quantity, inv.FormatAmount(l.UnitAmount),
			inv.FormatAmount(l.Amount))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nHistory:")
	tw = newTable(w)
	fmt.Fprintln(tw, "VERSION\tEVENT\tAT\tSTATUS\tNUMBER\tAMOUNT_PAID\tAMOUNT_DUE\tAMOUNT_CREDITED\tTRANSACTION")
	for i := range hist {
		h := &hist[i]
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Version, h.Event, dash(fmtTime(eventTime(h))), h.Status,
			dash(h.Number), inv.FormatAmount(h.AmountPaid), inv.FormatAmount(h.AmountDue), inv.FormatAmount(h.AmountCredited),
			dash(h.TransactionID))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notes) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nCredit notes:")
	tw = newTable(w)
	fmt.Fprintln(tw, "NUMBER\tTOTAL\tISSUED_AT\tREASON\tID")
	for i := range notes {
		n := &notes[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Number, money(inv, n.Total), fmtTime(n.IssuedAt), dash(n.Reason), n.ID)
	}
	return tw.Flush()
}

// eventTime is when the change of a history row happened, where the
// invoice says (a credit note's row keeps no time of its own).
func eventTime(h *billing.Invoice) time.Time {
	switch h.Event {
	case "invoice_created":
		return h.Created
	case "invoice_finalized":
		return h.IssuedAt
	case "invoice_paid":
		return h.PaidAt
	case "invoice_voided":
		return h.VoidedAt
	case "invoice_uncollectible":
		return h.UncollectibleAt
	}
	return time.Time{}
}

// jsonTime writes t for --json: RFC 3339 with its nanoseconds, "" for
// none.
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// money writes v minor units of inv's currency: "9.99 USD".
func money(inv *billing.Invoice, v int64) string {
	return inv.FormatAmount(v) + " " + inv.Currency
}

// day writes t's date in UTC, "-" for none.
func day(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.DateOnly)
}

// invoiceJSON is an invoice as --json prints it: amounts in minor units
// of currency, as stored.
type invoiceJSON struct {
	ID              string     `json:"id"`
	Number          string     `json:"number,omitempty"`
	Seq             int64      `json:"seq,omitempty"`
	Sequence        string     `json:"sequence,omitempty"`
	Prefix          string     `json:"prefix"`
	UserID          string     `json:"user_id"`
	Key             string     `json:"key"`
	Status          string     `json:"status"`
	Currency        string     `json:"currency"`
	Lines           []lineJSON `json:"lines"`
	Subtotal        int64      `json:"subtotal"`
	Discounts       int64      `json:"discounts"`
	Tax             int64      `json:"tax"`
	TaxInclusive    bool       `json:"tax_inclusive,omitempty"`
	Total           int64      `json:"total"`
	AmountPaid      int64      `json:"amount_paid"`
	AmountDue       int64      `json:"amount_due"`
	AmountCredited  int64      `json:"amount_credited"`
	Created         string     `json:"created"`
	IssuedAt        string     `json:"issued_at,omitempty"`
	DueAt           string     `json:"due_at,omitempty"`
	PaidAt          string     `json:"paid_at,omitempty"`
	VoidedAt        string     `json:"voided_at,omitempty"`
	UncollectibleAt string     `json:"uncollectible_at,omitempty"`
	PeriodIDs       []string   `json:"period_ids"`
	TransactionID   string     `json:"transaction_id,omitempty"`
	Version         int64      `json:"version"`
	Event           string     `json:"event"`
}

type lineJSON struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
	PeriodStart string `json:"period_start,omitempty"`
	PeriodEnd   string `json:"period_end,omitempty"`
	Quantity    int64  `json:"quantity"`
	UnitAmount  int64  `json:"unit_amount"`
	Amount      int64  `json:"amount"`
}

type creditNoteJS struct {
	ID        string     `json:"id"`
	Number    string     `json:"number"`
	InvoiceID string     `json:"invoice_id"`
	Key       string     `json:"key"`
	Currency  string     `json:"currency"`
	Total     int64      `json:"total"`
	Reason    string     `json:"reason,omitempty"`
	IssuedAt  string     `json:"issued_at"`
	Lines     []lineJSON `json:"lines"`
}

func toLinesJSON(ls []billing.InvoiceLine) []lineJSON {
	out := make([]lineJSON, len(ls))
	for i, l := range ls {
		out[i] = lineJSON{Kind: string(l.Kind), Description: l.Description, PeriodStart: jsonTime(l.PeriodStart),
			PeriodEnd: jsonTime(l.PeriodEnd), Quantity: l.Quantity, UnitAmount: l.UnitAmount, Amount: l.Amount}
	}
	return out
}

func toInvoiceJSON(inv *billing.Invoice) invoiceJSON {
	periods := inv.PeriodIDs
	if periods == nil {
		periods = []string{}
	}
	return invoiceJSON{ID: inv.ID, Number: inv.Number, Seq: inv.Seq, Sequence: inv.Sequence, Prefix: inv.Prefix, UserID: inv.UserID,
		Key: inv.Key, Status: string(inv.Status), Currency: inv.Currency, Lines: toLinesJSON(inv.Lines), Subtotal: inv.Subtotal,
		Discounts: inv.Discounts, Tax: inv.Tax, TaxInclusive: inv.TaxInclusive, Total: inv.Total, AmountPaid: inv.AmountPaid, AmountDue: inv.AmountDue,
		AmountCredited: inv.AmountCredited, Created: jsonTime(inv.Created), IssuedAt: jsonTime(inv.IssuedAt), DueAt: jsonTime(inv.DueAt),
		PaidAt: jsonTime(inv.PaidAt), VoidedAt: jsonTime(inv.VoidedAt), UncollectibleAt: jsonTime(inv.UncollectibleAt),
		PeriodIDs: periods, TransactionID: inv.TransactionID, Version: inv.Version, Event: inv.Event}
}

func toCreditNoteJSON(n *billing.CreditNote) creditNoteJS {
	return creditNoteJS{ID: n.ID, Number: n.Number, InvoiceID: n.InvoiceID, Key: n.Key, Currency: n.Currency, Total: n.Total,
		Reason: n.Reason, IssuedAt: jsonTime(n.IssuedAt), Lines: toLinesJSON(n.Lines)}
}

// outputFile opens path for a document: stdout for "-".
func (a *app) outputFile(path string) (io.Writer, func() error, error) {
	if path == "-" {
		return a.stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}
