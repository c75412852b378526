package billingui

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
)

// ActionInvoices is the Authorizer's action for a user's invoices: the
// customer page's invoice section and the documents it links to. It is a
// read (Write false, Operator false) with UserID the customer, so
// [billinghttp.RoleAuthorizer] grants it to operators and to the user.
// A refused viewer sees the customer page without the section.
const ActionInvoices = "invoices.get"

// DefaultInvoicePage is the number of invoices the customer page lists at
// a time; a link lists the next ones.
const DefaultInvoicePage = 20

// Documents writes the documents of an invoice and of its credit notes;
// a [render.Renderer] (package github.com/dynabill/billing/render) is one.
// The console takes this interface rather than the renderer so that a
// host that serves the console without documents does not link the PDF
// library.
//
// [render.Renderer]: https://pkg.go.dev/github.com/dynabill/billing/render#Renderer
type Documents interface {
	// PDF and HTML write inv as a PDF file and as an HTML page.
	PDF(w io.Writer, inv billing.Invoice) error
	HTML(w io.Writer, inv billing.Invoice) error
	// CreditNotePDF writes note, a credit note against inv, as a PDF.
	CreditNotePDF(w io.Writer, note billing.CreditNote, inv billing.Invoice) error
}

// invoiceRow is an invoice of the customer page, with the credit notes
// issued against it.
type invoiceRow struct {
	billing.Invoice
	Notes []billing.CreditNote
}

// invoiceSection is the customer page's list of invoices: a page of
// DefaultInvoicePage, newest first.
type invoiceSection struct {
	Rows []invoiceRow
	// After is the store's cursor this page starts after ("" for the
	// newest); Next the one of the next page, "" after the last.
	After, Next string
	// Docs reports whether the rows link to their documents
	// (Config.Documents is set).
	Docs bool
}

// errInvoiceCursor refuses an invoice page's cursor that is no invoice
// ID.
var errInvoiceCursor = errors.New("the invoices' cursor is not valid: start from the newest")

// invoiceCursor returns the invoice page's cursor of the customer page's
// address: "" for the newest, else an invoice ID (see invoiceSection).
func invoiceCursor(r *http.Request) (string, error) {
	after := r.URL.Query().Get("invoices")
	if after != "" && !validID(after) {
		return "", errInvoiceCursor
	}
	return after, nil
}

// invoiceSection reads the page of userID's invoices after the cursor
// after, each with its credit notes; nil (no section) without an invoice
// store or when the viewer may not read the user's invoices. A cursor the
// store refuses is errInvoiceCursor.
func (h *Handler) invoiceSection(r *http.Request, userID, after string) (*invoiceSection, error) {
	if h.cfg.Invoices == nil || !h.allowed(r, invoicesOf(userID)) {
		return nil, nil
	}
	ctx := r.Context()
	page, next, err := h.cfg.Invoices.ByUser(ctx, userID, after, DefaultInvoicePage)
	if errors.Is(err, billing.ErrInvalidCursor) {
		return nil, errInvoiceCursor
	}
	if err != nil {
		return nil, err
	}
	s := &invoiceSection{After: after, Next: next, Docs: h.cfg.Documents != nil}
	for _, inv := range page {
		row := invoiceRow{Invoice: inv}
		// A note adds its total to AmountCredited in the transaction that
		// stores it: an invoice credited nothing has none to read.
		if inv.AmountCredited > 0 {
			if row.Notes, err = h.cfg.Invoices.CreditNotes(ctx, inv.ID); err != nil {
				return nil, err
			}
		}
		s.Rows = append(s.Rows, row)
	}
	return s, nil
}

func invoicesOf(userID string) billinghttp.Action {
	return billinghttp.Action{Name: ActionInvoices, UserID: userID}
}

// errNoSuchInvoice answers a document of an invoice the store does not
// have, or that is another user's: both are not found.
const errNoSuchInvoice = "no such invoice of this user"

// ownInvoice reads the invoice of the request's "invoice" parameter once
// the Authorizer allowed ActionInvoices on its "user"; an invoice of
// another user is not found, exactly like an unknown ID. When ok is false
// it has answered the request.
func (h *Handler) ownInvoice(w http.ResponseWriter, r *http.Request) (inv billing.Invoice, ok bool) {
	q := r.URL.Query()
	userID, id := q.Get("user"), q.Get("invoice")
	if !validID(userID) || !validID(id) {
		h.fail(w, r, http.StatusBadRequest, "a user and an invoice ID are 1 to 1024 bytes of UTF-8 without control characters")
		return inv, false
	}
	if !h.authorize(w, r, invoicesOf(userID)) {
		return inv, false
	}
	if h.cfg.Invoices == nil || h.cfg.Documents == nil {
		h.fail(w, r, http.StatusNotFound, "this console serves no invoice documents")
		return inv, false
	}
	inv, err := h.cfg.Invoices.Invoice(r.Context(), id)
	if err != nil && !errors.Is(err, billing.ErrNotFound) {
		h.internal(w, r, "reading the invoice", err)
		return inv, false
	}
	if err != nil || inv.UserID != userID {
		h.fail(w, r, http.StatusNotFound, errNoSuchInvoice)
		return billing.Invoice{}, false
	}
	return inv, true
}

func (h *Handler) invoicePDF(w http.ResponseWriter, r *http.Request) {
	inv, ok := h.ownInvoice(w, r)
	if !ok {
		return
	}
	h.document(w, r, "application/pdf", docName(inv.Number, inv.ID, "pdf"), func(w io.Writer) error {
		return h.cfg.Documents.PDF(w, inv)
	})
}

func (h *Handler) invoiceHTML(w http.ResponseWriter, r *http.Request) {
	inv, ok := h.ownInvoice(w, r)
	if !ok {
		return
	}
	// The document is a page of its own, its styles inline and its logo a
	// data URL: allowed here, and still no script.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
	h.document(w, r, "text/html; charset=utf-8", docName(inv.Number, inv.ID, "html"), func(w io.Writer) error {
		return h.cfg.Documents.HTML(w, inv)
	})
}

func (h *Handler) creditNotePDF(w http.ResponseWriter, r *http.Request) {
	inv, ok := h.ownInvoice(w, r)
	if !ok {
		return
	}
	id := r.URL.Query().Get("note")
	notes, err := h.cfg.Invoices.CreditNotes(r.Context(), inv.ID)
	if err != nil {
		h.internal(w, r, "reading the credit notes", err)
		return
	}
	for _, n := range notes {
		if n.ID == id {
			h.document(w, r, "application/pdf", docName(n.Number, n.ID, "pdf"), func(w io.Writer) error {
				return h.cfg.Documents.CreditNotePDF(w, n, inv)
			})
			return
		}
	}
	h.fail(w, r, http.StatusNotFound, "no such credit note of this invoice")
}

// document answers the document write writes, whole: a document that
// fails half way is a 500 page, never a truncated file.
func (h *Handler) document(w http.ResponseWriter, r *http.Request, contentType, disposition string, write func(io.Writer) error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		h.internal(w, r, "writing the document", err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("Content-Disposition", disposition)
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// docName is the Content-Disposition of a document: shown in the browser
// (inline), saved as its number ("ACME-0001.pdf"), or "draft-" and its
// ID for a draft, which has none. A number carries its prefix, which may
// be a user's ID: every character but letters, digits, '-', '_' and '.'
// is written '_', so the name is one file name on every system.
func docName(number, id, ext string) string {
	name := number
	if name == "" {
		name = "draft-" + id
	}
	name = strings.TrimLeft(strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			return c
		}
		return '_'
	}, name), ".")
	if len(name) > 200 {
		name = name[:200]
	}
	if name == "" {
		name = "invoice"
	}
	return mime.FormatMediaType("inline", map[string]string{"filename": name + "." + ext})
}
