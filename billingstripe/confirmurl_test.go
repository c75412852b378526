package billingstripe_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
)

// TestCollectConfirmURL: an off-session decline that asks for the
// customer's authentication carries the host's confirmation link for its
// intent (Config.ConfirmURL), from the charge, from a lookup of its key,
// and from a retry that confirms the same intent again; other declines
// carry none, and a link that is no http(s) URL is dropped.
func TestCollectConfirmURL(t *testing.T) {
	confirm := func(pi *stripe.PaymentIntent) string { return "https://app.example/billing/confirm?pi=" + pi.ID }
	newProvider := func(t *testing.T, link func(*stripe.PaymentIntent) string) *fakeEnv {
		t.Helper()
		e := newFakeEnv(t, stripetest.ClientOptions{})
		p, err := billingstripe.New(billingstripe.Config{Client: e.srv.Client(stripetest.ClientOptions{}), Customers: e.cust,
			Clock: e.clock.Now, Logger: debugLogger(), ConfirmURL: link})
		require.NoError(t, err)
		e.p = p
		e.addCard("u1")
		return e
	}
	t.Run("authentication required", func(t *testing.T) {
		e := newProvider(t, confirm)
		e.srv.Script("cus_u1", stripetest.AuthenticationRequired())
		req := request("u1", 1)
		res, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err)
		pi := e.srv.Intents()[0].ID
		assert.Equal(t, billing.DeclineAuthenticationRequired, res.Decline)
		assert.Equal(t, "https://app.example/billing/confirm?pi="+pi, res.ActionURL)

		found, ok, err := e.p.LookupPayment(t.Context(), req)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, res.ActionURL, found.ActionURL, "a lookup gives the same link")

		retry := request("u1", 2)
		retry.PriorPayment = pi
		again, err := e.p.Collect(t.Context(), retry)
		require.NoError(t, err)
		require.Len(t, e.srv.Intents(), 1, "the retry confirmed the same intent")
		assert.Equal(t, billing.DeclineAuthenticationRequired, again.Decline)
		assert.Equal(t, res.ActionURL, again.ActionURL, "the retry's decline links the same intent")
	})
	t.Run("other declines carry no link", func(t *testing.T) {
		e := newProvider(t, confirm)
		e.srv.Script("cus_u1", stripetest.Decline("insufficient_funds"))
		res, err := e.p.Collect(t.Context(), request("u1", 1))
		require.NoError(t, err)
		assert.Equal(t, billing.DeclineInsufficientFunds, res.Decline)
		assert.Empty(t, res.ActionURL)
	})
	for name, link := range map[string]string{
		"no link":        "",
		"not http(s)":    "javascript:alert(1)",
		"relative":       "/billing/confirm",
		"too long":       "https://app.example/" + strings.Repeat("x", 2048),
		"not even a URL": "https://app.example/%zz",
	} {
		t.Run("host link "+name+" is dropped", func(t *testing.T) {
			e := newProvider(t, func(*stripe.PaymentIntent) string { return link })
			e.srv.Script("cus_u1", stripetest.AuthenticationRequired())
			res, err := e.p.Collect(t.Context(), request("u1", 1))
			require.NoError(t, err)
			assert.Equal(t, billing.DeclineAuthenticationRequired, res.Decline)
			assert.Empty(t, res.ActionURL)
		})
	}
	t.Run("without ConfirmURL", func(t *testing.T) {
		e := newProvider(t, nil)
		e.srv.Script("cus_u1", stripetest.AuthenticationRequired())
		res, err := e.p.Collect(t.Context(), request("u1", 1))
		require.NoError(t, err)
		assert.Equal(t, billing.DeclineAuthenticationRequired, res.Decline)
		assert.Empty(t, res.ActionURL, "an off-session decline carries no link of Stripe's")
	})
}
