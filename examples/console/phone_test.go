package main

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

// TestBrowserHugePageNumberAnswers400: a page number of the history that
// is no number the page takes (too large for any integer, negative, not a
// number) answers 400 with a sentence, and one past the history's end 404;
// none drops the connection.
func TestBrowserHugePageNumberAnswers400(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	user := errorUsers(t, d)[0].UserID
	for _, c := range []struct{ page, title, says string }{
		{"99999999999999999999", "Bad Request", "page must be a whole number from 0 to"},
		{"9223372036854775807", "Bad Request", "page must be a whole number from 0 to"},
		{"-1", "Bad Request", "page must be a whole number from 0 to"},
		{"two", "Bad Request", "page must be a whole number from 0 to"},
		{"1000", "Not Found", "is past its end"},
	} {
		do(t, ctx, chromedp.Navigate(customerURL(base, user)+"&page="+url.QueryEscape(c.page)), visible("#error"))
		require.Equal(t, c.title+" · billing console", title(t, ctx), c.page)
		require.Contains(t, text(t, ctx, "#error"), c.says, c.page)
	}
	do(t, ctx, chromedp.Navigate(customerURL(base, user)+"&page=0"), visible("#timeline"))
	require.Zero(t, count(t, ctx, "#error"))
}

var (
	phoneOnce sync.Once
	phoneData *demo
	phoneUser string
	phoneErr  error
)

// phoneDemo is a simulation of its own (the tests that use it move its
// clock): a user with a long ID, a year and more of monthly periods, some
// declined with a long reason, among a few simulated users.
func phoneDemo(t *testing.T) (*demo, string) {
	t.Helper()
	phoneOnce.Do(func() {
		ctx := context.Background()
		d, err := build(ctx, options{Users: 40, Months: 2, Seed: 9, DeclineRate: 0.3})
		if err != nil {
			phoneErr = err
			return
		}
		d.csrfKey = []byte(strings.Repeat("p", 32))
		user := "acct-" + strings.Repeat("7f3a9c0e5b2d4f61", 8) + "#subscription#PLUS-MONTHLY"
		reason := "do_not_honor: the_issuing_bank_refused_the_charge_without_giving_a_reason_ask_the_customer_to_call_it"
		d.result.Provider.SetUser(user, billingtest.Succeeded(), billingtest.Succeeded(), billingtest.Declined(reason, true),
			billingtest.Succeeded(), billingtest.Succeeded(), billingtest.Declined(reason, true), billingtest.Succeeded(),
			billingtest.Succeeded(), billingtest.Succeeded(), billingtest.Succeeded(), billingtest.Succeeded(),
			billingtest.Declined(reason, true))
		now := d.clock.Now()
		if _, err := d.collector.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "phone", UserID: user, Tier: "Plus:v2",
			FirstBillingDate: now.Add(time.Hour)}); err != nil {
			phoneErr = err
			return
		}
		for i := range 15 {
			d.clock.Set(now.AddDate(0, i, 0).Add(2 * time.Hour))
			for _, k := range []billing.RunKind{billing.RunScheduled, billing.RunRetry, billing.RunPause} {
				rep, err := d.collector.Run(ctx, billing.RunRequest{Kind: k})
				if err != nil {
					phoneErr = err
					return
				}
				d.runs.Add(rep)
			}
		}
		phoneData, phoneUser = d, user
	})
	require.NoError(t, phoneErr)
	return phoneData, phoneUser
}

// TestBrowserPagesFitPhone: every page, at a phone's 390 px, is no wider
// than the screen (a wide table scrolls inside its own box): Today,
// Attention, Search, a customer with many periods and long IDs, a
// confirmation page and the error page.
func TestBrowserPagesFitPhone(t *testing.T) {
	d, user := phoneDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	do(t, ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	recs, err := d.repo.ListByUser(context.Background(), user)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(recs), 12, "a year of periods")
	last := recs[len(recs)-1]
	pages := []struct{ name, url, wait string }{
		{"today", base, "#revenue"},
		{"attention", base + "attention", "#errors"},
		{"search", base + "search?q=" + url.QueryEscape(last.SubscriptionID), "#matches"},
		{"customer", customerURL(base, user), "#timeline"},
		{"confirm", base + "confirm?" + url.Values{"user": {user}, "period": {last.SubscriptionID}, "op": {"cancel"}}.Encode(), "#confirm"},
		{"error", customerURL(base, user) + "&page=99999999999999999999", "#error"},
	}
	for _, p := range pages {
		do(t, ctx, chromedp.Navigate(p.url), visible(p.wait))
		width, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.documentElement.scrollWidth"))
		require.NoError(t, err)
		assert.LessOrEqual(t, width, 390, "%s (%s) scrolls sideways at 390 px", p.name, p.url)
		// A page wider than the screen would also have widened the
		// mobile layout viewport.
		inner, err := chromedp.Run(ctx, chromedp.Evaluate[int]("window.innerWidth"))
		require.NoError(t, err)
		assert.Equal(t, 390, inner, "%s: the phone's viewport", p.name)
	}
	require.Contains(t, text(t, ctx, "#error"), "page must be a whole number")
}

// TestBrowserFormatCharactersInUserIDShown: a user ID with a right-to-left
// override reads as what it is (the override shown as \u202E), not as the
// reordered ID the browser would display.
func TestBrowserFormatCharactersInUserIDShown(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	user := "invoice-\u202Efdp.exe"
	_, err := d.collector.Subscribe(context.Background(), billing.SubscribeRequest{RequestKey: "bidi", UserID: user, Tier: "Plus:v2"})
	require.NoError(t, err)
	do(t, ctx, chromedp.Navigate(customerURL(base, user)), visible("#timeline"))
	require.Equal(t, `invoice-\u202Efdp.exe`, text(t, ctx, "#user"))
	require.Equal(t, 1, count(t, ctx, "#user bdi.id span.hidden-char"))
	require.Equal(t, `Customer invoice-\u202Efdp.exe · billing console`, title(t, ctx))
}
