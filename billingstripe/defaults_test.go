package billingstripe_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"
)

// TestWebhookZeroConfigLogPaths: a webhook handler built with only its
// required fields (no Logger, MaxBodyBytes, Passes, …: each documented
// default applies) answers the paths that log: a body over the default
// limit (413), a bad signature (400) and a store failure (500).
// (TestCollectOutcomes drives the Provider's logging with no Logger.)
func TestWebhookZeroConfigLogPaths(t *testing.T) {
	acc, err := billingtest.NewAccounts(billingtest.AccountsOptions{Clock: billingtest.NewClock(jan31)})
	require.NoError(t, err)
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Accounts: failingAccounts{acc}, Users: users{}, Tiers: tiers{}})
	require.NoError(t, err)

	big := bytes.Repeat([]byte("x"), int(billingstripe.DefaultWebhookMaxBody)+1)
	assert.Equal(t, http.StatusRequestEntityTooLarge, deliver(h, big).Code, "over the default body limit")

	body := eventJSON(t, "evt_1", stripe.EventTypeInvoicePaid, jan31.Unix(), invoiceObj("in_1", "subscription_cycle", jan31, "price_SAGE"))
	assert.Equal(t, http.StatusBadRequest, deliverWith(h, http.MethodPost, body, signedHeader(body, "whsec_other", time.Now())).Code, "bad signature")
	rec := deliver(h, body)
	assert.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
}
