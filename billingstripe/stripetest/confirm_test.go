package stripetest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing/billingstripe/stripetest"
)

func confirm(t *testing.T, c *stripe.Client, id, key string) (*stripe.PaymentIntent, error) {
	t.Helper()
	p := &stripe.PaymentIntentConfirmParams{PaymentMethod: stripe.String("pm_1"), OffSession: stripe.Bool(true)}
	p.SetIdempotencyKey(key)
	return c.V1PaymentIntents.Confirm(t.Context(), id, p)
}

// TestConfirmSucceedsOnce: a declined intent is confirmed again through
// the API with the customer's next outcome, its answer replayed under its
// key; once it succeeded, whoever confirmed it, neither the API nor the
// customer can confirm it again, and it cannot be canceled.
func TestConfirmSucceedsOnce(t *testing.T) {
	s, _, c := newServer(t)
	s.Script("cus_1", stripetest.Decline("insufficient_funds"), stripetest.Decline("generic_decline"), stripetest.Succeed())
	_, err := create(t, c, "k1", 499)
	require.Equal(t, 402, stripeErr(t, err).HTTPStatusCode)
	pi := s.Intents()[0].ID

	_, err = confirm(t, c, pi, "k2")
	se := stripeErr(t, err)
	assert.Equal(t, 402, se.HTTPStatusCode)
	assert.Equal(t, stripe.DeclineCode("generic_decline"), se.DeclineCode)
	require.NotNil(t, se.PaymentIntent)
	assert.Equal(t, pi, se.PaymentIntent.ID)
	_, err = confirm(t, c, pi, "k2") // replayed, not confirmed again
	assert.Equal(t, stripe.DeclineCode("generic_decline"), stripeErr(t, err).DeclineCode)

	got, err := confirm(t, c, pi, "k3")
	require.NoError(t, err)
	assert.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)
	assert.Equal(t, 3, s.ConfirmRequests())

	_, err = confirm(t, c, pi, "k4")
	se = stripeErr(t, err)
	assert.Equal(t, 400, se.HTTPStatusCode)
	assert.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, se.Code)
	require.ErrorIs(t, s.ConfirmOnSession(pi, stripetest.Succeed()), stripetest.ErrIntentState)
	p := &stripe.PaymentIntentCancelParams{}
	p.SetIdempotencyKey("k5")
	_, err = c.V1PaymentIntents.Cancel(t.Context(), pi, p)
	assert.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, stripeErr(t, err).Code)
	require.Len(t, s.Charged(), 1)

	_, err = confirm(t, c, "pi_nope", "k6")
	assert.Equal(t, 404, stripeErr(t, err).HTTPStatusCode)
}

// TestCancelEndsAnIntent: a declined intent canceled can never succeed
// afterwards; confirmed on session first, the cancel is refused.
func TestCancelEndsAnIntent(t *testing.T) {
	s, _, c := newServer(t)
	s.Script("cus_1", stripetest.Decline("insufficient_funds"))
	_, _ = create(t, c, "k1", 499)
	_, _ = create(t, c, "k2", 499)
	ins := s.Intents()
	require.Len(t, ins, 2)
	p := &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String("abandoned")}
	p.SetIdempotencyKey("c1")
	got, err := c.V1PaymentIntents.Cancel(t.Context(), ins[0].ID, p)
	require.NoError(t, err)
	assert.Equal(t, stripe.PaymentIntentStatusCanceled, got.Status)
	assert.Equal(t, stripe.PaymentIntentCancellationReasonAbandoned, got.CancellationReason)
	require.ErrorIs(t, s.ConfirmOnSession(ins[0].ID, stripetest.Succeed()), stripetest.ErrIntentState)
	_, err = confirm(t, c, ins[0].ID, "k3")
	assert.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, stripeErr(t, err).Code)

	require.NoError(t, s.ConfirmOnSession(ins[1].ID, stripetest.Succeed()))
	p = &stripe.PaymentIntentCancelParams{}
	p.SetIdempotencyKey("c2")
	_, err = c.V1PaymentIntents.Cancel(t.Context(), ins[1].ID, p)
	se := stripeErr(t, err)
	assert.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, se.Code)
	require.NotNil(t, se.PaymentIntent)
	assert.Equal(t, stripe.PaymentIntentStatusSucceeded, se.PaymentIntent.Status)
	assert.Equal(t, 2, s.CancelRequests())
}

// TestRequiresActionWaitsForTheCustomer: a confirmation left
// requires_action is answered 200 with its next action (Stripe's redirect
// link, or use_stripe_sdk without one), retrieved the same, charges
// nothing, and can be confirmed again; once it goes through the next
// action is gone.
func TestRequiresActionWaitsForTheCustomer(t *testing.T) {
	s, _, c := newServer(t)
	const link = "https://hooks.stripe.com/3d_secure_2/hosted?pi=1"
	s.Script("cus_1", stripetest.RequiresAction(link), stripetest.RequiresAction(""), stripetest.Succeed())
	got, err := create(t, c, "k1", 499)
	require.NoError(t, err)
	assert.Equal(t, stripe.PaymentIntentStatusRequiresAction, got.Status)
	require.NotNil(t, got.NextAction)
	assert.Equal(t, stripe.PaymentIntentNextActionType("redirect_to_url"), got.NextAction.Type)
	require.NotNil(t, got.NextAction.RedirectToURL)
	assert.Equal(t, link, got.NextAction.RedirectToURL.URL)
	assert.Nil(t, got.LastPaymentError)
	found, err := c.V1PaymentIntents.Retrieve(t.Context(), got.ID, nil)
	require.NoError(t, err)
	assert.Equal(t, link, found.NextAction.RedirectToURL.URL)
	assert.Empty(t, s.Charged())

	again, err := confirm(t, c, got.ID, "k2")
	require.NoError(t, err)
	assert.Equal(t, stripe.PaymentIntentStatusRequiresAction, again.Status)
	require.NotNil(t, again.NextAction)
	assert.Equal(t, stripe.PaymentIntentNextActionType("use_stripe_sdk"), again.NextAction.Type)
	assert.Nil(t, again.NextAction.RedirectToURL)

	done, err := confirm(t, c, got.ID, "k3")
	require.NoError(t, err)
	assert.Equal(t, stripe.PaymentIntentStatusSucceeded, done.Status)
	assert.Nil(t, done.NextAction)
	require.Len(t, s.Charged(), 1)
}
