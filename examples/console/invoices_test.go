package main

import (
	"context"
	"mime"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

// invoicedUser returns a user of the sample data whose invoices include
// paid ones and a void one (a waived decline), with those invoices,
// newest first.
func invoicedUser(t *testing.T, d *demo) (string, []billing.Invoice) {
	t.Helper()
	for _, u := range d.result.Users {
		page, _, err := d.invoices.ByUser(context.Background(), u.ID, "", 100)
		require.NoError(t, err)
		var paid, void bool
		for _, inv := range page {
			paid = paid || inv.Status == billing.InvoicePaid
			void = void || inv.Status == billing.InvoiceVoid
		}
		if paid && void {
			return u.ID, page
		}
	}
	t.Fatal("no sample user with a paid and a void invoice")
	return "", nil
}

// invoiceRow is the CSS selector of an invoice's row (its ID has dots).
func invoiceRow(id string) string { return `#invoices tr[id="inv-` + id + `"]` }

// TestBrowserInvoicePDF opens a customer page of the sample data, finds
// the invoices table with the store's invoices, newest first, clicks a
// paid invoice's PDF link and receives a PDF (its Content-Type,
// Content-Disposition and first bytes as the browser got them), then
// opens its HTML, whose inline styles apply.
func TestBrowserInvoicePDF(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	user, invs := invoicedUser(t, d)
	do(t, ctx, chromedp.Navigate(customerURL(base, user)), visible("#invoices"))
	require.Equal(t, "Invoices", text(t, ctx, "#invoices-heading"))

	statuses, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#invoices tr.invoice")].map(r => r.id.slice(4) + " " + r.dataset.status)`))
	require.NoError(t, err)
	var want []string
	for _, inv := range invs[:min(len(invs), 20)] {
		want = append(want, inv.ID+" "+string(inv.Status))
	}
	require.Equal(t, want, statuses, "the store's invoices, newest first")

	var paid billing.Invoice
	for _, inv := range invs {
		if inv.Status == billing.InvoicePaid {
			paid = inv
			break
		}
	}
	row := text(t, ctx, invoiceRow(paid.ID))
	assert.Contains(t, row, paid.Number)
	assert.Contains(t, row, "$"+paid.FormatAmount(paid.Total))
	assert.Contains(t, row, paid.PaidAt.UTC().Format("2006-01-02"))

	// The PDF as the browser receives it when the link is clicked: the
	// response is held at the Fetch domain's response stage and read.
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	do(t, ctx,
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
				{URLPattern: "*/invoice.pdf?*", RequestStage: fetch.RequestStageResponse}}})
			return err
		}),
		click(invoiceRow(paid.ID)+" a.pdf"))
	var (
		got     *fetch.EventRequestPaused
		body    []byte
		headers = map[string]string{}
	)
	for ev, err := range paused {
		require.NoError(t, err)
		got = &ev
		res, err := chromedp.Call(ctx, fetch.GetResponseBody, fetch.GetResponseBodyParams{RequestID: ev.RequestID})
		require.NoError(t, err)
		body = res.Body
		_, err = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		require.NoError(t, err)
		break
	}
	require.NotNil(t, got, "the click requested the PDF")
	_, err = chromedp.Call(ctx, fetch.Disable, cdp.Empty{})
	require.NoError(t, err)
	q, err := url.ParseQuery(got.Request.URL[strings.Index(got.Request.URL, "?")+1:])
	require.NoError(t, err)
	assert.Equal(t, url.Values{"user": {user}, "invoice": {paid.ID}}, q)
	assert.EqualValues(t, 200, got.ResponseStatusCode)
	for _, h := range got.ResponseHeaders {
		headers[strings.ToLower(h.Name)] = h.Value
	}
	assert.Equal(t, "application/pdf", headers["content-type"])
	kind, params, err := mime.ParseMediaType(headers["content-disposition"])
	require.NoError(t, err, headers["content-disposition"])
	assert.Equal(t, "inline", kind)
	assert.Equal(t, paid.Number+".pdf", params["filename"])
	require.Greater(t, len(body), 500, "a whole document")
	assert.Equal(t, "%PDF-", string(body[:5]))
	assert.True(t, strings.HasSuffix(strings.TrimRight(string(body), "\r\n"), "%%EOF"), "the PDF's end")

	// The HTML: its styles are inline, which the document's own policy
	// allows (the console's forbids them).
	do(t, ctx, chromedp.Navigate(customerURL(base, user)), visible("#invoices"),
		click(invoiceRow(paid.ID)+" a.html"), visible("main.doc"))
	assert.Equal(t, "Invoice "+paid.Number+" · "+demoSeller.Name, title(t, ctx))
	width, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("main.doc")).maxWidth`))
	require.NoError(t, err)
	assert.Equal(t, "780px", width, "the document's inline styles apply")
}
