package billingui_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingui"
)

// with returns e with a console configured as newEnv's and then by mod.
func (e *env) with(t *testing.T, mod func(*billingui.Config)) *env {
	t.Helper()
	cfg := billingui.Config{Collector: e.c, Repository: e.repo, History: e.hist, Authorizer: roles,
		CSRFKey: []byte(strings.Repeat("k", 32)), Runs: e.runs, PageSize: 2}
	mod(&cfg)
	h, err := billingui.New(cfg)
	require.NoError(t, err)
	e2 := *e
	e2.h = h
	return &e2
}

// getWith is get with mod applied to the request.
func (b *browser) getWith(path string, mod func(*http.Request)) resp {
	req := httptest.NewRequest(http.MethodGet, "http://console.test"+path, nil)
	mod(req)
	return b.do(req)
}

// postWith is post with mod applied to the request.
func (b *browser) postWith(form url.Values, mod func(*http.Request)) resp {
	req := httptest.NewRequest(http.MethodPost, "http://console.test/action", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	mod(req)
	return b.do(req)
}

// TestHistoryPageNumbersBounded: the timeline's page number is a whole
// number from 0 on; a huge one (which crashed the handler with a slice
// out of range), a negative one or no number answers 400 with a sentence,
// one past the history's end 404.
func TestHistoryPageNumbersBounded(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			cust := "/customer?user=" + url.QueryEscape(e.user)
			for _, c := range []struct {
				page string
				code int
			}{
				{"99999999999999999999", 400}, // the issue's: a slice out of range
				{"9223372036854775807", 400}, {"184467440737095516", 400}, {"1048577", 400},
				{"-1", 400}, {"-0", 400}, {"+1", 400}, {"1.5", 400}, {"1e3", 400}, {"0x10", 400}, {" 1", 400}, {"two", 400},
				{"1", 404}, {"1048576", 404},
				{"", 200}, {"0", 200}, {"00", 200},
			} {
				page, code := c.page, c.code
				res := op.get(cust + "&page=" + url.QueryEscape(page))
				require.Equal(t, code, res.code, "page=%q: %s", page, res.body)
				switch code {
				case 400:
					assert.Contains(t, res.body, "the history&#39;s page must be a whole number from 0 to 1048576", page)
				case 404:
					assert.Contains(t, res.body, "the history of this user has 1 page(s)", page)
				default:
					assert.Contains(t, res.body, `id="timeline"`, page)
				}
			}
		})
	}
}

// FuzzConsoleQuery: whatever query the pages are given, they answer with a
// page (200, a redirect, 400 or 404), never a crash or a 500.
func FuzzConsoleQuery(f *testing.F) {
	for _, s := range []string{"page=99999999999999999999", "page=-1", "page=1", "page=0&page=9", "cursor=x&section=errors",
		"section=inflight&cursor=", "q=u1", "page=%00", "page=1e9", "page=%F0%9F%92%A5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		e := newEnv(t, layouts[0].open, layouts[0].user)
		op := e.as(t, "operator")
		for _, path := range []string{"/customer?user=" + e.user + "&", "/attention?", "/search?", "/?", "/confirm?user=" + e.user + "&op=cancel&period=" + e.errID + "&"} {
			u, err := url.Parse("http://console.test" + path + raw)
			if err != nil {
				return
			}
			req := httptest.NewRequest(http.MethodGet, "http://console.test/", nil)
			req.URL = u
			res := op.do(req)
			assert.Contains(t, []int{200, 303, 400, 404}, res.code, "%s%s: %s", path, raw, res.body)
		}
	})
}

// TestMoneyAndTimesFormatted: amounts carry the currency's symbol and
// grouping (a zero-decimal currency is not divided by 100), and every time
// its zone, in the configured location.
func TestMoneyAndTimesFormatted(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	cust := "/customer?user=" + url.QueryEscape(e.user)

	billed := e.only(t, e.user, billing.StatusError).BillingDate
	page := e.as(t, "operator").get(cust)
	require.Equal(t, http.StatusOK, page.code, page.body)
	assert.Contains(t, page.body, `<td class="num">$9.99</td>`)
	assert.Contains(t, page.body, "As of 2025-03-03 09:00:00 UTC.")
	assert.Contains(t, page.body, `<time datetime="`+billed.Format(time.RFC3339)+`" title="`+billed.Format("2006-01-02 15:04:05")+` UTC">`+billed.Format("2006-01-02")+`</time>`)
	assert.Contains(t, page.body, `<td>2025-03-03 09:00:00 UTC</td>`, "the timeline's times")
	assert.NotContains(t, page.body, `<td class="num">9.99</td>`)

	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	eur := e.with(t, func(c *billingui.Config) { c.Currency, c.Location = "EUR", ny })
	page = eur.as(t, "operator").get(cust)
	require.Equal(t, http.StatusOK, page.code, page.body)
	assert.Contains(t, page.body, `<td class="num">€9.99</td>`)
	assert.Contains(t, page.body, "As of 2025-03-03 04:00:00 EST.")
	local := billed.In(ny)
	assert.Contains(t, page.body, `<time datetime="`+local.Format(time.RFC3339)+`" title="`+local.Format("2006-01-02 15:04:05")+` EST">`+local.Format("2006-01-02")+`</time>`)
	assert.Contains(t, page.body, `<td>2025-03-03 04:00:00 EST</td>`, "the timeline's times")
	next := e.only(t, e.user, billing.StatusScheduled).BillingDate.In(ny)
	assert.Contains(t, page.body, `title="`+next.Format("2006-01-02 15:04:05")+` EDT"`, "a date after the clocks change")

	yen := e.with(t, func(c *billingui.Config) { c.Currency = "JPY" })
	page = yen.as(t, "operator").get(cust)
	assert.Contains(t, page.body, `<td class="num">¥999</td>`)

	_, err = billingui.New(billingui.Config{Collector: e.c, Repository: e.repo, History: e.hist, Authorizer: roles, Currency: "usd"})
	require.ErrorContains(t, err, `Config.Currency "usd" is not an ISO 4217 code`)
}

// TestCustomerShowsOwedAndResumeDate: the customer page shows what the
// user owes and, for a paused user, the date billing resumes rather than
// the billing date the pause skips.
func TestCustomerShowsOwedAndResumeDate(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			page := op.get("/customer?user=" + url.QueryEscape(e.user))
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.Contains(t, page.body, `id="owed">$9.99<`)

			// The other user paid; pause their next period for 2 months.
			next := e.only(t, e.other, billing.StatusScheduled)
			page = op.get("/customer?user=" + url.QueryEscape(e.other))
			assert.NotContains(t, page.body, `id="owed"`)
			assert.Contains(t, page.body, `id="next-billing"><time datetime="`+next.BillingDate.Format(time.RFC3339)+`"`)
			_, err := e.c.Pause(ctx, billing.PauseRequest{
				UserRequest: billing.UserRequest{UserID: e.other, RequestKey: "pause-2"}, Months: 2})
			require.NoError(t, err)
			resumes := next.BillingDate.AddDate(0, 2, 0)
			page = op.get("/customer?user=" + url.QueryEscape(e.other))
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.Contains(t, page.body, `id="resumes"><time datetime="`+resumes.Format(time.RFC3339)+`"`)
			assert.NotContains(t, page.body, `id="next-billing"`)

			// A month on, the pause run skips the first month: the date is
			// the same.
			e.clock.Set(next.BillingDate.Add(time.Hour))
			_, err = e.c.Run(ctx, billing.RunRequest{Kind: billing.RunPause})
			require.NoError(t, err)
			page = op.get("/customer?user=" + url.QueryEscape(e.other))
			assert.Contains(t, page.body, `id="resumes"><time datetime="`+resumes.Format(time.RFC3339)+`"`)
		})
	}
}

// TestCustomerShowsCancelAt: a user who cancelled at period end is shown
// ACTIVE with the date access ends, not ENDED while the month paid for
// runs.
func TestCustomerShowsCancelAt(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			next := e.only(t, e.other, billing.StatusScheduled) // the renewal of the month paid for
			_, err := e.c.Cancel(context.Background(), billing.CancelRequest{
				UserRequest: billing.UserRequest{UserID: e.other, RequestKey: "leave-2"}})
			require.NoError(t, err)
			page := op.get("/customer?user=" + url.QueryEscape(e.other))
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.Contains(t, page.body, `id="state">ACTIVE<`)
			assert.Contains(t, page.body, `id="cancel-at"><time datetime="`+next.BillingDate.Format(time.RFC3339)+`"`)
		})
	}
}

// cookieOf returns the console's CSRF cookie set by res, if any.
func csrfCookieOf(t *testing.T, e *env, target string) *http.Cookie {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target+"/confirm?"+url.Values{"user": {e.user}, "period": {e.errID}, "op": {"waive"}}.Encode(), nil)
	req.Header.Set("X-Role", "operator")
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	for _, c := range w.Result().Cookies() {
		if c.Name == "billingui_csrf" {
			return c
		}
	}
	t.Fatal("no CSRF cookie")
	return nil
}

// TestCSRFCookieSecureConfigurable: the cookie is Secure over TLS, and on
// plain HTTP too when the host says TLS ends in front of it.
func TestCSRFCookieSecureConfigurable(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	c := csrfCookieOf(t, e, "http://console.test")
	assert.False(t, c.Secure, "plain HTTP, nothing said")
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	c = csrfCookieOf(t, e, "https://console.test")
	assert.True(t, c.Secure, "TLS seen by the handler")
	proxied := e.with(t, func(c *billingui.Config) { c.SecureCookies = true })
	c = csrfCookieOf(t, proxied, "http://console.test")
	assert.True(t, c.Secure, "TLS ended by a proxy")
}

// TestCSRFTokenExpires: a form's token is refused once CSRFTokenTTL
// (12 hours by default) has passed since its page was rendered.
func TestCSRFTokenExpires(t *testing.T) {
	for _, c := range []struct {
		ttl       time.Duration
		fresh, at time.Duration
	}{{0, 11 * time.Hour, 12*time.Hour + time.Second}, {time.Hour, 59 * time.Minute, time.Hour + time.Second}} {
		e := newEnv(t, layouts[0].open, layouts[0].user).with(t, func(cfg *billingui.Config) { cfg.CSRFTokenTTL = c.ttl })
		op := e.as(t, "operator")
		form, _ := op.confirmForm(e.user, e.errID, "waive")
		start := e.clock.Now()
		e.clock.Set(start.Add(c.at))
		res := op.post(form)
		require.Equal(t, http.StatusForbidden, res.code, "ttl %s: a token %s old", c.ttl, c.at)
		assert.Contains(t, res.body, "reload the page")
		assert.Equal(t, billing.StatusError, e.only(t, e.user, billing.StatusError).Status, "nothing waived")

		e.clock.Set(start)
		form, _ = op.confirmForm(e.user, e.errID, "waive")
		e.clock.Set(start.Add(c.fresh))
		res = op.post(form)
		require.Equal(t, http.StatusSeeOther, res.code, "ttl %s: a token %s old: %s", c.ttl, c.fresh, res.body)
		e.only(t, e.user, billing.StatusWaived)
	}
}

// TestCSRFTokenBoundToSession: with Config.Session, a token rendered for
// one operator's session is refused in another's, in the same browser.
func TestCSRFTokenBoundToSession(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user).with(t, func(c *billingui.Config) {
		c.Session = func(r *http.Request) string { return r.Header.Get("X-Session") }
	})
	op := e.as(t, "operator")
	withSession := func(s string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("X-Session", s) }
	}
	page := op.getWith("/confirm?"+url.Values{"user": {e.user}, "period": {e.errID}, "op": {"waive"}}.Encode(), withSession("alice-1"))
	require.Equal(t, http.StatusOK, page.code, page.body)
	form := url.Values{"csrf": {csrfInput.FindStringSubmatch(page.body)[1]}, "op": {"waive"}, "user": {e.user}, "period": {e.errID}, "reason": {"test: waive"}}
	if k := keyInput.FindStringSubmatch(page.body); k != nil {
		form.Set("key", html.UnescapeString(k[1]))
	}
	for _, other := range []string{"", "mallory-7", "alice-2"} {
		res := op.postWith(form, withSession(other))
		require.Equal(t, http.StatusForbidden, res.code, "session %q", other)
		assert.Equal(t, billing.StatusError, e.only(t, e.user, billing.StatusError).Status, "nothing waived")
	}
	res := op.postWith(form, withSession("alice-1"))
	require.Equal(t, http.StatusSeeOther, res.code, res.body)
	e.only(t, e.user, billing.StatusWaived)
}

// TestAssetsDirectoryNotListed: /assets/ answers 404 instead of listing
// the directory; its files are served.
func TestAssetsDirectoryNotListed(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	op := e.as(t, "operator")
	for _, p := range []string{"/assets/", "/assets/%2e/", "/assets/.", "/assets//"} {
		res := op.get(p)
		if res.code/100 == 3 { // the mux's cleaned path: a redirect to /assets/
			assert.Equal(t, "/assets/", res.loc, p)
			continue
		}
		assert.Equal(t, http.StatusNotFound, res.code, p)
		assert.NotContains(t, res.body, `href="style.css"`, p)
	}
	res := op.get("/assets/style.css")
	require.Equal(t, http.StatusOK, res.code)
	assert.Contains(t, res.body, "billingui: the console's only style sheet")
}

// attrs are a page's tags: an ID in an attribute is data, not shown.
var attrs = regexp.MustCompile(`<[^>]*>`)

// TestUserIDFormatCharactersShown: a user ID with bidirectional overrides,
// isolates and zero-width characters is shown with each of them as a
// marked escape, never as the character the browser would interpret: the
// ID does not render as another one.
func TestUserIDFormatCharactersShown(t *testing.T) {
	user := "u1\u202Egnp.exe\u2066x\u2069\u200By\uFEFF"
	e := newEnv(t, layouts[0].open, user)
	op := e.as(t, "operator")
	shown := `<bdi class="id">u1<span class="hidden-char" title="\u202E">\u202E</span>gnp.exe<span class="hidden-char" title="\u2066">\u2066</span>x<span class="hidden-char" title="\u2069">\u2069</span><span class="hidden-char" title="\u200B">\u200B</span>y<span class="hidden-char" title="\uFEFF">\uFEFF</span></bdi>`
	pages := map[string]string{
		"customer":  "/customer?user=" + url.QueryEscape(user),
		"attention": "/attention",
		"confirm":   "/confirm?" + url.Values{"user": {user}, "period": {e.errID}, "op": {"waive"}}.Encode(),
		"nothing":   "/search?q=" + url.QueryEscape(user+"nope"),
	}
	for name, p := range pages {
		res := op.get(p)
		require.Equal(t, http.StatusOK, res.code, "%s: %s", name, res.body)
		if name == "nothing" {
			assert.Contains(t, res.body, strings.TrimSuffix(shown, "</bdi>")+"nope</bdi>", name)
		} else {
			assert.Contains(t, res.body, shown, name)
		}
		text := attrs.ReplaceAllString(res.body, "<>")
		for _, r := range "\u202E\u2066\u2069\u200B\uFEFF" {
			assert.NotContains(t, text, string(r), "%s shows U+%04X as itself", name, r)
		}
	}
	res := op.get(pages["customer"])
	assert.Contains(t, res.body, `<title>Customer u1\u202Egnp.exe\u2066x\u2069\u200By\uFEFF · billing console</title>`)
}
