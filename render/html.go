package render

import (
	"bufio"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"

	"github.com/dynabill/billing"
)

//go:embed templates/document.html.tmpl
var templates embed.FS

var page = template.Must(template.New("document.html.tmpl").ParseFS(templates, "templates/document.html.tmpl"))

// htmlPage is what the template reads.
type htmlPage struct {
	view
	// Logo is the logo as a data URL, "" without one.
	Logo template.URL
}

// HTML writes inv as a page of its own: a complete HTML document with
// its styles inline, for a browser, an e-mail or a print to PDF. Every
// value is escaped. inv must pass [billing.Invoice.Validate]; errors are
// an [*Error] naming the invoice.
func (r *Renderer) HTML(w io.Writer, inv billing.Invoice) error {
	if err := inv.Validate(); err != nil {
		return &Error{Doc: "invoice", ID: inv.ID, Format: "html", Err: err}
	}
	if err := r.writeHTML(w, r.invoiceView(&inv, false)); err != nil {
		return &Error{Doc: "invoice", ID: inv.ID, Format: "html", Err: err}
	}
	return nil
}

// CreditNoteHTML writes note, a credit note against inv, as HTML (see
// [Renderer.HTML]); it names inv's number. A note of another invoice is
// an error wrapping [ErrWrongInvoice].
func (r *Renderer) CreditNoteHTML(w io.Writer, note billing.CreditNote, inv billing.Invoice) error {
	if err := checkNote(&note, &inv); err != nil {
		return &Error{Doc: "credit note", ID: note.ID, Format: "html", Err: err}
	}
	if err := r.writeHTML(w, r.noteView(&note, &inv, false)); err != nil {
		return &Error{Doc: "credit note", ID: note.ID, Format: "html", Err: err}
	}
	return nil
}

func (r *Renderer) writeHTML(w io.Writer, v view) error {
	p := htmlPage{view: v}
	if r.logo.mime != "" {
		// Safe as a URL: made here of the checked image's type and base64.
		p.Logo = template.URL("data:" + r.logo.mime + ";base64," + base64.StdEncoding.EncodeToString(r.cfg.Seller.Logo))
	}
	bw := bufio.NewWriter(w)
	if err := page.Execute(bw, p); err != nil {
		return err
	}
	return bw.Flush()
}

// checkNote checks that note is against inv and in its currency.
func checkNote(note *billing.CreditNote, inv *billing.Invoice) error {
	if note.InvoiceID != inv.ID || note.Currency != inv.Currency || note.UserID != inv.UserID {
		return fmt.Errorf("%w: the note is against %s (%s, account %s), the invoice is %s (%s, account %s)",
			ErrWrongInvoice, note.InvoiceID, note.Currency, note.UserID, inv.ID, inv.Currency, inv.UserID)
	}
	return inv.Validate()
}
