package render

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-pdf/fpdf"

	"github.com/dynabill/billing"
)

// PDF writes inv as a PDF file of one page or more (the table's header
// repeats on each). The file is the same byte for byte for the same
// invoice and Config: its dates are the invoice's (issued, else
// created), never the time it is written. inv must pass
// [billing.Invoice.Validate]; errors are an [*Error] naming the invoice,
// and nothing is written to w when the document could not be made.
func (r *Renderer) PDF(w io.Writer, inv billing.Invoice) error {
	if err := inv.Validate(); err != nil {
		return &Error{Doc: "invoice", ID: inv.ID, Format: "pdf", Err: err}
	}
	if err := r.writePDF(w, r.invoiceView(&inv, r.cfg.Font == nil)); err != nil {
		return &Error{Doc: "invoice", ID: inv.ID, Format: "pdf", Err: err}
	}
	return nil
}

// CreditNotePDF writes note, a credit note against inv, as a PDF (see
// [Renderer.PDF]); it names inv's number. A note of another invoice is an
// error wrapping [ErrWrongInvoice].
func (r *Renderer) CreditNotePDF(w io.Writer, note billing.CreditNote, inv billing.Invoice) error {
	if err := checkNote(&note, &inv); err != nil {
		return &Error{Doc: "credit note", ID: note.ID, Format: "pdf", Err: err}
	}
	if err := r.writePDF(w, r.noteView(&note, &inv, r.cfg.Font == nil)); err != nil {
		return &Error{Doc: "credit note", ID: note.ID, Format: "pdf", Err: err}
	}
	return nil
}

// Layout, in millimetres and points.
const (
	margin     = 18.0
	footerRoom = 22.0 // below the last row: the footer's band
	lineH      = 4.6  // a 9 pt line
	logoH      = 14.0
	logoMaxW   = 70.0
)

// Colours (RGB).
var (
	ink    = [3]int{31, 35, 40}
	muted  = [3]int{89, 99, 110}
	rule   = [3]int{216, 221, 227}
	accent = [3]int{180, 35, 24} // DRAFT
)

// pdfDoc is one PDF being drawn.
type pdfDoc struct {
	*fpdf.Fpdf
	family string
	// tr encodes text for the font.
	tr func(string) string
	// pageW, pageH are the paper's size; cols the table's column widths.
	pageW, pageH float64
	cols         [5]float64
}

func (r *Renderer) writePDF(w io.Writer, v view) error {
	pdf := fpdf.New("P", "mm", r.cfg.PageSize, "")
	d := &pdfDoc{Fpdf: pdf, family: "Helvetica"}
	d.pageW, d.pageH = pdf.GetPageSize()
	d.tr = func(s string) string {
		enc, _ := toCP1252(s) // checked before: see unsupported
		return enc
	}
	if r.cfg.Font != nil {
		pdf.AddUTF8FontFromBytes("body", "", r.cfg.Font)
		pdf.AddUTF8FontFromBytes("body", "B", r.cfg.BoldFont)
		d.family, d.tr = "body", func(s string) string { return s }
	} else if s, ok := unsupported(&v); ok {
		return fmt.Errorf("%w: %q", ErrUnsupportedText, s)
	}
	created := v.Created
	if created.IsZero() {
		created = time.Unix(0, 0) // a document never dated: still the same bytes
	}
	isUTF8 := true
	pdf.SetCreationDate(created.UTC())
	pdf.SetModificationDate(created.UTC())
	pdf.SetCatalogSort(true)
	pdf.SetProducer("dynabill render", isUTF8)
	pdf.SetCreator("dynabill render", isUTF8)
	pdf.SetTitle(v.Kind+" "+v.Number, isUTF8)
	pdf.SetAuthor(v.Seller.Name, isUTF8)
	pdf.SetMargins(margin, margin, margin)
	pdf.SetAutoPageBreak(false, 0)
	pdf.AliasNbPages("{nb}")
	content := d.pageW - 2*margin
	for i, share := range [5]float64{0.37, 0.25, 0.07, 0.15, 0.16} {
		d.cols[i] = content * share
	}
	pdf.SetFooterFunc(func() { d.footer(v.Seller.Footer) })
	if r.logo.mime != "" {
		pdf.RegisterImageOptionsReader("logo", fpdf.ImageOptions{ImageType: r.logo.pdfType}, bytes.NewReader(r.cfg.Seller.Logo))
	}

	pdf.AddPage()
	y := d.heading(v, r.logo)
	y = d.customer(v, y+8)
	y = d.table(v, y+6)
	d.notes(v, y+8)

	if err := pdf.Error(); err != nil {
		return err
	}
	var buf bytes.Buffer // nothing reaches w unless the whole file was made
	if err := pdf.Output(&buf); err != nil {
		return err
	}
	_, err := buf.WriteTo(w)
	return err
}

func (d *pdfDoc) font(style string, size float64, color [3]int) {
	d.SetFont(d.family, style, size)
	d.SetTextColor(color[0], color[1], color[2])
}

// cell writes s in a cell of width w at (x, y), aligned "L" or "R".
func (d *pdfDoc) cell(x, y, w float64, s, align string) {
	d.SetXY(x, y)
	d.CellFormat(w, lineH, d.tr(s), "", 0, align, false, 0, "")
}

// heading draws the seller on the left, the title and facts on the
// right, and returns the y below both.
func (d *pdfDoc) heading(v view, logo logoInfo) float64 {
	left := margin
	if logo.mime != "" {
		w, h := logoH*float64(logo.w)/float64(logo.h), logoH
		if w > logoMaxW { // a wide logo: as wide as the seller's block
			w, h = logoMaxW, logoMaxW*float64(logo.h)/float64(logo.w)
		}
		d.ImageOptions("logo", margin, margin, w, h, false, fpdf.ImageOptions{}, 0, "")
		left += h + 4
	}
	d.font("B", 12, ink)
	d.cell(margin, left, 90, v.Seller.Name, "L")
	left += lineH + 1
	d.font("", 9, muted)
	for _, a := range v.Seller.Address {
		d.cell(margin, left, 90, a, "L")
		left += lineH
	}
	if v.Seller.TaxID != "" {
		d.cell(margin, left, 90, "Tax ID "+v.Seller.TaxID, "L")
		left += lineH
	}

	boxW := 82.0
	x := d.pageW - margin - boxW
	d.font("B", 18, ink)
	title := v.Kind + " " + v.Number
	if v.Draft {
		title = v.Kind + " "
		d.SetXY(x, margin)
		d.CellFormat(boxW-d.GetStringWidth("DRAFT")-2, 9, d.tr(title), "", 0, "R", false, 0, "")
		d.SetTextColor(accent[0], accent[1], accent[2])
		d.SetXY(d.pageW-margin-d.GetStringWidth("DRAFT")-2, margin)
		d.CellFormat(d.GetStringWidth("DRAFT")+2, 9, "DRAFT", "", 0, "R", false, 0, "")
	} else {
		d.SetXY(x, margin)
		d.CellFormat(boxW, 9, d.tr(title), "", 0, "R", false, 0, "")
	}
	right := margin + 12
	for _, f := range v.Facts {
		d.font("", 9, muted)
		d.cell(x, right, 34, f.Label, "L")
		d.font("", 9, ink)
		for _, l := range d.wrap(f.Value, boxW-34) {
			d.cell(x+34, right, boxW-34, l, "R")
			right += lineH
		}
	}
	return max(left, right)
}

// customer draws who is billed and returns the y below.
func (d *pdfDoc) customer(v view, y float64) float64 {
	d.font("B", 7.5, muted)
	d.cell(margin, y, 80, strings.ToUpper(v.Party), "L")
	d.font("", 10, ink)
	d.cell(margin, y+lineH, 120, "Account "+v.Customer, "L")
	return y + 2*lineH
}

// tableHeader draws the column titles at y and returns the y below.
func (d *pdfDoc) tableHeader(y float64) float64 {
	d.font("B", 8, ink)
	x := margin
	for i, h := range [5]string{"Description", "Period", "Qty", "Unit amount", "Amount"} {
		align := "L"
		if i >= 2 {
			align = "R"
		}
		d.cell(x, y, d.cols[i], h, align)
		x += d.cols[i]
	}
	y += lineH + 1
	d.SetDrawColor(ink[0], ink[1], ink[2])
	d.SetLineWidth(0.4)
	d.Line(margin, y, d.pageW-margin, y)
	return y + 1.5
}

// table draws the lines and the totals, on more pages when they need
// them, and returns the y below.
func (d *pdfDoc) table(v view, y float64) float64 {
	y = d.tableHeader(y)
	bottom := d.pageH - footerRoom
	for _, l := range v.Lines {
		d.font("", 9, ink)
		desc := d.wrap(l.Description, d.cols[0])
		period := d.wrap(l.Period, d.cols[1])
		h := float64(max(len(desc), len(period), 1))*lineH + 2
		if y+h > bottom {
			d.AddPage()
			y = d.tableHeader(margin)
			d.font("", 9, ink)
		}
		x := margin
		for i, col := range [5][]string{desc, period, {l.Quantity}, {l.UnitAmount}, {l.Amount}} {
			align := "L"
			if i >= 2 {
				align = "R"
			}
			for j, s := range col {
				d.cell(x, y+0.5+float64(j)*lineH, d.cols[i], s, align)
			}
			x += d.cols[i]
		}
		y += h
		d.SetDrawColor(rule[0], rule[1], rule[2])
		d.SetLineWidth(0.2)
		d.Line(margin, y, d.pageW-margin, y)
	}
	y += 2
	labelW := d.cols[0] + d.cols[1] + d.cols[2] + d.cols[3]
	for _, t := range v.Totals {
		if y+lineH+1 > bottom {
			d.AddPage()
			y = margin
		}
		style, color := "", muted
		if t.Strong {
			style, color = "B", ink
		}
		d.font(style, 9, color)
		d.cell(margin, y, labelW, t.Label, "R")
		d.font(style, 9, ink)
		d.cell(margin+labelW, y, d.cols[4], t.Value, "R")
		y += lineH + 0.6
	}
	return y
}

// notes draws the references below the table.
func (d *pdfDoc) notes(v view, y float64) {
	bottom := d.pageH - footerRoom
	if y+lineH*float64(len(v.Notes)+1) > bottom {
		d.AddPage()
		y = margin
	}
	d.font("B", 7.5, muted)
	d.cell(margin, y, 80, "REFERENCES", "L")
	y += lineH
	for _, n := range v.Notes {
		d.font("", 8, muted)
		d.cell(margin, y, 34, n.Label, "L")
		d.font("", 8, ink)
		for _, l := range d.wrap(n.Value, d.pageW-2*margin-34) {
			if y+lineH > bottom {
				d.AddPage()
				y = margin
			}
			d.cell(margin+34, y, d.pageW-2*margin-34, l, "L")
			y += lineH
		}
	}
}

// footer draws the seller's footer and the page number on each page.
func (d *pdfDoc) footer(text string) {
	y := d.pageH - margin
	d.SetDrawColor(rule[0], rule[1], rule[2])
	d.SetLineWidth(0.2)
	d.Line(margin, y-6, d.pageW-margin, y-6)
	d.font("", 7.5, muted)
	if text != "" {
		lines := d.wrap(strings.ReplaceAll(text, "\n", " "), d.pageW-2*margin-30)
		for i, l := range lines[:min(len(lines), 2)] {
			d.cell(margin, y-5+float64(i)*3.6, d.pageW-2*margin-30, l, "L")
		}
	}
	d.cell(d.pageW-margin-30, y-5, 30, fmt.Sprintf("Page %d of {nb}", d.PageNo()), "R")
}

// wrap splits s into lines no wider than w in the current font, at
// spaces, and inside a word only when the word alone is wider. An empty
// s is no line.
func (d *pdfDoc) wrap(s string, w float64) []string {
	w -= 2 * d.GetCellMargin()
	var out []string
	cur := ""
	width := func(s string) float64 { return d.GetStringWidth(d.tr(s)) }
	for _, word := range strings.Fields(s) {
		next := word
		if cur != "" {
			next = cur + " " + word
		}
		if width(next) <= w {
			cur = next
			continue
		}
		if cur != "" {
			out = append(out, cur)
		}
		cur = ""
		for _, r := range word { // a word wider than the column
			if cur != "" && width(cur+string(r)) > w {
				out = append(out, cur)
				cur = ""
			}
			cur += string(r)
		}
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// unsupported returns the first text of v that Windows-1252, the
// encoding of the built-in font, cannot hold.
func unsupported(v *view) (string, bool) {
	texts := []string{v.Kind, v.Number, v.Party, v.Customer, v.Seller.Name, v.Seller.TaxID, v.Seller.Footer}
	texts = append(texts, v.Seller.Address...)
	for _, p := range append(v.Facts, v.Notes...) {
		texts = append(texts, p.Label, p.Value)
	}
	for _, l := range v.Lines {
		texts = append(texts, l.Description, l.Period, l.Quantity, l.UnitAmount, l.Amount)
	}
	for _, t := range v.Totals {
		texts = append(texts, t.Label, t.Value)
	}
	for _, s := range texts {
		if _, ok := toCP1252(s); !ok {
			return s, true
		}
	}
	return "", false
}
