package main

// Browser tests: the console's real pages in a headless Chromium (Debian's
// chromium package; .ci/run installs it). Under CI=true they fail without
// it; elsewhere they skip. With UPDATE_SCREENSHOTS=1 they write the
// screenshots of docs/console-*.png.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

var (
	demoOnce sync.Once
	demoData *demo
	demoErr  error
)

// sharedDemo is one simulation for every test of the package (each test
// acts on users of its own).
func sharedDemo(t *testing.T) *demo {
	t.Helper()
	demoOnce.Do(func() {
		demoData, demoErr = build(context.Background(), options{Users: 300, Months: 2, Seed: 7, DeclineRate: 0.35})
		if demoErr == nil {
			demoData.csrfKey = []byte(strings.Repeat("s", 32))
		}
	})
	require.NoError(t, demoErr)
	return demoData
}

// serve starts the example's server with every request given role and
// returns the console's base URL.
func serve(t *testing.T, d *demo, role string) string {
	t.Helper()
	console, err := d.console(role)
	require.NoError(t, err)
	srv := httptest.NewServer(mount(console))
	t.Cleanup(srv.Close)
	return srv.URL + "/billing/"
}

// browser starts a headless Chromium for one test, with flags extra.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/chromium"); serr == nil {
			path, err = "/usr/bin/chromium", nil
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no chromium for the browser tests (apt-get install chromium): %v", err)
		}
		t.Skipf("no chromium: %v", err)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1024),
	}, extra...)...)
	browserCtx, cancelCtx := chromedp.NewContext(alloc)
	require.NoError(t, chromedp.Do(browserCtx)) // starts the browser, for the test's life
	ctx, cancelTimeout := context.WithTimeout(browserCtx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// screenshot writes docs/console-name.png when UPDATE_SCREENSHOTS=1.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("UPDATE_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", "console-"+name+".png"), png, 0o644))
}

// errorUsers returns users with an ERROR period and no attempt in flight,
// read from the status index.
func errorUsers(t *testing.T, d *demo) []billing.Period {
	t.Helper()
	p, err := d.repo.QueryStatus(context.Background(), billing.StatusQuery{Status: billing.StatusError, Limit: 1000})
	require.NoError(t, err)
	var out []billing.Period
	for _, s := range p.Items {
		if !s.InFlight() {
			out = append(out, s)
		}
	}
	require.GreaterOrEqual(t, len(out), 4, "the simulation left ERROR records")
	return out
}

func customerURL(base, user string) string { return base + "customer?user=" + url.QueryEscape(user) }

// text returns the text of the first element sel (a CSS selector) finds.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return s
}

// count returns the number of elements sel finds (0 when none).
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	require.NoError(t, err, sel)
	return n
}

func title(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	return s
}

// do runs steps in the test's tab.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}
func click(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }

func TestBrowserTodayPage(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(base), visible("#revenue"))
	require.Equal(t, "Today · billing console", title(t, ctx))
	runs := text(t, ctx, "#runs")
	for _, kind := range []string{"scheduled", "retry", "pause"} {
		require.Contains(t, runs, kind)
	}
	require.Equal(t, 30, count(t, ctx, "#revenue rect.bar"))
	tall, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("#revenue rect.bar")].filter(r => parseFloat(r.getAttribute("height")) > 0).length`))
	require.NoError(t, err)
	require.Greater(t, tall, 5, "days with revenue in the last 30")
	require.NotEqual(t, "$0.00", text(t, ctx, "#revenue-total"))
	screenshot(t, ctx, "today")
}

func TestBrowserAttentionPage(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(base+"attention"), visible("#errors"))
	require.Equal(t, "Attention · billing console", title(t, ctx))
	require.Greater(t, count(t, ctx, "#errors a.customer"), 3)
	require.Contains(t, text(t, ctx, "#reasons"), "insufficient funds")
	screenshot(t, ctx, "attention")
}

// TestBrowserDeclineToCustomer follows a decline from Attention to its
// customer's page.
func TestBrowserDeclineToCustomer(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(base+"attention"), visible("#errors"))
	linked := text(t, ctx, "#errors a.customer")
	reason := text(t, ctx, "#errors tr:nth-child(2) td:nth-child(2)")
	do(t, ctx, click("#errors a.customer"), visible("#timeline"))
	require.Equal(t, linked, text(t, ctx, "#user"))
	require.GreaterOrEqual(t, count(t, ctx, `#periods tr[data-status="ERROR"]`), 1)
	require.Contains(t, text(t, ctx, "#periods"), reason)
	require.Contains(t, text(t, ctx, "#timeline"), "payment_declined")
	screenshot(t, ctx, "customer")
}

// act opens the customer page of s's user, presses op's button on s's row,
// types a reason and confirms.
func act(t *testing.T, ctx context.Context, base string, s billing.Period, op string) {
	t.Helper()
	do(t, ctx,
		chromedp.Navigate(customerURL(base, s.UserID)), visible("#periods"),
		click("#p-"+s.SubscriptionID+" button.op-"+op),
		visible("#confirm"),
		chromedp.SetValue(chromedp.CSS("#reason"), "browser test: "+op),
		click("#do"),
		visible("#timeline"),
	)
}

func TestBrowserOperatorRetry(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	s := errorUsers(t, d)[0]
	d.result.Provider.SetUser(s.UserID, billingtest.Succeeded())
	act(t, ctx, base, s, "retry")
	require.Contains(t, text(t, ctx, "#done"), "Retry now done: collected")
	require.Contains(t, text(t, ctx, "#timeline tr:nth-child(2)"), "ERROR → COMPLETED")
	status, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#p-"+s.SubscriptionID), "data-status"))
	require.NoError(t, err)
	require.Equal(t, "COMPLETED", status.Value)
	got, err := d.repo.GetByID(context.Background(), s.SubscriptionID)
	require.NoError(t, err)
	require.Equal(t, billing.StatusCompleted, got.Status)
}

// TestBrowserOperatorWaiveWithoutJavaScript waives with scripts disabled:
// the console needs none.
func TestBrowserOperatorWaiveWithoutJavaScript(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	s := errorUsers(t, d)[1]
	do(t, ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	act(t, ctx, base, s, "waive")
	require.Contains(t, text(t, ctx, "#done"), "Waive done")
	require.Contains(t, text(t, ctx, "#timeline"), "ERROR → WAIVED")
	got, err := d.repo.GetByID(context.Background(), s.SubscriptionID)
	require.NoError(t, err)
	require.Equal(t, billing.StatusWaived, got.Status)
}

// TestBrowserReadOnlyRoleHasNoActions: the support role sees the same
// customer without a single action button, and a confirmation page opened
// by hand is refused.
func TestBrowserReadOnlyRoleHasNoActions(t *testing.T) {
	d := sharedDemo(t)
	ctx := browser(t)
	s := errorUsers(t, d)[2]
	op, support := serve(t, d, "operator"), serve(t, d, "support")
	do(t, ctx, chromedp.Navigate(customerURL(op, s.UserID)), visible("#periods"))
	require.Equal(t, 1, count(t, ctx, "#p-"+s.SubscriptionID+" button.op-retry"))
	require.Equal(t, 1, count(t, ctx, "#p-"+s.SubscriptionID+" button.op-waive"))
	do(t, ctx, chromedp.Navigate(customerURL(support, s.UserID)), visible("#periods"))
	require.Equal(t, text(t, ctx, "#user"), s.UserID)
	require.Equal(t, 0, count(t, ctx, "#periods button"))
	require.Equal(t, 0, count(t, ctx, "form[action=confirm]"))
	do(t, ctx, chromedp.Navigate(support+"confirm?"+url.Values{"user": {s.UserID}, "period": {s.SubscriptionID}, "op": {"waive"}}.Encode()),
		visible("#error"))
	require.Equal(t, "Forbidden · billing console", title(t, ctx))
}

// TestBrowserForgedCrossSitePostRefused: a page on another site posts the
// action form to the console; the browser's own cookies may go with it,
// and it is refused.
func TestBrowserForgedCrossSitePostRefused(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	s := errorUsers(t, d)[3]
	// The operator has used the console: the browser holds its cookie.
	do(t, ctx, chromedp.Navigate(customerURL(base, s.UserID)), visible("#periods"))
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%saction">
<input name="op" value="waive"><input name="user" value="%s"><input name="period" value="%s"><input name="csrf" value="guess">
<button id="go">win a prize</button></form>`, base, s.UserID, s.SubscriptionID)
	}))
	defer evil.Close()
	// Another site: localhost, where the console is on 127.0.0.1.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	do(t, ctx, chromedp.Navigate(evilURL), visible("#go"), click("#go"), visible("#error"))
	require.Contains(t, text(t, ctx, "#error"), "cross-origin request refused")
	require.Equal(t, "Forbidden · billing console", title(t, ctx))
	got, err := d.repo.GetByID(context.Background(), s.SubscriptionID)
	require.NoError(t, err)
	require.Equal(t, billing.StatusError, got.Status, "nothing waived")
}

// TestBrowserMarkupInUserIDRendersAsText: a user ID carrying markup is
// searched for, shown and linked as text.
func TestBrowserMarkupInUserIDRendersAsText(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	user := `<img src=x onerror="document.title='pwned'"><b>eve</b>`
	_, err := d.collector.Subscribe(context.Background(), billing.SubscribeRequest{RequestKey: "markup", UserID: user, Tier: "Plus:v2"})
	require.NoError(t, err)
	do(t, ctx, chromedp.Navigate(base), visible("header input[name=q]"),
		chromedp.SendKeys(chromedp.CSS("header input[name=q]"), user+"\n"),
		visible("#timeline"))
	require.Equal(t, user, text(t, ctx, "#user"))
	require.Zero(t, count(t, ctx, "main img"))
	require.Zero(t, count(t, ctx, "#user b"))
	// The onerror handler would have made the title "pwned".
	require.Equal(t, "Customer "+user+" · billing console", title(t, ctx))
}

// TestBrowserSearchByTransaction finds a period by its processor
// transaction ID and follows it to the customer.
func TestBrowserSearchByTransaction(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	users := errorUsers(t, d)
	s := users[len(users)-1]
	require.NotEmpty(t, s.TransactionID)
	do(t, ctx, chromedp.Navigate(base+"search"), visible("main input[name=q]"),
		chromedp.SendKeys(chromedp.CSS("main input[name=q]"), s.TransactionID),
		chromedp.Submit(chromedp.CSS("main input[name=q]")),
		visible("#matches"))
	require.Contains(t, text(t, ctx, "#matches"), s.SubscriptionID)
	screenshot(t, ctx, "search")
	do(t, ctx, click("#matches a.customer"), visible("#timeline"))
	require.Equal(t, s.UserID, text(t, ctx, "#user"))
}

// TestBrowserResubmitAfterBack: a cancel confirmed, then the back button
// and the same form submitted again, answers that it was already done: no
// error page, and one history row of the cancel per period.
func TestBrowserResubmitAfterBack(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	// Without the back-forward cache the back button loads the
	// confirmation page again from the console (chromedp loses track of a
	// page restored from that cache); either way its form has the same key.
	ctx := browser(t, chromedp.Flag("disable-features", "BackForwardCache"))
	users := errorUsers(t, d)
	require.GreaterOrEqual(t, len(users), 6)
	s := users[4] // 0 to 3 and the last are other tests'
	act(t, ctx, base, s, "cancel")
	require.Contains(t, text(t, ctx, "#done"), "Cancel done")
	require.Zero(t, count(t, ctx, "#repeated"))

	do(t, ctx, chromedp.NavigateBack(), visible("#confirm"),
		chromedp.SetValue(chromedp.CSS("#reason"), "browser test: cancel"), click("#do"), visible("#timeline"))
	require.Zero(t, count(t, ctx, "#error"), "no error page")
	require.Equal(t, "Customer "+s.UserID+" · billing console", title(t, ctx))
	require.Contains(t, text(t, ctx, "#done"), "Cancel done")
	require.Contains(t, text(t, ctx, "#repeated"), "already done")

	rows, err := d.hist.ListByUser(context.Background(), s.UserID)
	require.NoError(t, err)
	cancelled := map[string]int{}
	for _, r := range rows {
		if r.Status == billing.StatusCancelled {
			cancelled[r.SubscriptionID]++
		}
	}
	require.Contains(t, cancelled, s.SubscriptionID)
	for id, n := range cancelled {
		require.Equal(t, 1, n, "history rows of the cancel of %s", id)
	}
	got, err := d.repo.GetByID(context.Background(), s.SubscriptionID)
	require.NoError(t, err)
	require.Equal(t, billing.StatusCancelled, got.Status)
}

// TestBrowserTodayCollectedIsTheStoresSum opens Today over 5,000 users
// and three months (more records than any view reads) and checks that
// the collected figures are the store's true sums: those of the amounts
// of the COMPLETED records by completion day, read from the store
// directly (issue 40: 3,300.02 shown against a true 26,187.79).
func TestBrowserTodayCollectedIsTheStoresSum(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 5,000 users × 3 months")
	}
	ctx0 := context.Background()
	start := time.Now()
	d, err := build(ctx0, options{Users: 5000, Months: 3, Seed: 11, DeclineRate: 0.2})
	require.NoError(t, err)
	t.Logf("built 5,000 users × 3 months in %v", time.Since(start).Round(time.Millisecond))
	ctx := browser(t)
	base := serve(t, d, "operator")
	do(t, ctx, chromedp.Navigate(base), visible("#revenue"))

	// The store's truth: every COMPLETED record, summed by completion day.
	today := d.clock.Now().UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, -29)
	var month, day billing.Amount
	var periodsToday, read int
	q := billing.StatusQuery{Status: billing.StatusCompleted, Limit: 1000}
	for {
		p, err := d.repo.QueryStatus(ctx0, q)
		require.NoError(t, err)
		require.Empty(t, p.Invalid)
		read += len(p.Items)
		for _, s := range p.Items {
			at := s.CompletionDate
			if at.IsZero() {
				at = s.LastRunDate
			}
			at = at.UTC()
			if s.Amount == 0 || at.Before(first) || !at.Before(today.AddDate(0, 0, 1)) {
				continue
			}
			month += s.Amount
			if !at.Before(today) {
				day += s.Amount
				periodsToday++
			}
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	t.Logf("%d COMPLETED records; collected %s in 30 days, %s today (%d periods)", read, month, day, periodsToday)
	require.Greater(t, read, 4*1000, "more records than a view reads")
	require.Positive(t, periodsToday, "collections today")
	// Compared digit for digit, whatever symbol and grouping the page
	// writes amounts with.
	require.Equal(t, digits(month.String()), digits(text(t, ctx, "#revenue-total")), "30 days collected: store %s", month)
	require.Equal(t, digits(day.String()), digits(text(t, ctx, "#collected-today")), "collected today: store %s", day)
	require.Zero(t, count(t, ctx, ".partial"), "nothing marked partial")
	require.Contains(t, text(t, ctx, "#revenue-source"), "day totals")
}

// digits is s without what is not a digit.
func digits(s string) string {
	return strings.Map(func(r rune) rune {
		if r < '0' || r > '9' {
			return -1
		}
		return r
	}, s)
}

// TestBrowserRetrySentTwiceOneAttempt: a retry confirmed, then the back
// button and the same form submitted again, presents one attempt to the
// processor; the second answer says it was already done, and the banner
// of a decline is not green.
func TestBrowserRetrySentTwiceOneAttempt(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t, chromedp.Flag("disable-features", "BackForwardCache"))
	users := errorUsers(t, d)
	require.GreaterOrEqual(t, len(users), 8)
	s := users[5] // 0 to 4 and the last are other tests'
	d.result.Provider.SetUser(s.UserID, billingtest.Declined("do not honor", true), billingtest.Succeeded())
	keys := len(d.result.Provider.KeysFor(s.SubscriptionID))
	act(t, ctx, base, s, "retry")
	require.Contains(t, text(t, ctx, "#done"), "Retry now done: declined")
	tone, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#done"), "data-tone"))
	require.NoError(t, err)
	require.Equal(t, "err", tone.Value, "a decline is no green banner")
	require.Zero(t, count(t, ctx, "#repeated"))

	do(t, ctx, chromedp.NavigateBack(), visible("#confirm"),
		chromedp.SetValue(chromedp.CSS("#reason"), "browser test: retry"), click("#do"), visible("#timeline"))
	require.Zero(t, count(t, ctx, "#error"), "no error page")
	require.Contains(t, text(t, ctx, "#done"), "Retry now done: declined")
	require.Contains(t, text(t, ctx, "#repeated"), "already done")
	require.Len(t, d.result.Provider.KeysFor(s.SubscriptionID), keys+1, "one processor attempt")
	got, err := d.repo.GetByID(context.Background(), s.SubscriptionID)
	require.NoError(t, err)
	require.Equal(t, billing.StatusError, got.Status, "the second answer of the script was never asked for")
}

// TestBrowserForgedBannerLink: a link whose query says an action
// succeeded shows no banner; the period is as it is.
func TestBrowserForgedBannerLink(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	users := errorUsers(t, d)
	s := users[6]
	forged := customerURL(base, s.UserID) + "&done=retry&outcome=collected&changed=5&flash=" + url.QueryEscape("b3A9cmV0cnk.forged")
	do(t, ctx, chromedp.Navigate(forged), visible("#timeline"))
	require.Zero(t, count(t, ctx, "#done"), "no banner from a link")
	require.Zero(t, count(t, ctx, ".flash.ok"))
	require.Equal(t, 1, count(t, ctx, `#p-`+s.SubscriptionID+`[data-status="ERROR"]`))
}

// TestBrowserOperatorAndReasonInTimeline: a waive with its reason shows
// the operator and the reason on its timeline row.
func TestBrowserOperatorAndReasonInTimeline(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	users := errorUsers(t, d)
	s := users[7]
	do(t, ctx,
		chromedp.Navigate(customerURL(base, s.UserID)), visible("#periods"),
		click("#p-"+s.SubscriptionID+" button.op-waive"), visible("#confirm"),
		// Without a reason the browser does not send the form.
		click("#do"), visible("#confirm"),
		chromedp.SetValue(chromedp.CSS("#reason"), "goodwill: outage <b>on the 3rd</b>"),
		click("#do"), visible("#timeline"))
	require.Contains(t, text(t, ctx, "#done"), "Waive done")
	row := text(t, ctx, "#timeline tr:nth-child(2)")
	require.Contains(t, row, "ERROR → WAIVED")
	require.Equal(t, "demo operator", text(t, ctx, "#timeline tr:nth-child(2) .operator"))
	require.Equal(t, "goodwill: outage <b>on the 3rd</b>", text(t, ctx, "#timeline tr:nth-child(2) q.why"))
	rows, err := d.hist.ListByUser(context.Background(), s.UserID)
	require.NoError(t, err)
	last := rows[len(rows)-1]
	require.Equal(t, billing.StatusWaived, last.Status)
	require.Equal(t, "demo operator", last.Operator)
	require.Equal(t, "goodwill: outage <b>on the 3rd</b>", last.Reason)
}
