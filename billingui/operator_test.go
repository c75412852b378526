package billingui_test

import (
	"context"
	"encoding/base64"
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
)

// TestRetryFormSentTwiceOneAttempt: the retry form sent twice (the back
// button and a second submit) presents one attempt to the processor; the
// second answers the first's outcome as already done. The waive form sent
// twice answers done too, not a 409.
func TestRetryFormSentTwiceOneAttempt(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			op := e.as(t, "operator")
			e.pay.SetUser(e.user, billingtest.Declined("do not honor", true), billingtest.Succeeded())
			keys := len(e.pay.KeysFor(e.errID))
			form, page := op.confirmForm(e.user, e.errID, "retry")
			require.Equal(t, http.StatusOK, page.code, page.body)
			for i := range 2 {
				res := op.post(form)
				require.Equal(t, http.StatusSeeOther, res.code, "post %d: %s", i, html.UnescapeString(res.body))
				after := op.get("/" + res.loc)
				assert.Contains(t, after.body, "Retry now done: declined.", "post %d", i)
				assert.Equal(t, i == 1, strings.Contains(after.body, `id="repeated"`), "post %d", i)
			}
			assert.Len(t, e.pay.KeysFor(e.errID), keys+1, "one processor attempt")
			assert.Equal(t, "do not honor", e.only(t, e.user, billing.StatusError).PaymentError)

			form, _ = op.confirmForm(e.user, e.errID, "waive")
			for i := range 2 {
				res := op.post(form)
				require.Equal(t, http.StatusSeeOther, res.code, "post %d: %s", i, html.UnescapeString(res.body))
				after := op.get("/" + res.loc)
				assert.Contains(t, after.body, "Waive done: 1 period changed.", "post %d", i)
				assert.Equal(t, i == 1, strings.Contains(after.body, `id="repeated"`), "post %d", i)
			}
			e.only(t, e.user, billing.StatusWaived)
		})
	}
}

// TestForgedBannerLinkShowsNoBanner: a banner comes from the action's own
// signed flash: the query of an old console's link, a flash edited by
// hand, one of another customer's page, and an expired one show none.
func TestForgedBannerLinkShowsNoBanner(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	op := e.as(t, "operator")
	cust := "/customer?user=" + url.QueryEscape(e.user)
	for _, q := range []string{"&done=retry&outcome=collected&changed=5", "&done=waive", "&done=cancel&changed=2&repeated=1"} {
		page := op.get(cust + q)
		require.Equal(t, http.StatusOK, page.code)
		assert.NotContains(t, page.body, `id="done"`, q)
	}

	e.pay.SetUser(e.user, billingtest.Declined("do not honor", true))
	res := op.confirmAndPost(e.user, e.errID, "retry", nil)
	require.Equal(t, http.StatusSeeOther, res.code, res.body)
	loc, err := url.Parse(res.loc)
	require.NoError(t, err)
	fl := loc.Query().Get("flash")
	require.NotEmpty(t, fl)
	assert.Contains(t, op.get("/"+res.loc).body, "Retry now done: declined.", "the real one")

	payload, mac, _ := strings.Cut(fl, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	require.NoError(t, err)
	require.Contains(t, string(raw), "outcome=declined")
	forged := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "declined", "collected", 1)))
	for name, f := range map[string]string{
		"edited":     forged + "." + mac,
		"no mac":     payload,
		"other user": fl,
	} {
		user := e.user
		if name == "other user" {
			user = e.other
		}
		page := op.get("/customer?" + url.Values{"user": {user}, "flash": {f}}.Encode())
		require.Equal(t, http.StatusOK, page.code, name)
		assert.NotContains(t, page.body, `id="done"`, name)
	}
	e.clock.Advance(10 * time.Minute)
	assert.NotContains(t, op.get("/"+res.loc).body, `id="done"`, "expired")
	assert.Equal(t, billing.StatusError, e.only(t, e.user, billing.StatusError).Status)
}

// TestInFlightPeriodOffersNoAction: a period whose attempt is in flight
// offers no action and says why; the refusal of a change asked by hand
// is a sentence, with the engine's chain only in the log.
func TestInFlightPeriodOffersNoAction(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	op := e.as(t, "operator")
	e.pay.SetUser(e.user, billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil))
	_, err := e.c.Periods().Repay(context.Background(), e.errID)
	require.ErrorIs(t, err, billing.ErrAttemptInFlight)
	e.pay.SetUnreachable(true)

	page := op.get("/customer?user=" + url.QueryEscape(e.user))
	row := errRow(page.body, e.errID)
	require.NotEmpty(t, row)
	assert.NotContains(t, row, "<button", "no action on a period in flight")
	assert.Contains(t, row, "Payment in flight: no action until its outcome is known.")

	res := op.confirmAndPost(e.user, e.errID, "waive", nil)
	assert.Equal(t, http.StatusConflict, res.code)
	body := html.UnescapeString(res.body)
	assert.Contains(t, body, "Waive refused: a payment of this customer is in flight and its outcome is not known yet")
	for _, raw := range []string{"billing:", "billingtest:", "lookup:", "offers no lookup"} {
		assert.NotContains(t, body, raw, "the engine's text is for the log")
	}
}

// TestStalePeriodsOnAttention: a period given up on (STALE) is listed on
// Attention with why, and its row on the customer page says why instead
// of offering an action the engine would refuse.
func TestStalePeriodsOnAttention(t *testing.T) {
	e := newEnv(t, layouts[0].open, layouts[0].user)
	op := e.as(t, "operator")
	// Past the stale threshold the retry run gives the period up.
	e.clock.Set(mar3.AddDate(0, 0, 100))
	_, err := e.c.Run(context.Background(), billing.RunRequest{Kind: billing.RunRetry})
	require.NoError(t, err)
	stale, err := e.repo.GetByID(context.Background(), e.errID)
	require.NoError(t, err)
	require.Equal(t, billing.StatusStale, stale.Status)

	att := op.get("/attention")
	require.Equal(t, http.StatusOK, att.code)
	i := strings.Index(att.body, `<table id="stale">`)
	require.GreaterOrEqual(t, i, 0, "a STALE section")
	assert.Contains(t, att.body[i:], e.errID)
	assert.Contains(t, att.body[i:], "older than the collector&#39;s stale threshold")
	assert.Contains(t, att.body[i:], `href="customer?user=`+linkEscape(e.user))

	row := errRow(op.get("/customer?user="+url.QueryEscape(e.user)).body, e.errID)
	assert.Contains(t, html.UnescapeString(row), "Given up on: older than the collector's stale threshold")
}
