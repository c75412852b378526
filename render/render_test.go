package render_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/render"
)

// TestHTMLEscapes: the seller's and the invoice's text are escaped, in
// elements and attributes alike; nothing of it reaches the page as markup.
func TestHTMLEscapes(t *testing.T) {
	t.Parallel()
	s := sampleSeller(t)
	s.Name = `Acme "Video" <script>alert('name')</script>`
	s.Footer = `<img src=x onerror=alert(1)>`
	r, err := render.New(render.Config{Seller: s})
	require.NoError(t, err)
	inv := sampleUSD()
	inv.Lines[0].Description = `<script>alert("line")</script> & more`
	inv.UserID = `u1"><b>`
	inv.TransactionID = `javascript:alert(1)`
	var buf bytes.Buffer
	require.NoError(t, r.HTML(&buf, inv))
	page := buf.String()
	assert.NotContains(t, page, "<script")
	assert.NotContains(t, page, "<img src=x")
	assert.NotContains(t, page, `"><b>`)
	assert.Contains(t, page, `&lt;script&gt;alert(&#34;line&#34;)&lt;/script&gt; &amp; more`)
	assert.Contains(t, page, `alt="Acme &#34;Video&#34; &lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;"`)
	assert.Contains(t, page, `Account u1&#34;&gt;&lt;b&gt;`)
	assert.Contains(t, page, `&lt;img src=x onerror=alert(1)&gt;`)
	assert.Equal(t, 1, strings.Count(page, "<img "), "the logo is the only image")
}

// TestAmounts: the locale chooses the symbol, grouping and separator;
// the currency's ISO 4217 digits are kept (JPY none, KWD three); the
// PDF's built-in font gets a code where it lacks the symbol.
func TestAmounts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		locale, currency string
		amount           int64
		html, pdf        string
	}{
		{"en", "USD", 123450, "$1,234.50", "$1,234.50"},
		{"en", "JPY", 1234500, "¥1,234,500", "¥1,234,500"},
		{"en", "KWD", 1234500, "KWD\u00a01,234.500", "KWD\u00a01,234.500"},
		{"de", "EUR", 123450, "1.234,50\u00a0€", "1.234,50\u00a0€"},
		{"fr", "EUR", 123450, "1\u202f234,50\u00a0€", "1\u00a0234,50\u00a0€"},
		{"en-IN", "INR", 12345678, "₹1,23,456.78", "INR\u00a01,23,456.78"},
		{"ja", "JPY", 980000, "￥980,000", "JPY\u00a0980,000"},
	}
	for _, tc := range cases {
		t.Run(tc.locale+"/"+tc.currency, func(t *testing.T) {
			r, err := render.New(render.Config{Seller: render.Seller{Name: "S"}, Locale: tc.locale})
			require.NoError(t, err)
			html, pdf := render.FormatAmount(r, tc.currency, tc.amount)
			assert.Equal(t, tc.html, html, "HTML")
			assert.Equal(t, tc.pdf, pdf, "PDF, built-in font")
		})
	}
}

// TestNewChecksConfig: what New refuses, each naming its field.
func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	seller := sampleSeller(t)
	interlaced, err := os.ReadFile("testdata/interlaced.png")
	require.NoError(t, err)
	cases := []struct {
		name  string
		cfg   render.Config
		field string
	}{
		{"no name", render.Config{}, "Seller.Name"},
		{"logo not an image", render.Config{Seller: render.Seller{Name: "S", Logo: []byte("GIF89a not really")}}, "Seller.Logo"},
		{"logo the PDF writer cannot read", render.Config{Seller: render.Seller{Name: "S", Logo: interlaced}}, "Seller.Logo"},
		{"bad page size", render.Config{Seller: seller, PageSize: "A5"}, "PageSize"},
		{"bad locale", render.Config{Seller: seller, Locale: "-"}, "Locale"},
		{"font not a font", render.Config{Seller: seller, Font: []byte("not a font")}, "Font"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render.New(tc.cfg)
			require.ErrorIs(t, err, render.ErrConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	_, err = render.New(render.Config{Seller: seller, PageSize: "Letter", Locale: "de-CH"})
	assert.NoError(t, err)
}

// TestErrorsNameTheDocument: an invoice that does not add up, a note of
// another invoice, text the built-in font lacks and a failing writer are
// each an *Error naming the document and the format.
func TestErrorsNameTheDocument(t *testing.T) {
	t.Parallel()
	r := newRenderer(t)
	bad := sampleUSD()
	bad.Total++
	var e *render.Error

	err := r.PDF(&bytes.Buffer{}, bad)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, render.Error{Doc: "invoice", ID: bad.ID, Format: "pdf", Err: e.Err}, *e)
	assert.ErrorIs(t, err, billing.ErrInvalidInvoice)
	assert.Contains(t, err.Error(), "render: invoice "+bad.ID+" (pdf)")
	assert.ErrorIs(t, r.HTML(&bytes.Buffer{}, bad), billing.ErrInvalidInvoice)

	note, inv := sampleNote()
	other := sampleJPY()
	err = r.CreditNoteHTML(&bytes.Buffer{}, note, other)
	require.ErrorIs(t, err, render.ErrWrongInvoice)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, note.ID, e.ID)
	assert.Equal(t, "credit note", e.Doc)
	assert.ErrorIs(t, r.CreditNotePDF(&bytes.Buffer{}, note, other), render.ErrWrongInvoice)

	greek := inv
	greek.Lines = append([]billing.InvoiceLine(nil), inv.Lines...)
	greek.Lines[0].Description = "Συνδρομή Plus"
	var out bytes.Buffer
	err = r.PDF(&out, greek)
	require.ErrorIs(t, err, render.ErrUnsupportedText)
	assert.Contains(t, err.Error(), "Συνδρομή Plus")
	assert.Zero(t, out.Len(), "a document that failed wrote nothing")
	require.NoError(t, r.HTML(&out, greek), "HTML is UTF-8: every script")

	boom := errors.New("disk full")
	err = r.PDF(failWriter{boom}, sampleUSD())
	assert.ErrorIs(t, err, boom)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "pdf", e.Format)
	assert.ErrorIs(t, r.HTML(failWriter{boom}, sampleUSD()), boom)
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

// TestPDFWithFont: with a TrueType font, text of any script the font has
// is written; pdftotext reads it back. DejaVu Sans (Debian's
// fonts-dejavu-core) is used where it is installed.
func TestPDFWithFont(t *testing.T) {
	t.Parallel()
	font, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Skip("DejaVu Sans not installed:", err)
	}
	bold, _ := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")
	r, err := render.New(render.Config{Seller: sampleSeller(t), Font: font, BoldFont: bold, Locale: "fr"})
	require.NoError(t, err)
	inv := sampleUSD()
	inv.Currency = "EUR"
	inv.Lines[0].Description = "Συνδρομή Plus, подписка"
	var buf bytes.Buffer
	require.NoError(t, r.PDF(&buf, inv))
	text := pdfText(t, buf.Bytes())
	assert.Contains(t, text, "Συνδρομή Plus, подписка")
	assert.Contains(t, text, "1 223,22 €", "French grouping")
}

// TestWithLocale: a copy in another locale; the original is unchanged.
func TestWithLocale(t *testing.T) {
	t.Parallel()
	r := newRenderer(t)
	de, err := r.WithLocale("de")
	require.NoError(t, err)
	var en, ger bytes.Buffer
	require.NoError(t, r.HTML(&en, sampleUSD()))
	require.NoError(t, de.HTML(&ger, sampleUSD()))
	assert.Contains(t, en.String(), "$1,223.22")
	assert.Contains(t, ger.String(), "1.223,22\u00a0$")
	_, err = r.WithLocale("-")
	assert.ErrorIs(t, err, render.ErrConfig)
}

// TestConcurrentUse: one Renderer serves many goroutines (run with
// -race); each gets the bytes a lone call gets.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	r := newRenderer(t)
	var want bytes.Buffer
	require.NoError(t, r.PDF(&want, sampleUSD()))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				var got, page bytes.Buffer
				assert.NoError(t, r.PDF(&got, sampleUSD()))
				assert.NoError(t, r.HTML(&page, sampleJPY()))
				assert.True(t, bytes.Equal(want.Bytes(), got.Bytes()), "a PDF differs")
			}
		})
	}
	wg.Wait()
}

// TestTaxIncluded: an invoice whose prices include the tax says that its
// total includes the tax, beside the amount, and does not list it as
// added; one whose tax is added lists it as Tax.
func TestTaxIncluded(t *testing.T) {
	t.Parallel()
	r := newRenderer(t)
	inv := sampleUSD()
	inv.TaxInclusive, inv.Total, inv.AmountPaid = true, inv.Subtotal-inv.Discounts, inv.Subtotal-inv.Discounts
	require.NoError(t, inv.Validate())
	var buf bytes.Buffer
	require.NoError(t, r.HTML(&buf, inv))
	page := buf.String()
	assert.Contains(t, page, "Total includes tax")
	assert.Contains(t, page, "$228.73")

	buf.Reset()
	require.NoError(t, r.HTML(&buf, sampleUSD()))
	assert.NotContains(t, buf.String(), "includes tax")
}
