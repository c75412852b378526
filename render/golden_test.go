package render_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/render"
)

// Golden tests: the HTML of each sample is compared byte for byte with
// testdata/NAME.html, and the text pdftotext -layout (poppler-utils)
// extracts from its PDF with testdata/NAME.pdf.txt. UPDATE_GOLDEN=1
// writes them instead. Without pdftotext the PDF checks skip, and under
// CI=true they fail.

// document is one sample, written by both formats.
type document struct {
	name string
	html func(r *render.Renderer, w *bytes.Buffer) error
	pdf  func(r *render.Renderer, w *bytes.Buffer) error
}

func invoiceDoc(name string, inv billing.Invoice) document {
	return document{name: name,
		html: func(r *render.Renderer, w *bytes.Buffer) error { return r.HTML(w, inv) },
		pdf:  func(r *render.Renderer, w *bytes.Buffer) error { return r.PDF(w, inv) }}
}

func documents() []document {
	note, inv := sampleNote()
	return []document{
		invoiceDoc("invoice-usd", sampleUSD()),
		invoiceDoc("invoice-jpy", sampleJPY()),
		invoiceDoc("invoice-draft", sampleDraft()),
		invoiceDoc("invoice-void", sampleVoid()),
		{name: "credit-note",
			html: func(r *render.Renderer, w *bytes.Buffer) error { return r.CreditNoteHTML(w, note, inv) },
			pdf:  func(r *render.Renderer, w *bytes.Buffer) error { return r.CreditNotePDF(w, note, inv) }},
	}
}

// golden compares got with testdata/name, or writes it under
// UPDATE_GOLDEN=1.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: run the test with UPDATE_GOLDEN=1 and review what it writes")
	if bytes.Equal(want, got) {
		return
	}
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	i := 0
	for i < min(len(w), len(g)) && w[i] == g[i] {
		i++
	}
	line := func(l []string) string {
		if i < len(l) {
			return strconv.Quote(l[i])
		}
		return "(end of file)"
	}
	t.Errorf("%s differs from what is rendered now (UPDATE_GOLDEN=1 rewrites it); first at line %d:\nwant %s\ngot  %s",
		path, i+1, line(w), line(g))
}

// poppler returns the path of a poppler-utils tool: skipped without it,
// failed under CI=true.
func poppler(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found: install poppler-utils (.ci/run does): %v", name, err)
		}
		t.Skipf("%s not found (install poppler-utils): %v", name, err)
	}
	return p
}

// pdfText is the text pdftotext -layout extracts from pdf.
func pdfText(t testing.TB, pdf []byte) string {
	t.Helper()
	tool := poppler(t, "pdftotext")
	path := filepath.Join(t.TempDir(), "doc.pdf")
	require.NoError(t, os.WriteFile(path, pdf, 0o644))
	out, err := exec.Command(tool, "-layout", "-enc", "UTF-8", path, "-").Output()
	require.NoError(t, err, "pdftotext: %s", out)
	return string(out)
}

func TestHTMLGolden(t *testing.T) {
	t.Parallel()
	r := newRenderer(t)
	for _, d := range documents() {
		t.Run(d.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, d.html(r, &buf))
			golden(t, d.name+".html", buf.Bytes())
		})
	}
}

func TestPDFGolden(t *testing.T) {
	t.Parallel()
	r := newRenderer(t)
	for _, d := range documents() {
		t.Run(d.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, d.pdf(r, &buf))
			golden(t, d.name+".pdf.txt", []byte(pdfText(t, buf.Bytes())))
		})
	}
}

// TestPDFIsValid: each PDF starts as one, pdfinfo reads it (one page,
// its title, the invoice's date, not today's), and a second rendering
// gives the same bytes.
func TestPDFIsValid(t *testing.T) {
	t.Parallel()
	tool := poppler(t, "pdfinfo")
	r := newRenderer(t)
	for _, d := range documents() {
		t.Run(d.name, func(t *testing.T) {
			var a, b bytes.Buffer
			require.NoError(t, d.pdf(r, &a))
			require.NoError(t, d.pdf(r, &b))
			require.True(t, bytes.HasPrefix(a.Bytes(), []byte("%PDF-")), "starts %q", a.Bytes()[:min(a.Len(), 16)])
			assert.True(t, bytes.Equal(a.Bytes(), b.Bytes()), "two renderings differ")
			path := filepath.Join(t.TempDir(), "doc.pdf")
			require.NoError(t, os.WriteFile(path, a.Bytes(), 0o644))
			out, err := exec.Command(tool, path).CombinedOutput()
			require.NoError(t, err, "pdfinfo: %s", out)
			assert.Equal(t, 1, pdfPages(t, string(out)), "pages:\n%s", out)
			assert.Regexp(t, `(?m)^Title: +(Invoice|Credit note) `, string(out))
			assert.Regexp(t, `(?m)^CreationDate: .*2025`, string(out))
		})
	}
}

func pdfPages(t testing.TB, info string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^Pages: +(\d+)`).FindStringSubmatch(info)
	require.NotNil(t, m, "pdfinfo printed no page count:\n%s", info)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// TestLongInvoiceBreaksPages: 80 lines take more than a page; the
// header repeats and the totals follow the last line.
func TestLongInvoiceBreaksPages(t *testing.T) {
	t.Parallel()
	inv := sampleJPY()
	inv.Lines = nil
	inv.Subtotal, inv.Tax = 0, 0
	for i := range 80 {
		inv.Lines = append(inv.Lines, billing.InvoiceLine{Description: "Seat " + strconv.Itoa(i+1), Quantity: 1, UnitAmount: 1000,
			Amount: 1000, Kind: billing.LinePlan})
		inv.Subtotal += 1000
	}
	inv.Total, inv.AmountDue = inv.Subtotal, inv.Subtotal
	var buf bytes.Buffer
	require.NoError(t, newRenderer(t).PDF(&buf, inv))
	text := pdfText(t, buf.Bytes())
	pages := strings.Split(strings.TrimSuffix(text, "\f"), "\f")
	require.Greater(t, len(pages), 1, "80 lines on one page:\n%s", text)
	for i, p := range pages {
		assert.Contains(t, p, "Description", "page %d lacks the table's header", i+1)
		assert.Contains(t, p, "Page "+strconv.Itoa(i+1)+" of "+strconv.Itoa(len(pages)), "page %d's number", i+1)
	}
	last := pages[len(pages)-1]
	assert.Contains(t, last, "Seat 80")
	assert.Regexp(t, `Amount due +¥80,000`, last)
}
