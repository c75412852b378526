package billingui_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/billingui"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
)

// layouts are the two in-memory layouts every test runs on, with a user of
// each (the single table's is one subscription of an account).
var layouts = []struct {
	name string
	open func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History)
	user string
}{
	{"memory-legacy", func(t *testing.T, _ billing.Clock) (billing.Repository, billing.History) {
		s := billingtest.NewMemoryStore(t, memory.Options{})
		return s.Repository(), s.History()
	}, "u1"},
	{"memory-single", func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History) {
		s := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock})
		return s.Repository(), s.History()
	}, layout.SubscriptionRef{AccountID: "acct-1", SubscriptionID: "S1", SKU: "PLUS"}.UserID()},
}

var mar3 = time.Date(2025, 3, 3, 9, 0, 0, 0, time.UTC)

// env is a console over a store holding one user whose first period was
// declined ("insufficient funds"), and a second user, "other", who paid.
type env struct {
	h      http.Handler
	c      *billing.Collector
	repo   billing.Repository
	hist   billing.History
	clock  *billingtest.Clock
	pay    *billingtest.Provider
	locker *billingtest.Locker
	user   string
	other  string
	errID  string // the user's declined period
	runs   *billingui.RunLog
}

// mods change the collector's configuration before it is built.
func newEnv(t *testing.T, open func(*testing.T, billing.Clock) (billing.Repository, billing.History), user string, mods ...func(*billing.Config)) *env {
	t.Helper()
	ctx := context.Background()
	clock := billingtest.NewClock(mar3.Add(-48 * time.Hour))
	repo, hist := open(t, clock)
	e := &env{repo: repo, hist: hist, clock: clock, user: user, runs: billingui.NewRunLog(0),
		pay:    billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}),
		locker: billingtest.NewLocker(clock, time.Minute)}
	e.other = strings.Replace(user, "1", "2", 1)
	cfg := billing.Config{Repository: repo, History: hist, Locker: e.locker, Provider: e.pay, Clock: clock,
		Prices: billing.PriceListMap{"Plus:v2": billing.MustParseAmount("9.99")}}
	for _, mod := range mods {
		mod(&cfg)
	}
	c, err := billing.NewCollector(cfg)
	require.NoError(t, err)
	e.c = c
	for i, u := range []string{user, e.other} {
		_, err := c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-" + u, UserID: u, Tier: "Plus:v2",
			FirstBillingDate: mar3.Add(time.Duration(i-30) * time.Hour)})
		require.NoError(t, err)
	}
	e.pay.SetUser(user, billingtest.Declined("insufficient funds", true))
	clock.Set(mar3)
	rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Collected)
	require.Equal(t, 1, rep.Declined)
	e.runs.Add(rep)
	e.errID = e.only(t, user, billing.StatusError).SubscriptionID
	h, err := billingui.New(billingui.Config{Collector: c, Repository: repo, History: hist, Authorizer: roles,
		CSRFKey: []byte(strings.Repeat("k", 32)), Runs: e.runs, PageSize: 2})
	require.NoError(t, err)
	e.h = h
	return e
}

// only returns the user's one record in status st.
func (e *env) only(t *testing.T, user string, st billing.Status) billing.Period {
	t.Helper()
	recs, err := e.repo.ListByUser(context.Background(), user)
	require.NoError(t, err)
	var found []billing.Period
	for _, s := range recs {
		if s.Status == st {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "records of %s: %+v", user, recs)
	return found[0]
}

// roles is the tests' Authorizer, from the X-Role header: "operator" may do
// everything, "support" may read everything, "user:ID" is an end user
// (billinghttp.RoleAuthorizer's rule), anything else is unauthenticated.
func roles(r *http.Request, a billinghttp.Action) error {
	role := r.Header.Get("X-Role")
	switch {
	case role == "support":
		if a.Write {
			return billinghttp.ErrForbidden
		}
		return nil
	case role == "operator", strings.HasPrefix(role, "user:"):
		return billinghttp.RoleAuthorizer(func(*http.Request) (string, bool, error) {
			return strings.TrimPrefix(role, "user:"), role == "operator", nil
		})(r, a)
	}
	return billinghttp.ErrUnauthenticated
}

// browser keeps the cookies of one role's requests.
type browser struct {
	t       *testing.T
	h       http.Handler
	role    string
	cookies []*http.Cookie
}

func (e *env) as(t *testing.T, role string) *browser { return &browser{t: t, h: e.h, role: role} }

type resp struct {
	code int
	body string
	loc  string
}

func (b *browser) do(req *http.Request) resp {
	b.t.Helper()
	req.Header.Set("X-Role", b.role)
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	w := httptest.NewRecorder()
	b.h.ServeHTTP(w, req)
	res := w.Result()
	b.cookies = append(b.cookies, res.Cookies()...)
	body, _ := io.ReadAll(res.Body)
	return resp{code: res.StatusCode, body: string(body), loc: res.Header.Get("Location")}
}

func (b *browser) get(path string) resp {
	return b.do(httptest.NewRequest(http.MethodGet, "http://console.test"+path, nil))
}

// post sends a form the way the console's own page does (same origin).
func (b *browser) post(form url.Values) resp {
	req := httptest.NewRequest(http.MethodPost, "http://console.test/action", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}

var (
	csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	keyInput  = regexp.MustCompile(`name="key" value="([^"]+)"`)
)

// confirmAndPost opens op's confirmation page for the period and posts its
// form with extra fields; a confirmation page refused is returned as is.
func (b *browser) confirmAndPost(user, period, op string, extra url.Values) resp {
	b.t.Helper()
	form, page := b.confirmForm(user, period, op)
	if page.code != http.StatusOK {
		return page
	}
	for k, v := range extra {
		form[k] = v
	}
	return b.post(form)
}

// confirmForm opens op's confirmation page for the period and returns the
// fields its form posts (its token and request key), with the page.
func (b *browser) confirmForm(user, period, op string) (url.Values, resp) {
	b.t.Helper()
	page := b.get("/confirm?" + url.Values{"user": {user}, "period": {period}, "op": {op}}.Encode())
	if page.code != http.StatusOK {
		return nil, page
	}
	m := csrfInput.FindStringSubmatch(page.body)
	require.NotNil(b.t, m, page.body)
	// The reason an operator types on the confirmation page.
	form := url.Values{"csrf": {m[1]}, "op": {op}, "user": {user}, "period": {period}, "reason": {"test: " + op}}
	if k := keyInput.FindStringSubmatch(page.body); k != nil {
		form.Set("key", html.UnescapeString(k[1]))
	}
	return form, page
}

// token returns a valid CSRF token of this browser.
func (b *browser) token(user, period string) string {
	b.t.Helper()
	page := b.get("/confirm?" + url.Values{"user": {user}, "period": {period}, "op": {"cancel"}}.Encode())
	require.Equal(b.t, http.StatusOK, page.code, page.body)
	return csrfInput.FindStringSubmatch(page.body)[1]
}

var (
	regexpCustomer = regexp.MustCompile(`<a class="customer" href="customer\?user=([^"]+)"`)
	regexpMore     = regexp.MustCompile(`<a href="(attention\?section=errors&amp;cursor=[^"]+)">More`)
)

// errRow returns the periods table's row of period id.
func errRow(body, id string) string {
	i := strings.Index(body, `<tr id="p-`+id+`"`)
	if i < 0 {
		return ""
	}
	row := body[i:]
	if j := strings.Index(row, "</tr>"); j >= 0 {
		row = row[:j]
	}
	return row
}

// linkEscape is a user ID as html/template writes it in a link's query.
func linkEscape(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
