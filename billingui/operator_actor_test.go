package billingui_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingui"
)

// TestOperatorAndReasonRecorded: an action's history row records the
// signed-in operator (Config.Operator) and the reason typed on the
// confirmation page, and the timeline shows them; an action without a
// reason is refused and changes nothing.
func TestOperatorAndReasonRecorded(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEnv(t, l.open, l.user)
			h, err := billingui.New(billingui.Config{Collector: e.c, Repository: e.repo, History: e.hist, Authorizer: roles,
				CSRFKey:  []byte(strings.Repeat("k", 32)),
				Operator: func(r *http.Request) string { return r.Header.Get("X-Operator-Name") }})
			require.NoError(t, err)
			b := &browser{t: t, h: h, role: "operator"}
			form, page := b.confirmForm(e.user, e.errID, "waive")
			require.Equal(t, http.StatusOK, page.code)
			assert.Contains(t, page.body, `<textarea name="reason"`)
			assert.Contains(t, page.body, "required")

			form.Del("reason")
			res := b.post(form)
			assert.Equal(t, http.StatusUnprocessableEntity, res.code)
			assert.Contains(t, html.UnescapeString(res.body), "Waive refused: say why")
			e.only(t, e.user, billing.StatusError)

			form.Set("reason", "  goodwill: <b>outage</b> on the 3rd  ")
			req := func() resp {
				r, _ := http.NewRequest(http.MethodPost, "http://console.test/action", strings.NewReader(form.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				r.Header.Set("Sec-Fetch-Site", "same-origin")
				r.Header.Set("X-Operator-Name", "ann@example.com")
				return b.do(r)
			}
			res = req()
			require.Equal(t, http.StatusSeeOther, res.code, html.UnescapeString(res.body))
			e.only(t, e.user, billing.StatusWaived)

			rows, err := e.hist.ListByUser(context.Background(), e.user)
			require.NoError(t, err)
			last := rows[len(rows)-1]
			assert.Equal(t, billing.StatusWaived, last.Status)
			assert.Equal(t, "ann@example.com", last.Operator)
			assert.Equal(t, "goodwill: <b>outage</b> on the 3rd", last.Reason)

			tl := b.get("/customer?user=" + url.QueryEscape(e.user)).body
			assert.Contains(t, tl, `<span class="operator">ann@example.com</span>: <q class="why">goodwill: &lt;b&gt;outage&lt;/b&gt; on the 3rd</q>`)
		})
	}
}
