package billingui_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/billingui"
)

func TestNewRequiresPorts(t *testing.T) {
	_, err := billingui.New(billingui.Config{})
	require.ErrorContains(t, err, "Collector is required")
	e := newEnv(t, layouts[0].open, layouts[0].user)
	_, err = billingui.New(billingui.Config{Collector: e.c, Repository: e.repo, History: e.hist})
	require.ErrorContains(t, err, "Authorizer is required")
	_, err = billingui.New(billingui.Config{Collector: e.c, Repository: e.repo, History: e.hist, Authorizer: roles, CSRFKey: []byte("short")})
	require.ErrorContains(t, err, "CSRFKey has 5 bytes")
}

// TestPagesShowRealData: each page shows the store's records on both layouts.
func TestPagesShowRealData(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			today := op.get("/")
			require.Equal(t, http.StatusOK, today.code, today.body)
			if l.name == "memory-legacy" {
				// The single table's status index lists a subscription's
				// periods from its next payment date on: paid periods are
				// not in it (see paidBefore).
				assert.Contains(t, today.body, `id="revenue-total">$9.99<`)
			}
			assert.Contains(t, today.body, "insufficient funds")
			assert.Contains(t, today.body, `<svg id="revenue"`)
			assert.Regexp(t, `<tr class="run-scheduled"><td>scheduled</td><td>2025-03-03</td>\s*<td class="num">1</td><td class="num">2</td><td class="num">1</td><td class="num">1</td>`, today.body)

			att := op.get("/attention")
			require.Equal(t, http.StatusOK, att.code, att.body)
			assert.Contains(t, att.body, `href="customer?user=`+linkEscape(e.user)+`"`)
			assert.Contains(t, att.body, "insufficient funds")

			cust := op.get("/customer?user=" + url.QueryEscape(e.user))
			require.Equal(t, http.StatusOK, cust.code, cust.body)
			assert.Contains(t, cust.body, `id="p-`+e.errID+`" data-status="ERROR"`)
			assert.Contains(t, cust.body, "payment_declined")
			assert.Contains(t, cust.body, "subscription_created")

			// Search: a user, a period, a transaction.
			s := op.get("/search?q=" + url.QueryEscape(e.user))
			require.Equal(t, http.StatusSeeOther, s.code, s.body)
			assert.Equal(t, "customer?user="+url.QueryEscape(e.user), s.loc)
			s = op.get("/search?q=" + e.errID)
			require.Equal(t, http.StatusOK, s.code, s.body)
			assert.Contains(t, s.body, `href="customer?user=`+linkEscape(e.user)+`#p-`+e.errID+`"`)
			// A transaction: the declined period's (both layouts) and, on the
			// legacy layout, a paid one's.
			declined := e.only(t, e.user, billing.StatusError)
			s = op.get("/search?q=" + url.QueryEscape(declined.TransactionID))
			require.Equal(t, http.StatusOK, s.code, s.body)
			assert.Contains(t, s.body, `href="customer?user=`+linkEscape(e.user)+`#p-`+e.errID+`"`)
			if l.name == "memory-legacy" {
				paid := e.only(t, e.other, billing.StatusCompleted)
				require.NotEmpty(t, paid.TransactionID)
				s = op.get("/search?q=" + url.QueryEscape(paid.TransactionID))
				require.Equal(t, http.StatusOK, s.code, s.body)
				assert.Contains(t, s.body, `href="customer?user=`+linkEscape(e.other)+`#p-`+paid.SubscriptionID+`"`)
			}
			s = op.get("/search?q=nobody")
			assert.Equal(t, http.StatusOK, s.code)
			assert.Contains(t, s.body, `id="nothing"`)
		})
	}
}

// TestAuthorizationPerRole: what each role may read and do, page by page
// and action by action.
func TestAuthorizationPerRole(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			cust := "/customer?user=" + url.QueryEscape(e.user)
			cases := []struct {
				role                           string
				overview, customer, otherUser  int
				waiveButton, retryButton, post int
			}{
				{"support", 200, 200, 200, 0, 0, http.StatusForbidden},
				{"user:" + e.user, 403, 200, 403, 0, 1, http.StatusForbidden},
				{"user:" + e.other, 403, 403, 200, 0, 0, http.StatusForbidden},
				{"", 401, 401, 401, 0, 0, http.StatusForbidden},
				{"operator", 200, 200, 200, 1, 1, http.StatusSeeOther}, // last: it waives
			}
			for _, c := range cases {
				b := e.as(t, c.role)
				for _, p := range []string{"/", "/attention", "/search?q=x"} {
					assert.Equal(t, c.overview, b.get(p).code, "%s %s", c.role, p)
				}
				page := b.get(cust)
				assert.Equal(t, c.customer, page.code, c.role)
				assert.Equal(t, c.otherUser, b.get("/customer?user="+url.QueryEscape(e.other)).code, c.role)
				row := errRow(page.body, e.errID)
				assert.Equal(t, c.waiveButton, strings.Count(row, `class="op-waive`), "%s waive buttons", c.role)
				assert.Equal(t, c.retryButton, strings.Count(row, `class="op-retry`), "%s retry buttons", c.role)
				// A waive posted with a valid token of an operator's browser
				// session is refused to every other role (the token is valid;
				// the role is not).
				ob := e.as(t, "operator")
				tok := ob.token(e.user, e.errID)
				b.cookies = ob.cookies
				res := b.post(url.Values{"csrf": {tok}, "op": {"waive"}, "user": {e.user}, "period": {e.errID}, "key": {"k-" + c.role}, "reason": {"r"}})
				if c.role != "operator" {
					assert.Contains(t, []int{http.StatusForbidden, http.StatusUnauthorized}, res.code, "%s waive", c.role)
					assert.Equal(t, billing.StatusError, e.only(t, e.user, billing.StatusError).Status)
				} else {
					assert.Equal(t, c.post, res.code, res.body)
				}
			}
			// The operator's waive went through.
			e.only(t, e.user, billing.StatusWaived)
		})
	}
}

// TestOperatorActionsChangeRecords: retry and waive through the console
// go through the collector and show on the timeline.
func TestOperatorActionsChangeRecords(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			// Retry: the processor declines again, then pays.
			e.pay.SetUser(e.user, billingtest.Declined("do not honor", true), billingtest.Succeeded())
			res := op.confirmAndPost(e.user, e.errID, "retry", nil)
			require.Equal(t, http.StatusSeeOther, res.code, res.body)
			page := op.get("/" + res.loc)
			assert.Contains(t, page.body, `<div class="flash err" id="done" data-tone="err">Retry now done: declined.`, "a decline is no green banner")
			assert.Equal(t, "do not honor", e.only(t, e.user, billing.StatusError).PaymentError)
			res = op.confirmAndPost(e.user, e.errID, "retry", nil)
			require.Equal(t, http.StatusSeeOther, res.code, res.body)
			paid, err := e.repo.GetByID(context.Background(), e.errID)
			require.NoError(t, err)
			assert.Equal(t, billing.StatusCompleted, paid.Status)
			require.Len(t, e.pay.ChargesFor(e.errID), 1, "one charge for the period")
			page = op.get("/" + res.loc)
			assert.Contains(t, page.body, `<div class="flash ok" id="done" data-tone="ok">Retry now done: collected.`)
			assert.Contains(t, page.body, "ERROR → <span class=\"status completed\">COMPLETED")

			// Waive the next period.
			next := e.only(t, e.user, billing.StatusScheduled)
			res = op.confirmAndPost(e.user, next.SubscriptionID, "waive", nil)
			require.Equal(t, http.StatusSeeOther, res.code, res.body)
			w, err := e.repo.GetByID(context.Background(), next.SubscriptionID)
			require.NoError(t, err)
			assert.Equal(t, billing.StatusWaived, w.Status)
			rows, err := e.hist.ListByUser(context.Background(), e.user)
			require.NoError(t, err)
			waived := 0
			for _, row := range rows {
				if row.SubscriptionID == next.SubscriptionID && row.Status == billing.StatusWaived {
					waived++
				}
			}
			assert.Equal(t, 1, waived, "the waive's history row")
			page = op.get("/customer?user=" + url.QueryEscape(e.user))
			assert.Contains(t, page.body, "SCHEDULED → <span class=\"status waived\">WAIVED")

			// Move the new period's date, pause it, resume it, cancel it.
			next = e.only(t, e.user, billing.StatusScheduled)
			moved := next.BillingDate.AddDate(0, 0, 2)
			res = op.confirmAndPost(e.user, next.SubscriptionID, "move", url.Values{"date": {moved.Format("2006-01-02")}})
			require.Equal(t, http.StatusSeeOther, res.code, res.body)
			assert.Equal(t, moved, e.only(t, e.user, billing.StatusScheduled).BillingDate)
			res = op.confirmAndPost(e.user, next.SubscriptionID, "pause", url.Values{"months": {"2"}})
			require.Equal(t, http.StatusSeeOther, res.code, res.body)
			assert.Equal(t, 2, e.only(t, e.user, billing.StatusPaused).PauseDurationMonths)
			res = op.confirmAndPost(e.user, next.SubscriptionID, "resume", nil)
			require.Equal(t, http.StatusSeeOther, res.code, res.body)
			e.only(t, e.user, billing.StatusScheduled)
			res = op.confirmAndPost(e.user, next.SubscriptionID, "cancel", nil)
			require.Equal(t, http.StatusSeeOther, res.code, res.body)
			e.only(t, e.user, billing.StatusCancelled)
		})
	}
}

// TestActionRefusals: every action's refusal answers with the engine's
// reason and changes nothing.
func TestActionRefusals(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			refused := func(res resp, code int, reason string) {
				t.Helper()
				assert.Equal(t, code, res.code, res.body)
				assert.Contains(t, html.UnescapeString(res.body), reason)
				assert.Equal(t, billing.StatusError, e.only(t, e.user, billing.StatusError).Status, "nothing changed")
			}

			// The user's lock is held (a run, another operator).
			lease, err := e.locker.Lock(ctx, e.user)
			require.NoError(t, err)
			for _, o := range []string{"retry", "waive", "cancel", "move"} {
				refused(op.confirmAndPost(e.user, e.errID, o, url.Values{"date": {"2025-03-10"}}), http.StatusConflict, "a run or another action is working on this customer right now")
			}
			require.NoError(t, lease.Release(ctx))

			// A date out of range, a malformed date, a bad number of months.
			refused(op.confirmAndPost(e.user, e.errID, "move", url.Values{"date": {"2019-01-01"}}), http.StatusUnprocessableEntity, "date")
			refused(op.confirmAndPost(e.user, e.errID, "move", url.Values{"date": {"tomorrow"}}), http.StatusUnprocessableEntity, "the date must be YYYY-MM-DD")
			refused(op.confirmAndPost(e.user, e.errID, "pause", url.Values{"months": {"x"}}), http.StatusUnprocessableEntity, "months must be a whole number")

			// Not this status: resume of an ERROR record, pause of one.
			refused(op.confirmAndPost(e.user, e.errID, "resume", nil), http.StatusConflict, "does not take this action in its status")
			refused(op.confirmAndPost(e.user, e.errID, "pause", url.Values{"months": {"1"}}), http.StatusConflict, "does not take this action in its status")

			// Not collectible: a retry of the next period, not due yet.
			next := e.only(t, e.user, billing.StatusScheduled)
			tok0 := op.token(e.user, e.errID)
			res0 := op.post(url.Values{"csrf": {tok0}, "op": {"retry"}, "user": {e.user}, "period": {next.SubscriptionID}, "key": {"k0"}, "reason": {"r"}})
			refused(res0, http.StatusConflict, "does not take this action in its status")
			assert.Empty(t, e.pay.ChargesFor(next.SubscriptionID))

			// No such period; a period of another user is not found alike.
			refused(op.confirmAndPost(e.user, "no-such-period", "waive", nil), http.StatusNotFound, "no such period")
			paid := e.only(t, e.other, billing.StatusCompleted)
			tok := op.token(e.user, e.errID)
			refused(op.post(url.Values{"csrf": {tok}, "op": {"waive"}, "user": {e.user}, "period": {paid.SubscriptionID}, "key": {"k1"}, "reason": {"r"}}),
				http.StatusNotFound, "no such period of this user")
			assert.Equal(t, billing.StatusCompleted, e.only(t, e.other, billing.StatusCompleted).Status)
			refused(op.post(url.Values{"csrf": {tok}, "op": {"delete"}, "user": {e.user}, "period": {e.errID}}),
				http.StatusBadRequest, "unknown action")

			// An end user may cancel their own period, not one they owe.
			self := e.as(t, "user:"+e.user)
			refused(self.confirmAndPost(e.user, e.errID, "cancel", nil), http.StatusForbidden, "may not cancel a period that is owed")

			// An attempt in flight: the processor charged and timed out, and
			// offers no lookup; every change is refused until it is resolved.
			e.pay.SetUser(e.user, billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil))
			refused(op.confirmAndPost(e.user, e.errID, "retry", nil), http.StatusConflict, "is in flight and its outcome is not known yet")
			rec := e.only(t, e.user, billing.StatusError)
			require.True(t, rec.InFlight())
			e.pay.SetUnreachable(true)
			for _, o := range []string{"waive", "cancel"} {
				refused(op.confirmAndPost(e.user, e.errID, o, nil), http.StatusConflict, "in flight")
			}
			page := op.get("/customer?user=" + url.QueryEscape(e.user))
			assert.Contains(t, page.body, "<b>in flight</b>")
			e.clock.Set(mar3.Add(3 * time.Hour))
			att := op.get("/attention?section=inflight")
			assert.Contains(t, att.body, rec.LastAttempt.Key, "in flight past the request timeout")
		})
	}
}

// TestForgedPostRefused: a POST without the form's token, with another
// browser's token, or from another site is refused before the engine.
func TestForgedPostRefused(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	op := e.as(t, "operator")
	tok := op.token(e.user, e.errID)
	form := url.Values{"csrf": {tok}, "op": {"waive"}, "user": {e.user}, "period": {e.errID}, "key": {"k"}, "reason": {"r"}}

	noToken := url.Values{"op": {"waive"}, "user": {e.user}, "period": {e.errID}}
	assert.Equal(t, http.StatusForbidden, op.post(noToken).code)
	other := e.as(t, "operator")
	other.token(e.user, e.errID) // its own cookie
	assert.Equal(t, http.StatusForbidden, other.post(form).code, "another browser's token")

	cross := func(h, v string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://console.test/action", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set(h, v)
		return op.do(req).code
	}
	assert.Equal(t, http.StatusForbidden, cross("Sec-Fetch-Site", "cross-site"))
	assert.Equal(t, http.StatusForbidden, cross("Sec-Fetch-Site", "same-site"))
	assert.Equal(t, http.StatusForbidden, cross("Origin", "http://evil.test"))
	assert.Equal(t, billing.StatusError, e.only(t, e.user, billing.StatusError).Status)
	assert.Equal(t, http.StatusSeeOther, op.post(form).code)
	e.only(t, e.user, billing.StatusWaived)
}

// TestMarkupEscaped: IDs and reasons with markup are shown as text.
func TestMarkupEscaped(t *testing.T) {
	user := `<script>alert("x")</script><img src=x onerror=alert(1)>1`
	e := newEnv(t, layouts[0].open, user)
	op := e.as(t, "operator")
	for _, p := range []string{"/customer?user=" + url.QueryEscape(user), "/attention", "/search?q=" + url.QueryEscape(user+"nope")} {
		res := op.get(p)
		require.Equal(t, http.StatusOK, res.code, p)
		assert.NotContains(t, res.body, "<script>", p)
		assert.NotContains(t, res.body, "<img", p)
	}
	res := op.get("/customer?user=" + url.QueryEscape(user))
	assert.Contains(t, res.body, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`)
}

// TestPagination: status pages are read a bounded number at a time, and
// a link continues from the cursor.
func TestPagination(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	ctx := context.Background()
	for i := range 12 {
		u := "d" + string(rune('a'+i))
		_, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "k", UserID: u, Tier: "Plus:v2", FirstBillingDate: mar3.Add(-time.Hour)})
		require.NoError(t, err)
		e.pay.SetUser(u, billingtest.Declined("card expired", false))
	}
	e.clock.Set(mar3.Add(2 * time.Hour))
	_, err := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	op := e.as(t, "operator")
	seen := map[string]bool{}
	path := "/attention?section=errors"
	for range 10 {
		res := op.get(path)
		require.Equal(t, http.StatusOK, res.code, res.body)
		for _, m := range regexpCustomer.FindAllStringSubmatch(res.body, -1) {
			seen[m[1]] = true
		}
		next := regexpMore.FindStringSubmatch(res.body)
		if next == nil {
			break
		}
		path = "/" + html.UnescapeString(next[1])
	}
	assert.Len(t, seen, 13, "every ERROR record, over continued views: %v", seen)
	assert.Equal(t, http.StatusBadRequest, op.get("/attention?section=errors&cursor=forged").code)
}
