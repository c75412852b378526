package billingui_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/billingui"
	"github.com/dynabill/billing/memory"
)

// fakeDocs is the tests' Documents: a few bytes that name the document.
type fakeDocs struct{ fail bool }

func (f fakeDocs) PDF(w io.Writer, inv billing.Invoice) error {
	if f.fail {
		_, _ = io.WriteString(w, "%PDF-1.7 half")
		return errors.New("fake: the PDF library failed")
	}
	_, err := fmt.Fprintf(w, "%%PDF-1.7 fake invoice %s %s\n%%%%EOF\n", inv.Number, inv.ID)
	return err
}

func (fakeDocs) HTML(w io.Writer, inv billing.Invoice) error {
	_, err := fmt.Fprintf(w, "<!doctype html><title>Invoice %s</title>", html.EscapeString(inv.Number))
	return err
}

func (fakeDocs) CreditNotePDF(w io.Writer, note billing.CreditNote, inv billing.Invoice) error {
	_, err := fmt.Fprintf(w, "%%PDF-1.7 fake credit note %s of %s\n%%%%EOF\n", note.Number, inv.Number)
	return err
}

// invEnv is env with the collector issuing invoices into store and the
// console listing them, with fakeDocs. After it, the user's March
// period was declined (its invoice open), then waived (void); April's
// was paid, and credited 2.00 by a credit note; a JPY draft was made by
// hand last. The other user paid March's.
type invEnv struct {
	*env
	store                 *memory.Invoices
	draft, paid, void     billing.Invoice
	otherPaid             billing.Invoice
	note                  billing.CreditNote
	openBeforeWaive       billing.Invoice
	userInvoices          []billing.Invoice // newest first, from the store
	consoleWith, noAccess http.Handler
}

func newInvEnv(t *testing.T, open func(*testing.T, billing.Clock) (billing.Repository, billing.History), user string) *invEnv {
	t.Helper()
	ctx := context.Background()
	var store *memory.Invoices
	e := newEnv(t, open, user, func(cfg *billing.Config) {
		store = memory.NewInvoices(cfg.Clock)
		cfg.Invoices = store
		cfg.Invoicing = billing.Invoicing{Currency: "USD"}
	})
	ie := &invEnv{env: e, store: store}
	e.h = e.with(t, func(cfg *billingui.Config) { cfg.Invoices, cfg.Documents = store, fakeDocs{} }).h

	first := ie.newest(t, e.user)
	require.Equal(t, billing.InvoiceOpen, first.Status, "a declined charge leaves its invoice open")
	ie.openBeforeWaive = first
	_, err := e.c.Periods().Waive(ctx, billing.PeriodRequest{PeriodID: e.errID,
		UserRequest: billing.UserRequest{UserID: e.user, RequestKey: "waive-march", Reason: "test"}})
	require.NoError(t, err)
	ie.void = ie.get(t, first.ID)
	require.Equal(t, billing.InvoiceVoid, ie.void.Status, "a waive voids the open invoice")

	// April: the next period is paid.
	e.pay.SetUser(e.user, billingtest.Succeeded())
	e.clock.Set(mar3.AddDate(0, 1, 0))
	rep, err := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	require.GreaterOrEqual(t, rep.Collected, 1)
	ie.paid = ie.newest(t, e.user)
	require.Equal(t, billing.InvoicePaid, ie.paid.Status)
	ie.note, err = store.IssueCreditNote(ctx, &billing.CreditNote{Key: "goodwill", InvoiceID: ie.paid.ID, Reason: "goodwill",
		Lines: []billing.InvoiceLine{{Description: "Goodwill", Quantity: 1, UnitAmount: 200, Amount: 200, Kind: billing.LineCredit}},
		Total: 200, IssuedAt: e.clock.Now()})
	require.NoError(t, err)
	ie.paid = ie.get(t, ie.paid.ID)

	// A draft, made by hand in yen: no number yet.
	e.clock.Set(e.clock.Now().Add(time.Hour))
	ie.draft, err = store.CreateDraft(ctx, &billing.Invoice{UserID: e.user, Key: "manual-yen", Currency: "JPY", Status: billing.InvoiceDraft,
		Lines:    []billing.InvoiceLine{{Description: "Setup", Quantity: 1, UnitAmount: 1500, Amount: 1500, Kind: billing.LinePlan}},
		Subtotal: 1500, Total: 1500, AmountDue: 1500})
	require.NoError(t, err)

	ie.otherPaid = ie.newest(t, e.other)
	require.Equal(t, billing.InvoicePaid, ie.otherPaid.Status)
	ie.userInvoices, _, err = store.ByUser(ctx, e.user, "", 100)
	require.NoError(t, err)
	return ie
}

func (ie *invEnv) newest(t *testing.T, user string) billing.Invoice {
	t.Helper()
	page, _, err := ie.store.ByUser(context.Background(), user, "", 1)
	require.NoError(t, err)
	require.Len(t, page, 1, "invoices of %s", user)
	return page[0]
}

func (ie *invEnv) get(t *testing.T, id string) billing.Invoice {
	t.Helper()
	inv, err := ie.store.Invoice(context.Background(), id)
	require.NoError(t, err)
	return inv
}

var invoiceRowRE = regexp.MustCompile(`<tr id="(inv|cn)-([^"]+)"`)

// sectionRows returns the invoice section's rows in order: "inv ID" or
// "cn ID".
func sectionRows(body string) []string {
	var out []string
	for _, m := range invoiceRowRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1]+" "+html.UnescapeString(m[2]))
	}
	return out
}

// rowOf returns the <tr> of the section whose id is prefix+id.
func rowOf(body, prefix, id string) string {
	i := strings.Index(body, `<tr id="`+prefix+`-`+id+`"`)
	if i < 0 {
		return ""
	}
	row := body[i:]
	return row[:strings.Index(row, "</tr>")]
}

// TestInvoiceSectionRows: the customer page lists the user's invoices
// newest first (a draft, a paid one with its credit note under it, a
// void one), each with its number, status, total in its own currency,
// dates and links to its documents; another user's are not among them.
func TestInvoiceSectionRows(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			ie := newInvEnv(t, l.open, l.user)
			page := ie.as(t, "operator").get("/customer?user=" + url.QueryEscape(ie.user))
			require.Equal(t, http.StatusOK, page.code, page.body)
			require.Contains(t, page.body, `<h2 id="invoices-heading">Invoices</h2>`)
			assert.Equal(t, []string{"inv " + ie.draft.ID, "inv " + ie.paid.ID, "cn " + ie.note.ID, "inv " + ie.void.ID},
				sectionRows(page.body), "newest first, the note under its invoice")
			require.Len(t, ie.userInvoices, 3)
			assert.NotContains(t, page.body, ie.otherPaid.ID)

			draft := rowOf(page.body, "inv", ie.draft.ID)
			assert.Contains(t, draft, `data-status="draft"`)
			assert.Contains(t, draft, `<td class="number"><span class="muted">draft</span></td>`)
			assert.Contains(t, draft, `<td class="num total">¥1,500</td>`, "yen have no minor unit")

			paid := rowOf(page.body, "inv", ie.paid.ID)
			require.NotEmpty(t, ie.paid.Number)
			assert.Contains(t, paid, `<td class="number">`+html.EscapeString(ie.paid.Number)+`</td>`)
			assert.Contains(t, paid, `<span class="status paid">paid</span>`)
			assert.Contains(t, paid, `<td class="num total">$9.99</td>`)
			// Issued, due, paid: April's run paid on the day it issued.
			assert.Contains(t, paid, `<td><time datetime="2025-04-03T09:00:00Z" title="2025-04-03 09:00:00 UTC">2025-04-03</time></td>`+
				`<td><time datetime="2025-04-02T03:00:00Z" title="2025-04-02 03:00:00 UTC">2025-04-02</time></td>`+
				`<td><time datetime="2025-04-03T09:00:00Z" title="2025-04-03 09:00:00 UTC">2025-04-03</time></td>`+"\n")
			q := "user=" + linkEscape(ie.user) + "&amp;invoice=" + linkEscape(ie.paid.ID)
			assert.Contains(t, paid, `<a class="pdf" href="invoice.pdf?`+q+`">PDF</a>`)
			assert.Contains(t, paid, `<a class="html" href="invoice.html?`+q+`">HTML</a>`)

			note := rowOf(page.body, "cn", ie.note.ID)
			assert.Contains(t, note, `↳ `+html.EscapeString(ie.note.Number))
			assert.Contains(t, note, `<td class="num total">−$2.00</td>`)
			assert.Contains(t, note, `<a class="pdf" href="credit-note.pdf?`+q+`&amp;note=`+linkEscape(ie.note.ID)+`">PDF</a>`)

			void := rowOf(page.body, "inv", ie.void.ID)
			assert.Contains(t, void, `<td class="number">`+html.EscapeString(ie.void.Number)+`</td>`, "a voided invoice keeps its number")
			assert.Contains(t, void, `<span class="status void">void</span>`)
			assert.Contains(t, void, `<td>—</td>`, "never paid")
			assert.Equal(t, ie.openBeforeWaive.Number, ie.void.Number)
		})
	}
}

// TestInvoiceDocumentRoutes: the PDF, HTML and credit note routes answer
// the document whole with its type and a file name of its number, and
// change nothing.
func TestInvoiceDocumentRoutes(t *testing.T) {
	ie := newInvEnv(t, layouts[0].open, layouts[0].user)
	op := ie.as(t, "operator")
	q := func(inv billing.Invoice) string {
		return url.Values{"user": {ie.user}, "invoice": {inv.ID}}.Encode()
	}
	versions := map[string]int64{}
	for _, inv := range ie.userInvoices {
		versions[inv.ID] = inv.Version
	}
	disposition := func(h http.Header) (string, string) {
		t.Helper()
		kind, params, err := mime.ParseMediaType(h.Get("Content-Disposition"))
		require.NoError(t, err, h.Get("Content-Disposition"))
		return kind, params["filename"]
	}

	res := op.getFull("/invoice.pdf?" + q(ie.paid))
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "application/pdf", res.Header.Get("Content-Type"))
	kind, name := disposition(res.Header)
	assert.Equal(t, "inline", kind)
	assert.Equal(t, ie.paid.Number+".pdf", name)
	assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	body := readAll(t, res)
	assert.True(t, strings.HasPrefix(body, "%PDF-"), body)
	assert.Contains(t, body, "fake invoice "+ie.paid.Number+" "+ie.paid.ID)

	res = op.getFull("/invoice.html?" + q(ie.void))
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
	_, name = disposition(res.Header)
	assert.Equal(t, ie.void.Number+".html", name)
	assert.Equal(t, "<!doctype html><title>Invoice "+ie.void.Number+"</title>", readAll(t, res))
	csp := res.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "style-src 'unsafe-inline'", "the document's styles are inline")
	assert.Contains(t, csp, "default-src 'none'", "and still no script")
	assert.NotContains(t, csp, "script-src")

	res = op.getFull("/credit-note.pdf?" + q(ie.paid) + "&note=" + url.QueryEscape(ie.note.ID))
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "application/pdf", res.Header.Get("Content-Type"))
	_, name = disposition(res.Header)
	assert.Equal(t, ie.note.Number+".pdf", name)
	body = readAll(t, res)
	assert.True(t, strings.HasPrefix(body, "%PDF-"), body)
	assert.Contains(t, body, "credit note "+ie.note.Number+" of "+ie.paid.Number)

	// A draft has no number: its file is named by its ID.
	res = op.getFull("/invoice.pdf?" + q(ie.draft))
	require.Equal(t, http.StatusOK, res.StatusCode)
	_, name = disposition(res.Header)
	assert.Equal(t, "draft-"+ie.draft.ID+".pdf", name)

	// GETs change nothing.
	after, _, err := ie.store.ByUser(context.Background(), ie.user, "", 100)
	require.NoError(t, err)
	require.Len(t, after, len(versions))
	for _, inv := range after {
		assert.Equal(t, versions[inv.ID], inv.Version, "invoice %s", inv.ID)
	}

	// A renderer that fails half way: a 500 page, no half PDF.
	failing := ie.with(t, func(cfg *billingui.Config) { cfg.Invoices, cfg.Documents = ie.store, fakeDocs{fail: true} })
	r := failing.as(t, "operator").get("/invoice.pdf?" + q(ie.paid))
	assert.Equal(t, http.StatusInternalServerError, r.code)
	assert.NotContains(t, r.body, "%PDF")
	assert.Contains(t, r.body, "writing the document failed")
}

// TestInvoiceRoutesRefused: the document routes are behind the
// Authorizer, as every page is, and show a user's invoice only under that
// user: no user is 401; another user's records 403; another customer's
// invoice, an unknown one and a note of another invoice 404.
func TestInvoiceRoutesRefused(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			ie := newInvEnv(t, l.open, l.user)
			path := func(route, user string, inv billing.Invoice, note string) string {
				v := url.Values{"user": {user}, "invoice": {inv.ID}}
				if note != "" {
					v.Set("note", note)
				}
				return "/" + route + "?" + v.Encode()
			}
			unknown := ie.paid
			unknown.ID = ie.paid.ID[:len(ie.paid.ID)-4] + "zzzz"
			cases := []struct {
				role, route, user string
				inv               billing.Invoice
				note              string
				code              int
			}{
				{"", "invoice.pdf", ie.user, ie.paid, "", http.StatusUnauthorized},
				{"", "invoice.html", ie.user, ie.paid, "", http.StatusUnauthorized},
				{"", "credit-note.pdf", ie.user, ie.paid, ie.note.ID, http.StatusUnauthorized},
				// Another user asking for this user's records.
				{"user:" + ie.other, "invoice.pdf", ie.user, ie.paid, "", http.StatusForbidden},
				{"user:" + ie.other, "credit-note.pdf", ie.user, ie.paid, ie.note.ID, http.StatusForbidden},
				// Another customer's invoice under one's own user.
				{"user:" + ie.other, "invoice.pdf", ie.other, ie.paid, "", http.StatusNotFound},
				{"user:" + ie.other, "invoice.html", ie.other, ie.paid, "", http.StatusNotFound},
				{"user:" + ie.other, "credit-note.pdf", ie.other, ie.paid, ie.note.ID, http.StatusNotFound},
				{"operator", "invoice.pdf", ie.other, ie.paid, "", http.StatusNotFound},
				{"operator", "invoice.pdf", ie.user, ie.otherPaid, "", http.StatusNotFound},
				// Missing.
				{"operator", "invoice.pdf", ie.user, unknown, "", http.StatusNotFound},
				{"operator", "invoice.pdf", ie.user, billing.Invoice{ID: "in_nope"}, "", http.StatusNotFound},
				{"operator", "credit-note.pdf", ie.user, ie.paid, "cn_nope", http.StatusNotFound},
				{"operator", "credit-note.pdf", ie.user, ie.void, ie.note.ID, http.StatusNotFound}, // another invoice's note
				{"operator", "invoice.pdf", ie.user, billing.Invoice{}, "", http.StatusBadRequest},
				// Allowed: the user, support (a read), an operator.
				{"user:" + ie.user, "invoice.pdf", ie.user, ie.paid, "", http.StatusOK},
				{"user:" + ie.user, "credit-note.pdf", ie.user, ie.paid, ie.note.ID, http.StatusOK},
				{"support", "invoice.html", ie.user, ie.paid, "", http.StatusOK},
				{"operator", "invoice.pdf", ie.other, ie.otherPaid, "", http.StatusOK},
			}
			for _, c := range cases {
				p := path(c.route, c.user, c.inv, c.note)
				r := ie.as(t, c.role).get(p)
				assert.Equal(t, c.code, r.code, "%q %s", c.role, p)
				if c.code != http.StatusOK {
					assert.NotContains(t, r.body, "%PDF", "%q %s", c.role, p)
					assert.NotContains(t, r.body, "fake", "%q %s", c.role, p)
				} else {
					assert.NotContains(t, r.body, `id="error"`)
				}
			}

			// A role the Authorizer refuses ActionInvoices: the customer page
			// without the section, and the documents refused.
			noInvoices := func(r *http.Request, a billinghttp.Action) error {
				if a.Name == billingui.ActionInvoices {
					return billinghttp.ErrForbidden
				}
				return roles(r, a)
			}
			e2 := ie.with(t, func(cfg *billingui.Config) {
				cfg.Invoices, cfg.Documents, cfg.Authorizer = ie.store, fakeDocs{}, noInvoices
			})
			op := e2.as(t, "operator")
			page := op.get("/customer?user=" + url.QueryEscape(ie.user))
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.Contains(t, page.body, `id="periods"`)
			assert.NotContains(t, page.body, `id="invoices"`)
			assert.Equal(t, http.StatusForbidden, op.get(path("invoice.pdf", ie.user, ie.paid, "")).code)
		})
	}
}

// TestInvoiceSectionPages: 25 invoices list 20, newest first, and a link
// to the 5 after them, which links back to the newest; a cursor that is no
// invoice of the user is refused with a sentence.
func TestInvoiceSectionPages(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, layouts[0].open, layouts[0].user)
	store := memory.NewInvoices(e.clock)
	e = e.with(t, func(cfg *billingui.Config) { cfg.Invoices = store })
	var ids []string
	for i := range 25 {
		e.clock.Set(mar3.Add(time.Duration(i) * time.Hour))
		d, err := store.CreateDraft(ctx, &billing.Invoice{UserID: e.user, Key: fmt.Sprintf("k%02d", i), Currency: "EUR", Status: billing.InvoiceDraft,
			Lines:    []billing.InvoiceLine{{Description: "Plan", Quantity: 1, UnitAmount: int64(100 + i), Amount: int64(100 + i), Kind: billing.LinePlan}},
			Subtotal: int64(100 + i), Total: int64(100 + i), AmountDue: int64(100 + i)})
		require.NoError(t, err)
		_, err = store.Finalize(ctx, d.ID, e.clock.Now())
		require.NoError(t, err)
		ids = append([]string{d.ID}, ids...) // newest first
	}
	op := e.as(t, "operator")
	page := op.get("/customer?user=" + url.QueryEscape(e.user))
	require.Equal(t, http.StatusOK, page.code, page.body)
	var want []string
	for _, id := range ids[:20] {
		want = append(want, "inv "+id)
	}
	require.Equal(t, want, sectionRows(page.body))
	assert.Contains(t, rowOf(page.body, "inv", ids[0]), `<td class="num total">€1.24</td>`)
	assert.NotContains(t, page.body, `<a class="pdf"`, "no Documents: no links")
	assert.NotContains(t, page.body, `id="invoices-newest"`)
	more := regexp.MustCompile(`<a href="([^"]+)" rel="next" id="invoices-more">More</a>`).FindStringSubmatch(page.body)
	require.NotNil(t, more, "a link to the next invoices")

	next, _, _ := strings.Cut(html.UnescapeString(more[1]), "#") // a browser sends no fragment
	assert.Equal(t, "customer?user="+url.QueryEscape(e.user)+"&invoices="+url.QueryEscape(ids[19]), next)
	page = op.get("/" + next)
	require.Equal(t, http.StatusOK, page.code, page.body)
	want = nil
	for _, id := range ids[20:] {
		want = append(want, "inv "+id)
	}
	assert.Equal(t, want, sectionRows(page.body))
	assert.NotContains(t, page.body, `id="invoices-more"`)
	assert.Contains(t, page.body, `<a href="customer?user=`+linkEscape(e.user)+`#invoices-heading" id="invoices-newest">Newest</a>`)

	// Without Documents the routes have nothing to serve.
	assert.Equal(t, http.StatusNotFound, op.get("/invoice.pdf?"+url.Values{"user": {e.user}, "invoice": {ids[0]}}.Encode()).code)

	// The store's refusals, and an ID with a control character, which the
	// page refuses before the store is asked.
	for _, bad := range []string{"garbage", "in_x", ids[3] + "\x01"} {
		r := op.get("/customer?user=" + url.QueryEscape(e.user) + "&invoices=" + url.QueryEscape(bad))
		assert.Equal(t, http.StatusBadRequest, r.code, bad)
		assert.Contains(t, r.body, "the invoices&#39; cursor is not valid", bad)
	}
	// Another user's invoice as the cursor.
	d, err := store.CreateDraft(ctx, &billing.Invoice{UserID: e.other, Key: "o", Currency: "EUR", Status: billing.InvoiceDraft})
	require.NoError(t, err)
	r := op.get("/customer?user=" + url.QueryEscape(e.user) + "&invoices=" + url.QueryEscape(d.ID))
	assert.Equal(t, http.StatusBadRequest, r.code)
}

// TestInvoiceSectionNeedsStore: a console without an invoice store shows
// no section and serves no documents.
func TestInvoiceSectionNeedsStore(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	op := e.as(t, "operator")
	page := op.get("/customer?user=" + url.QueryEscape(e.user))
	require.Equal(t, http.StatusOK, page.code, page.body)
	assert.NotContains(t, page.body, "Invoices")
	assert.Equal(t, http.StatusNotFound, op.get("/invoice.pdf?user="+url.QueryEscape(e.user)+"&invoice=in_x").code)
}

// getFull is get returning the whole response.
func (b *browser) getFull(path string) *http.Response {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://console.test"+path, nil)
	req.Header.Set("X-Role", b.role)
	w := httptest.NewRecorder()
	b.h.ServeHTTP(w, req)
	return w.Result()
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

// TestConsoleLinksNoPDFLibrary: the console takes its documents through
// the Documents interface; it links neither package render nor the PDF
// writer.
func TestConsoleLinksNoPDFLibrary(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/dynabill/billing/billingui")
	for _, p := range deps {
		assert.False(t, strings.HasPrefix(p, "github.com/go-pdf/") || strings.HasPrefix(p, "github.com/bojanz/") ||
			p == "github.com/dynabill/billing/render", "%s linked by the console", p)
	}
}
