package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
)

// TestInvoicesBothLayouts: on each layout, tables create makes the
// invoices' home, seed gives the paid and the declined period their
// invoices, and invoices list, show and pdf read them back; a refund's
// credit note, a voided invoice and a draft are written through the
// library to show the rest.
func TestInvoicesBothLayouts(t *testing.T) {
	for _, c := range []struct{ layout, account string }{
		{"legacy", "seed-user-04"},
		{"single", "seed-acct-04"},
	} {
		t.Run(c.layout, func(t *testing.T) {
			t.Parallel()
			endpoint, client := dynamotest.Endpoint(t), dynamotest.Client(t)
			prefix := dynamotest.TableName(t, "inv")
			tables := []string{prefix + "-activity", prefix + "-activity-history", prefix + "-locks", prefix + "-invoices"}
			if c.layout == "single" {
				tables = []string{prefix, prefix + "-locks"}
			}
			dropTables(t, client, tables...)
			cli := cliWith(t, "--endpoint", endpoint, "--layout", c.layout, "--tables", prefix)
			r := cli("tables", "create")
			r.want(t, exitOK, append(tables, "created")...)
			if c.layout == "legacy" {
				r.want(t, exitOK, "invoices "+prefix+"-invoices created")
			}
			declined, _, _ := strings.Cut(strings.Replace(c.account, "04", "02", 1), "#")
			r = cli("seed", "--users", "6", "--now", "2025-03-14")
			r.want(t, exitOK, "seed-04-paid 2025-02-14T00:00:00Z COMPLETED "+c.account+"-0001 created",
				"seed-04-next 2025-03-19T00:00:00Z SCHEDULED - created",
				"seed-02-declined 2025-03-13T00:00:00Z ERROR "+declined+"-0001 created")
			cli("seed", "--users", "6", "--now", "2025-03-14").want(t, exitOK, "seed-04-paid 2025-02-14T00:00:00Z COMPLETED "+c.account+"-0001 exists")

			// What the engine writes later: the paid invoice refunded in
			// part, a second period's invoice voided, a third's draft.
			var store *dynamostore.Invoices
			var err error
			if c.layout == "single" {
				store, err = dynamostore.NewSingleTableInvoices(dynamostore.SingleTableStoreConfig{Client: client,
					Table: dynamostore.SingleTableConfig{Table: prefix}})
			} else {
				store, err = dynamostore.NewInvoices(dynamostore.Config{Client: client,
					Tables: dynamostore.TableConfig{Invoices: prefix + "-invoices"}})
			}
			require.NoError(t, err)
			ctx := t.Context()
			page, _, err := store.ByUser(ctx, c.account, "", 10)
			require.NoError(t, err)
			require.Len(t, page, 1, "seed's invoice of %s", c.account)
			paid := page[0]
			note, err := store.IssueCreditNote(ctx, &billing.CreditNote{Key: "refund-1", InvoiceID: paid.ID, Reason: "goodwill",
				Lines: []billing.InvoiceLine{{Description: "Partial refund", Amount: 300, Kind: billing.LinePlan}}, Total: 300})
			require.NoError(t, err)
			day := time.Date(2025, 3, 19, 1, 0, 0, 0, time.UTC)
			line := []billing.InvoiceLine{{Description: "Plus:v2, monthly", Quantity: 1, UnitAmount: 999, Amount: 999, Kind: billing.LinePlan}}
			void, err := store.CreateDraft(ctx, &billing.Invoice{UserID: c.account, Key: "seed-04-next", Currency: "USD", Lines: line,
				Subtotal: 999, Total: 999, AmountDue: 999, Created: day, DueAt: day.AddDate(0, 0, 14)})
			require.NoError(t, err)
			_, err = store.Finalize(ctx, void.ID, day.Add(time.Second))
			require.NoError(t, err)
			_, err = store.Void(ctx, void.ID, day.Add(time.Hour))
			require.NoError(t, err)
			_, err = store.CreateDraft(ctx, &billing.Invoice{UserID: c.account, Key: "seed-04-later", Currency: "USD", Lines: line,
				Subtotal: 999, Total: 999, AmountDue: 999, Created: day.AddDate(0, 1, 0)})
			require.NoError(t, err)

			n1, n2 := c.account+"-0001", c.account+"-0002"
			r = cli("invoices", "list", "--user", c.account)
			r.want(t, exitOK, "NUMBER STATUS TOTAL AMOUNT_DUE DUE PAID ID",
				"- draft 9.99 USD 9.99 USD - - in_",
				n2+" void 9.99 USD 9.99 USD 2025-04-02 - "+void.ID,
				n1+" paid 9.99 USD 0.00 USD 2025-02-14 2025-02-14 "+paid.ID)
			assert.Less(t, strings.Index(r.stdout, n2), strings.Index(r.stdout, n1), "newest first:\n%s", r)
			cli("invoices", "list", "--user", c.account, "--limit", "1").want(t, exitOK, "- draft")
			assert.NotContains(t, cli("invoices", "list", "--user", c.account, "--limit", "1").stdout, n1, "--limit 1")
			cli("invoices", "list", "--user", "nobody").want(t, exitOK, "no invoices for user nobody")

			var listed []invoiceJSON
			r = cli("invoices", "list", "--user", c.account, "--json")
			r.want(t, exitOK)
			r.decode(t, &listed)
			require.Len(t, listed, 3, "%s", r)
			assert.Equal(t, invoiceJSON{ID: paid.ID, Number: n1, Seq: 1, Prefix: c.account, UserID: c.account, Key: "seed-04-paid",
				Status: "paid", Currency: "USD", Lines: []lineJSON{{Kind: "plan", Description: "Plus:v2, monthly",
					PeriodStart: "2025-02-14T00:00:00Z", PeriodEnd: "2025-03-14T00:00:00Z", Quantity: 1, UnitAmount: 999, Amount: 999}},
				Subtotal: 999, Total: 999, AmountPaid: 999, AmountCredited: 300, Created: "2025-02-14T00:59:58Z",
				IssuedAt: "2025-02-14T00:59:59Z", DueAt: "2025-02-14T00:00:00Z", PaidAt: "2025-02-14T01:00:00Z",
				PeriodIDs: []string{"seed-04-paid"}, TransactionID: "txn-seed-04", Version: 4, Event: "credit_note_issued"}, listed[2])

			r = cli("invoices", "show", paid.ID)
			r.want(t, exitOK, "id "+paid.ID, "number "+n1, "sequence (the user's own)", "status paid", "total 9.99 USD",
				"amount_credited 3.00 USD", "paid_at 2025-02-14T01:00:00Z", "transaction_id txn-seed-04",
				"Lines:", "plan Plus:v2, monthly 2025-02-14..2025-03-14 1 9.99 9.99",
				"History:",
				"1 invoice_created 2025-02-14T00:59:58Z draft - 0.00 9.99 0.00 -",
				"2 invoice_finalized 2025-02-14T00:59:59Z open "+n1+" 0.00 9.99 0.00 -",
				"3 invoice_paid 2025-02-14T01:00:00Z paid "+n1+" 9.99 0.00 0.00 txn-seed-04",
				"4 credit_note_issued - paid "+n1+" 9.99 0.00 3.00 txn-seed-04",
				"Credit notes:", c.account+"-CN-0001 3.00 USD", "goodwill "+note.ID)
			assert.Equal(t, r.stdout, cli("invoices", "show", "--number", n1, "--user", c.account).stdout, "by number")
			var shown struct {
				Invoice     invoiceJSON    `json:"invoice"`
				History     []invoiceJSON  `json:"history"`
				CreditNotes []creditNoteJS `json:"credit_notes"`
			}
			r = cli("invoices", "show", void.ID, "--json")
			r.want(t, exitOK)
			r.decode(t, &shown)
			assert.Equal(t, "void", shown.Invoice.Status)
			assert.Equal(t, "2025-03-19T02:00:00Z", shown.Invoice.VoidedAt)
			assert.Len(t, shown.History, 3)
			assert.Empty(t, shown.CreditNotes)

			cli("invoices", "show", wellFormedInvoiceID).want(t, exitFail, "billingctl: unknown invoice ID "+wellFormedInvoiceID)
			cli("invoices", "show", "nope").want(t, exitFail, "billingctl: unknown invoice ID nope")
			cli("invoices", "show", "--number", c.account+"-0009", "--user", c.account).want(t, exitFail,
				"unknown invoice number "+c.account+"-0009 of user "+c.account)

			// The documents: a PDF file, an HTML page on stdout, a credit note.
			dir := t.TempDir()
			pdf := filepath.Join(dir, "invoice.pdf")
			seller := []string{"--seller", "Acme Video Ltd", "--address", "1 Main Street", "--address", "Dublin", "--tax-id", "IE1234567T"}
			r = cli(append([]string{"invoices", "pdf", paid.ID, "-o", pdf}, seller...)...)
			require.Equal(t, exitOK, r.code, "%s", r)
			assert.Contains(t, r.stderr, "wrote PDF of invoice "+n1+" to "+pdf)
			b, err := os.ReadFile(pdf)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(b, []byte("%PDF-")), "not a PDF: %q", b[:min(len(b), 16)])
			if text, ok := pdfText(t, pdf); ok {
				for _, s := range []string{"Invoice " + n1, "Acme Video Ltd", "Tax ID IE1234567T", "PAID 2025-02-14", "$9.99", "txn-seed-04"} {
					assert.Contains(t, text, s, "the PDF's text")
				}
			}
			r = cli(append([]string{"invoices", "pdf", "--number", n2, "--user", c.account, "-o", "-", "--html", "--locale", "de"}, seller...)...)
			r.want(t, exitOK, "<h1>Invoice "+n2+"</h1>", "<dd>VOID 2025-03-19</dd>", "9,99\u00a0$")
			assert.Empty(t, r.stderr)
			notePDF := filepath.Join(dir, "note.pdf")
			r = cli(append([]string{"invoices", "pdf", note.ID, "-o", notePDF}, seller...)...)
			require.Equal(t, exitOK, r.code, "%s", r)
			assert.Contains(t, r.stderr, "wrote PDF of credit note "+c.account+"-CN-0001")
			if text, ok := pdfText(t, notePDF); ok {
				assert.Contains(t, text, "Credit note "+c.account+"-CN-0001")
				assert.Contains(t, text, n1, "the invoice it credits")
			}
			cli(append([]string{"invoices", "pdf", note.ID + "0", "-o", notePDF}, seller...)...).want(t, exitFail, "unknown credit note ID")
		})
	}
}

// pdfText is the text pdftotext extracts from the file path; ok is false
// where poppler-utils is not installed (render's tests require it under
// CI=true).
func pdfText(t *testing.T, path string) (string, bool) {
	t.Helper()
	tool, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Log("pdftotext not found: the PDF's text is not checked")
		return "", false
	}
	out, err := exec.Command(tool, "-layout", path, "-").Output()
	require.NoError(t, err)
	return string(squeeze(string(out))), true
}
