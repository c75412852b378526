package billingui_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/billingui"
)

// rowsOf returns the history rows of period id.
func (e *env) rowsOf(t *testing.T, user, id string) []billing.Period {
	t.Helper()
	rows, err := e.hist.ListByUser(context.Background(), user)
	require.NoError(t, err)
	var out []billing.Period
	for _, r := range rows {
		if r.SubscriptionID == id {
			out = append(out, r)
		}
	}
	return out
}

// postTwice posts form twice, as a double click or a resubmitted page
// does, and checks that both answer the same success, the second as a
// repeat: the page each redirects to shows the banner want, the second's
// with the note that it was already done.
func postTwice(t *testing.T, b *browser, form url.Values, want string) {
	t.Helper()
	first := b.post(form)
	require.Equal(t, http.StatusSeeOther, first.code, html.UnescapeString(first.body))
	page := b.get("/" + first.loc)
	require.Equal(t, http.StatusOK, page.code)
	assert.Contains(t, html.UnescapeString(page.body), want)
	assert.NotContains(t, page.body, `id="repeated"`)
	again := b.post(form)
	require.Equal(t, http.StatusSeeOther, again.code, "the form sent again: %s", html.UnescapeString(again.body))
	page = b.get("/" + again.loc)
	require.Equal(t, http.StatusOK, page.code)
	assert.Contains(t, html.UnescapeString(page.body), want, "the first result, as a repeat")
	assert.Contains(t, page.body, `id="repeated"`)
	assert.Contains(t, page.body, "it was already done")
}

// TestKeyedActionsResubmitted: a confirmation form of cancel, pause,
// resume or move sent twice changes the records once; the second answers
// the first's success, and the history has one row of the change.
func TestKeyedActionsResubmitted(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			done := func(_, o string, changed int) string {
				label := map[string]string{"pause": "Pause", "resume": "Resume", "move": "Move date", "cancel": "Cancel"}[o]
				return label + " done: " + strconv.Itoa(changed) + " period"
			}

			// Pause, move, resume the other user's next period.
			next := e.only(t, e.other, billing.StatusScheduled)
			before := len(e.rowsOf(t, e.other, next.SubscriptionID))
			form, page := op.confirmForm(e.other, next.SubscriptionID, "pause")
			require.Equal(t, http.StatusOK, page.code, page.body)
			form.Set("months", "2")
			postTwice(t, op, form, done(e.other, "pause", 1))
			assert.Equal(t, 2, e.only(t, e.other, billing.StatusPaused).PauseDurationMonths)
			rows := e.rowsOf(t, e.other, next.SubscriptionID)
			require.Len(t, rows, before+1, "one history row of the pause")
			assert.Equal(t, billing.StatusPaused, rows[len(rows)-1].Status)

			form, _ = op.confirmForm(e.other, next.SubscriptionID, "resume")
			postTwice(t, op, form, done(e.other, "resume", 1))
			e.only(t, e.other, billing.StatusScheduled)
			rows = e.rowsOf(t, e.other, next.SubscriptionID)
			require.Len(t, rows, before+2, "one history row of the resume")
			assert.Equal(t, billing.StatusScheduled, rows[len(rows)-1].Status)

			moved := next.BillingDate.AddDate(0, 0, 2)
			form, _ = op.confirmForm(e.other, next.SubscriptionID, "move")
			form.Set("date", moved.Format("2006-01-02"))
			postTwice(t, op, form, done(e.other, "move", 1))
			assert.Equal(t, moved, e.only(t, e.other, billing.StatusScheduled).BillingDate)
			require.Len(t, e.rowsOf(t, e.other, next.SubscriptionID), before+3, "one history row of the move")

			// Cancel the user's subscription: the owed period and the next
			// one, each with one row.
			sched := e.only(t, e.user, billing.StatusScheduled)
			errRows, schedRows := len(e.rowsOf(t, e.user, e.errID)), len(e.rowsOf(t, e.user, sched.SubscriptionID))
			form, _ = op.confirmForm(e.user, e.errID, "cancel")
			postTwice(t, op, form, done(e.user, "cancel", 2))
			for id, n := range map[string]int{e.errID: errRows, sched.SubscriptionID: schedRows} {
				got, err := e.repo.GetByID(context.Background(), id)
				require.NoError(t, err)
				assert.Equal(t, billing.StatusCancelled, got.Status, id)
				rows := e.rowsOf(t, e.user, id)
				require.Len(t, rows, n+1, "one history row of the cancel of %s", id)
				assert.Equal(t, billing.StatusCancelled, rows[len(rows)-1].Status)
			}
			assert.Empty(t, e.pay.ChargesFor(sched.SubscriptionID), "nothing charged")
		})
	}
}

// TestKeyedMoveKeyReusedWithAnotherDate: the move form's request key sent
// with another date is the engine's refusal, and the first date stands.
func TestKeyedMoveKeyReusedWithAnotherDate(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			next := e.only(t, e.other, billing.StatusScheduled)
			moved := next.BillingDate.AddDate(0, 0, 2)
			form, _ := op.confirmForm(e.other, next.SubscriptionID, "move")
			form.Set("date", moved.Format("2006-01-02"))
			res := op.post(form)
			require.Equal(t, http.StatusSeeOther, res.code, res.body)
			rows := len(e.rowsOf(t, e.other, next.SubscriptionID))

			form.Set("date", moved.AddDate(0, 0, 1).Format("2006-01-02"))
			res = op.post(form)
			assert.Equal(t, http.StatusConflict, res.code, res.body)
			assert.Contains(t, html.UnescapeString(res.body), "Move date refused: this form was already sent with other values (differing: Date): nothing was changed")
			assert.NotContains(t, res.body, "billing:", "the engine's text is for the log")
			assert.Equal(t, moved, e.only(t, e.other, billing.StatusScheduled).BillingDate, "the first date stands")
			assert.Len(t, e.rowsOf(t, e.other, next.SubscriptionID), rows, "nothing written")
		})
	}
}

// TestConfirmKeyFollowsItsAddress: the customer page's buttons carry a
// request key each; the confirmation page opened again from the same
// address (the back button) renders the same key, without one a fresh one.
func TestConfirmKeyFollowsItsAddress(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	op := e.as(t, "operator")
	page := op.get("/customer?user=" + url.QueryEscape(e.user))
	keys := keyInput.FindAllStringSubmatch(page.body, -1)
	require.GreaterOrEqual(t, len(keys), 2)
	assert.NotEqual(t, keys[0][1], keys[1][1], "a key per button")

	q := url.Values{"user": {e.user}, "period": {e.errID}, "op": {"cancel"}, "key": {html.UnescapeString(keys[0][1])}}
	for range 2 {
		c := op.get("/confirm?" + q.Encode())
		require.Equal(t, http.StatusOK, c.code)
		assert.Equal(t, keys[0][1], keyInput.FindStringSubmatch(c.body)[1])
	}
	q.Del("key")
	a, b := op.get("/confirm?"+q.Encode()), op.get("/confirm?"+q.Encode())
	assert.NotEqual(t, keyInput.FindStringSubmatch(a.body)[1], keyInput.FindStringSubmatch(b.body)[1])
}

// TestMoveOfOwedPeriodMovesThatPeriod: a move asked on an open period
// before the latest (an owed one) moves that period, not the latest one
// the call by user would move.
func TestMoveOfOwedPeriodMovesThatPeriod(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			owed := e.only(t, e.user, billing.StatusError)
			next := e.only(t, e.user, billing.StatusScheduled)
			moved := owed.BillingDate.AddDate(0, 0, 2)
			res := op.confirmAndPost(e.user, owed.SubscriptionID, "move", url.Values{"date": {moved.Format("2006-01-02")}})
			require.Equal(t, http.StatusSeeOther, res.code, html.UnescapeString(res.body))
			assert.Equal(t, moved, e.only(t, e.user, billing.StatusError).BillingDate, "the owed period moved")
			assert.Equal(t, next.BillingDate, e.only(t, e.user, billing.StatusScheduled).BillingDate, "the next period kept its date")
		})
	}
}

// TestKeyedActionWithoutKeyRefused: a keyed action's form without a
// request key (a page rendered before the console sent them) is refused
// and changes nothing.
func TestKeyedActionWithoutKeyRefused(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	op := e.as(t, "operator")
	next := e.only(t, e.other, billing.StatusScheduled)
	form, _ := op.confirmForm(e.other, next.SubscriptionID, "pause")
	form.Del("key")
	form.Set("months", "1")
	res := op.post(form)
	assert.Equal(t, http.StatusUnprocessableEntity, res.code)
	assert.Contains(t, res.body, "the form carries no request key")
	assert.Equal(t, next.BillingDate, e.only(t, e.other, billing.StatusScheduled).BillingDate, "not paused")
}

// TestKeyedCancelAsksForEachPeriod: a cancel changes every open period of
// the user, so each is put to the Authorizer; one it refuses refuses the
// cancel, and nothing changes.
func TestKeyedCancelAsksForEachPeriod(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	next := e.only(t, e.user, billing.StatusScheduled)
	h, err := billingui.New(billingui.Config{Collector: e.c, Repository: e.repo, History: e.hist,
		CSRFKey: []byte(strings.Repeat("k", 32)),
		Authorizer: func(r *http.Request, a billinghttp.Action) error {
			if a.Name == billinghttp.ActionCancel && a.SubscriptionID == next.SubscriptionID {
				return billinghttp.ErrForbidden
			}
			return nil
		}})
	require.NoError(t, err)
	b := &browser{t: t, h: h, role: "operator"}
	res := b.confirmAndPost(e.user, e.errID, "cancel", nil)
	assert.Equal(t, http.StatusForbidden, res.code)
	assert.Contains(t, html.UnescapeString(res.body), "Cancel refused: your role may not do this to every period it changes (subscription.cancel of period "+next.SubscriptionID+")")
	e.only(t, e.user, billing.StatusError)
	e.only(t, e.user, billing.StatusScheduled)
}
