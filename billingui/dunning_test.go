package billingui_test

import (
	"context"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/billingui"
)

// dunningOn turns dunning on with the default schedule (a final cancel on
// day 14, a final notice on day 11), notices kept in sent, for the users.
func dunningOn(sent *billingtest.RecordingNotifier, users ...string) func(*billing.Config) {
	dir := billingtest.NewUserDirectory()
	for _, u := range users {
		dir.Put(billing.User{ID: u, Email: "payer@example.com", Status: billing.UserStatusActive})
	}
	return func(c *billing.Config) {
		c.Dunning = &billing.DunningPolicy{Notifier: sent, Users: dir, UpdatePaymentURL: "https://example.com/card"}
	}
}

// retryAt runs the retry run at 10:00 UTC of March day.
func (e *env) retryAt(t *testing.T, day int) {
	t.Helper()
	e.clock.Set(time.Date(2025, 3, day, 10, 0, 0, 0, time.UTC))
	_, err := e.c.Run(context.Background(), billing.RunRequest{Kind: billing.RunRetry})
	require.NoError(t, err)
}

// dunningRow returns the customer page's dunning row of period id, "" when
// it has none.
func dunningRow(body, id string) string {
	i := strings.Index(body, `<tr class="dunning" id="d-`+id+`"`)
	if i < 0 {
		return ""
	}
	row := body[i:]
	return row[:strings.Index(row, "</tr>")]
}

var tags = regexp.MustCompile(`<[^>]+>`)

// words is s without its markup (a tag is a space), its spaces collapsed,
// its entities read.
func words(s string) string {
	w := strings.Join(strings.Fields(html.UnescapeString(tags.ReplaceAllString(s, " "))), " ")
	for _, p := range []string{".", ",", ";", ":"} {
		w = strings.ReplaceAll(w, " "+p, p)
	}
	return w
}

// TestCustomerShowsDunning: an owed period of a collector with dunning
// shows its retries left, the next retry's day, the final action and its
// day, the decline in words and the notices sent; as the schedule goes on
// the figures follow it, and when it ends the row says how: "dunning ended
// <date>: cancel", or "recovered <date>" (and the history row that ended
// it says so). Without dunning the row is not there.
func TestCustomerShowsDunning(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			sent := &billingtest.RecordingNotifier{}
			other := strings.Replace(l.user, "1", "2", 1)
			e := newEnv(t, l.open, l.user, dunningOn(sent, l.user, other))
			cust := "/customer?user=" + url.QueryEscape(e.user)
			op := e.as(t, "operator")

			// Declined at 09:00 on March 3: retries on days 1, 3, … 13,
			// the final action on day 14 (March 17), its notice on day 11.
			page := op.get(cust)
			require.Equal(t, http.StatusOK, page.code, page.body)
			raw := dunningRow(page.body, e.errID)
			row := words(raw)
			assert.Contains(t, row, "7 retries left, next retry 2025-03-04")
			assert.Contains(t, row, "then cancel the subscription on 2025-03-17, final notice 2025-03-14.")
			assert.Contains(t, row, "Declined as unclassified, in the customer's words")
			assert.Contains(t, raw, `<span class="decline-why">`+template.HTMLEscapeString(billing.DeclineReasonText(billing.DeclineOther))+`</span>`)
			assert.Contains(t, row, "Notices sent: payment_failed 2025-03-03.")
			require.Len(t, sent.Sent(), 1)

			// The retry of day 1, declined for insufficient funds.
			e.pay.SetUser(e.user, billingtest.DeclinedAs(billing.DeclineInsufficientFunds, "R01", ""))
			e.retryAt(t, 4)
			raw = dunningRow(op.get(cust).body, e.errID)
			row = words(raw)
			assert.Contains(t, row, "6 retries left, next retry 2025-03-06")
			assert.Contains(t, row, "Declined as insufficient_funds, in the customer's words")
			assert.Contains(t, raw, `<span class="decline-why">`+template.HTMLEscapeString(billing.DeclineReasonText(billing.DeclineInsufficientFunds))+`</span>`)
			assert.Contains(t, row, "Notices sent: payment_failed 2025-03-03.", "one failed notice per period")

			// Day 14: the final notice went out on day 11, the final
			// action on day 14.
			for day := 6; day <= 17; day++ {
				e.retryAt(t, day)
			}
			page = op.get(cust)
			row = words(dunningRow(page.body, e.errID))
			assert.Contains(t, row, "dunning ended 2025-03-17: cancel (cancel the subscription).")
			assert.Contains(t, row, "Notices sent: payment_failed 2025-03-03, payment_final_notice 2025-03-14.")
			assert.NotContains(t, row, "retries left")
			assert.Equal(t, 1, strings.Count(page.body, `<span class="dunning-ended">dunning ended: cancel</span>`), "the history row that ended it")

			// The other user, declined under dunning on April 3 and paid
			// by the retry of day 1.
			e.pay.SetUser(e.other, billingtest.DeclinedAs(billing.DeclineInsufficientFunds, "R01", ""))
			e.clock.Set(time.Date(2025, 4, 3, 9, 0, 0, 0, time.UTC))
			_, err := e.c.Run(context.Background(), billing.RunRequest{Kind: billing.RunScheduled})
			require.NoError(t, err)
			owed := e.only(t, e.other, billing.StatusError)
			e.pay.SetUser(e.other, billingtest.Succeeded())
			e.clock.Set(time.Date(2025, 4, 4, 10, 0, 0, 0, time.UTC))
			_, err = e.c.Run(context.Background(), billing.RunRequest{Kind: billing.RunRetry})
			require.NoError(t, err)
			page = op.get("/customer?user=" + url.QueryEscape(e.other))
			row = words(dunningRow(page.body, owed.SubscriptionID))
			assert.Contains(t, row, "Dunning: recovered 2025-04-04.")
			assert.Equal(t, 1, strings.Count(page.body, `<span class="dunning-ended">dunning ended: recovered</span>`))

			// Without dunning: no dunning row.
			plain := newEnv(t, l.open, l.user)
			page = plain.as(t, "operator").get(cust)
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.NotEmpty(t, errRow(page.body, plain.errID))
			assert.NotContains(t, page.body, `class="dunning"`)
		})
	}
}

var dunningCustomer = regexp.MustCompile(`<tr data-period="[^"]+"><td><a class="customer" href="customer\?user=([^"]+)"`)

// dunningList returns the users the Attention page's dunning section
// lists on page and the address of its continuation, "" when none.
func dunningList(t *testing.T, body string) (users []string, next string) {
	t.Helper()
	i := strings.Index(body, `<h2 id="dunning-heading">`)
	require.GreaterOrEqual(t, i, 0, body)
	sec := body[i+1:]
	if j := strings.Index(sec, "<h2"); j >= 0 {
		sec = sec[:j]
	}
	for _, m := range dunningCustomer.FindAllStringSubmatch(sec, -1) {
		u, err := url.QueryUnescape(html.UnescapeString(m[1]))
		require.NoError(t, err)
		users = append(users, u)
	}
	if m := regexp.MustCompile(`<a href="(attention\?section=dunning&amp;cursor=[^"]+)">continue`).FindStringSubmatch(sec); m != nil {
		next = html.UnescapeString(m[1])
	}
	return users, next
}

// TestAttentionListsDunningEndingSoon: Attention lists the owed customer
// whose dunning ends in 2 days (with what is due, the action and its
// day), not the one whose ends in 10, nor a paid one; read a record a
// view, it says it read only part of the ERROR records and its
// continuation finds the customer all the same.
func TestAttentionListsDunningEndingSoon(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			sent := &billingtest.RecordingNotifier{}
			late := strings.Replace(l.user, "1", "3", 1)
			e := newEnv(t, l.open, l.user, dunningOn(sent, l.user, strings.Replace(l.user, "1", "2", 1), late))
			// A third user declined on March 11: its final action on
			// March 25.
			_, err := e.c.Subscribe(context.Background(), billing.SubscribeRequest{RequestKey: "order-" + late, UserID: late,
				Tier: "Plus:v2", FirstBillingDate: time.Date(2025, 3, 11, 8, 0, 0, 0, time.UTC)})
			require.NoError(t, err)
			e.pay.SetUser(late, billingtest.DeclinedAs(billing.DeclineInsufficientFunds, "R01", ""))
			e.clock.Set(time.Date(2025, 3, 11, 9, 0, 0, 0, time.UTC))
			_, err = e.c.Run(context.Background(), billing.RunRequest{Kind: billing.RunScheduled})
			require.NoError(t, err)
			e.only(t, late, billing.StatusError)

			// March 15: the first user's dunning ends in 2 days, the
			// third's in 10.
			e.clock.Set(time.Date(2025, 3, 15, 0, 0, 0, 0, time.UTC))
			page := e.as(t, "operator").get("/attention")
			require.Equal(t, http.StatusOK, page.code, page.body)
			users, next := dunningList(t, page.body)
			assert.Equal(t, []string{e.user}, users)
			assert.Empty(t, next, "every ERROR record read")
			assert.NotContains(t, page.body, `id="dunning-partial"`)
			sec := words(page.body[strings.Index(page.body, `<table id="dunning">`):])
			assert.Contains(t, sec, "$9.99 cancel the subscription 2025-03-17 7")

			// A record a view: the first says it read part of them, and
			// the continuations list the user once.
			small := e.with(t, func(c *billingui.Config) { c.PageSize, c.MaxPages = 1, 1 })
			op := small.as(t, "operator")
			page = op.get("/attention")
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.Regexp(t, `Partly read: \d+ records, not every ERROR record: more may end within 3 days\. continue →`, words(page.body))
			all, next := dunningList(t, page.body)
			for hops := 0; next != ""; hops++ {
				require.Less(t, hops, 10)
				page = op.get("/" + next)
				require.Equal(t, http.StatusOK, page.code, page.body)
				var more []string
				more, next = dunningList(t, page.body)
				all = append(all, more...)
			}
			assert.Equal(t, []string{e.user}, all)

			// Without dunning the section is not there.
			plain := newEnv(t, l.open, l.user)
			page = plain.as(t, "operator").get("/attention")
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.NotContains(t, page.body, "Dunning ends within")
		})
	}
}
