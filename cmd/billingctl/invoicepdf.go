package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/invoicedoc"
	"github.com/dynabill/billing/render"
)

// lines is a flag given once per value.
type lines []string

func (l *lines) String() string     { return strings.Join(*l, "; ") }
func (l *lines) Set(v string) error { *l = append(*l, v); return nil }

func runInvoicesPDF(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	var key invoiceKey
	key.register(fs)
	out := fs.String("o", "", "write the document to `file` (required; - for stdout)")
	asHTML := fs.Bool("html", false, "write an HTML page instead of a PDF")
	var cfg render.Config
	var address lines
	fs.StringVar(&cfg.Seller.Name, "seller", "", "the seller's `name` heading the document (required)")
	fs.Var(&address, "address", "a `line` of the seller's address (repeat for each line)")
	fs.StringVar(&cfg.Seller.TaxID, "tax-id", "", "the seller's tax `ID`, shown as given")
	logo := fs.String("logo", "", "the seller's logo, a PNG or JPEG `file`")
	fs.StringVar(&cfg.Seller.Footer, "footer", "", "a `text` at the foot of the document")
	fs.StringVar(&cfg.Locale, "locale", "en", "the `locale` amounts are written in (de, fr-CH, ja, ...)")
	fs.StringVar(&cfg.PageSize, "page-size", "A4", "the PDF's `paper`: A4 or Letter")
	font := fs.String("font", "", "a TrueType font `file` for text beyond Western European (Greek, Cyrillic, CJK)")
	pos, err := a.parse(c, fs, args)
	if err != nil {
		return err
	}
	switch {
	case cfg.Seller.Name == "":
		return usagef(c.name, "--seller is required: the seller's name heading the document")
	case *out == "":
		return usagef(c.name, "-o is required: the file to write (- for stdout)")
	}
	if err := key.check(c, pos); err != nil {
		return err
	}
	cfg.Seller.Address = address
	for _, f := range []struct {
		flag, path string
		into       *[]byte
	}{{"--logo", *logo, &cfg.Seller.Logo}, {"--font", *font, &cfg.Font}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return usagef(c.name, "%s: %v", f.flag, err)
		}
		*f.into = b
	}
	r, err := render.New(cfg)
	if err != nil {
		return usagef(c.name, "%v", err)
	}
	store, err := a.invoices()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	var what string
	if len(pos) == 1 && strings.HasPrefix(pos[0], "cn_") && *key.number == "" {
		note, inv, err := findNote(a, store, pos[0])
		if err != nil {
			return err
		}
		what = "credit note " + note.Number
		if *asHTML {
			err = r.CreditNoteHTML(&buf, note, inv)
		} else {
			err = r.CreditNotePDF(&buf, note, inv)
		}
		if err != nil {
			return err
		}
	} else {
		inv, err := key.find(a, store, pos)
		if err != nil {
			return err
		}
		what = "invoice " + cmpOr(inv.Number, "(draft)")
		if *asHTML {
			err = r.HTML(&buf, inv)
		} else {
			err = r.PDF(&buf, inv)
		}
		if err != nil {
			return err
		}
	}
	w, closeFile, err := a.outputFile(*out)
	if err != nil {
		return err
	}
	_, err = buf.WriteTo(w)
	if cerr := closeFile(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if *out != "-" {
		format := "PDF"
		if *asHTML {
			format = "HTML"
		}
		fmt.Fprintf(a.stderr, "wrote %s of %s to %s\n", format, what, *out)
	}
	return nil
}

// findNote reads the credit note id and its invoice. A note's ID is its
// invoice's with cn_ for in_ and a hash of its key after a last "_"
// (internal/invoicedoc.NoteID).
func findNote(a *app, store billing.Invoices, id string) (billing.CreditNote, billing.Invoice, error) {
	rest := strings.TrimPrefix(id, "cn_")
	i := strings.LastIndexByte(rest, '_')
	if i < 0 {
		return billing.CreditNote{}, billing.Invoice{}, &invoiceNotFoundError{what: "credit note ID " + id}
	}
	if invID := "in_" + rest[:i]; !strings.HasPrefix(id, invoicedoc.NoteIDPrefix(invID)) {
		return billing.CreditNote{}, billing.Invoice{}, &invoiceNotFoundError{what: "credit note ID " + id}
	}
	inv, err := store.Invoice(a.ctx, "in_"+rest[:i])
	if err != nil {
		return billing.CreditNote{}, billing.Invoice{}, notFound(err, "credit note ID "+id)
	}
	notes, err := store.CreditNotes(a.ctx, inv.ID)
	if err != nil {
		return billing.CreditNote{}, billing.Invoice{}, err
	}
	for _, n := range notes {
		if n.ID == id {
			return n, inv, nil
		}
	}
	return billing.CreditNote{}, billing.Invoice{}, &invoiceNotFoundError{what: "credit note ID " + id}
}
