package stripetest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"
	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/dynabill/billing/billingstripe/stripetest"
)

// construct verifies ev as a webhook endpoint with secret does and
// decodes its object into obj.
func construct(t *testing.T, ev stripetest.Event, secret string, obj any) stripe.Event {
	t.Helper()
	got, err := webhook.ConstructEvent(ev.Body, ev.Signature, secret)
	require.NoError(t, err)
	assert.Equal(t, ev.ID, got.ID)
	assert.Equal(t, ev.Type, got.Type)
	require.NoError(t, json.Unmarshal(got.Data.Raw, obj))
	return got
}

// TestEventOfADeclinedCard: the payment_failed event of a declined card
// carries the intent as the fake holds it and its last payment error,
// signed with the server's secret as Stripe signs; another secret and a
// stale timestamp are refused by the SDK.
func TestEventOfADeclinedCard(t *testing.T) {
	s, clock, c := newServer(t)
	s.Script("cus_1", stripetest.Decline("insufficient_funds"))
	_, err := create(t, c, "key-1", 500)
	require.Error(t, err)
	id := s.Intents()[0].ID
	clock.Advance(time.Minute)

	ev, err := s.Event(stripe.EventTypePaymentIntentPaymentFailed, id)
	require.NoError(t, err)
	assert.Equal(t, stripetest.DefaultWebhookSecret, s.WebhookSecret())
	var pi stripe.PaymentIntent
	got := construct(t, ev, s.WebhookSecret(), &pi)
	assert.Equal(t, stripe.APIVersion, got.APIVersion)
	assert.Equal(t, clock.Now().Unix(), got.Created, "created by the fake's clock")
	assert.Equal(t, id, pi.ID)
	assert.Equal(t, int64(500), pi.Amount)
	assert.Equal(t, "cus_1", pi.Customer.ID)
	assert.Equal(t, map[string]string{"k": "key-1"}, pi.Metadata)
	assert.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, pi.Status)
	require.NotNil(t, pi.LastPaymentError)
	assert.Equal(t, stripe.ErrorCodeCardDeclined, pi.LastPaymentError.Code)
	assert.Equal(t, stripe.DeclineCode("insufficient_funds"), pi.LastPaymentError.DeclineCode)
	assert.Equal(t, stripe.PaymentMethodTypeCard, pi.LastPaymentError.PaymentMethod.Type)

	_, err = webhook.ConstructEvent(ev.Body, ev.SignedWith("whsec_other", time.Now()).Signature, s.WebhookSecret())
	assert.ErrorIs(t, err, webhook.ErrNoValidSignature)
	_, err = webhook.ConstructEvent(ev.Body, ev.SignedWith(s.WebhookSecret(), time.Now().Add(-10*time.Minute)).Signature, s.WebhookSecret())
	assert.ErrorIs(t, err, webhook.ErrTooOld)

	req := ev.Request("/hooks")
	assert.Equal(t, http.MethodPost, req.Method)
	assert.Equal(t, ev.Signature, req.Header.Get("Stripe-Signature"))
	body, err := io.ReadAll(req.Body)
	require.NoError(t, err)
	assert.Equal(t, ev.Body, body)

	_, err = s.Event(stripe.EventTypePaymentIntentSucceeded, id)
	assert.ErrorIs(t, err, stripetest.ErrIntentState, "a declined intent has no succeeded event")
	_, err = s.Event(stripe.EventTypePaymentIntentSucceeded, "pi_nope")
	assert.ErrorIs(t, err, stripetest.ErrNoSuchIntent)
	_, err = s.Event(stripe.EventTypeInvoicePaid, id)
	assert.Error(t, err)
}

// TestConfirmOnSession: a declined intent confirmed on-session succeeds;
// retrieve sees it, a replay of the creating request still answers the
// decline (Stripe replays the first answer), and it now counts as charged.
func TestConfirmOnSession(t *testing.T) {
	s, _, c := newServer(t)
	s.Script("cus_1", stripetest.Decline("insufficient_funds"))
	_, err := create(t, c, "key-1", 500)
	require.Equal(t, 402, stripeErr(t, err).HTTPStatusCode)
	id := s.Intents()[0].ID
	before, err := c.V1PaymentIntents.Retrieve(t.Context(), id, nil)
	require.NoError(t, err)

	require.NoError(t, s.ConfirmOnSession(id, stripetest.Succeed()))
	pi, err := c.V1PaymentIntents.Retrieve(t.Context(), id, nil)
	require.NoError(t, err)
	assert.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
	assert.Nil(t, pi.LastPaymentError, "cleared by the confirmation that went through")
	assert.NotEqual(t, before.LatestCharge.ID, pi.LatestCharge.ID, "a new charge")
	_, err = create(t, c, "key-1", 500)
	assert.Equal(t, 402, stripeErr(t, err).HTTPStatusCode, "the replay answers what the request answered")
	require.Len(t, s.Charged(), 1)
	assert.Equal(t, id, s.Charged()[0].ID)
	assert.ErrorIs(t, s.ConfirmOnSession(id, stripetest.Succeed()), stripetest.ErrIntentState)
	assert.ErrorIs(t, s.ConfirmOnSession("pi_nope", stripetest.Succeed()), stripetest.ErrNoSuchIntent)

	ev, err := s.Event(stripe.EventTypePaymentIntentSucceeded, id)
	require.NoError(t, err)
	var got stripe.PaymentIntent
	construct(t, ev, s.WebhookSecret(), &got)
	assert.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)
	assert.Equal(t, pi.LatestCharge.ID, got.LatestCharge.ID)

	// Declined again on-session: still failed, with the new error.
	s.Script("cus_2", stripetest.Decline("insufficient_funds"))
	p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(700), Currency: stripe.String("usd"), Customer: stripe.String("cus_2"),
		PaymentMethod: stripe.String("pm_2"), Confirm: stripe.Bool(true), OffSession: stripe.Bool(true)}
	_, err = c.V1PaymentIntents.Create(t.Context(), p)
	require.Error(t, err)
	id2 := s.Intents()[1].ID
	require.NoError(t, s.ConfirmOnSession(id2, stripetest.Decline("stolen_card")))
	pi2, err := c.V1PaymentIntents.Retrieve(t.Context(), id2, nil)
	require.NoError(t, err)
	assert.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, pi2.Status)
	assert.Equal(t, stripe.DeclineCode("stolen_card"), pi2.LastPaymentError.DeclineCode)
}

// TestBankDebitMoves: a bank debit is processing until settled (then
// refundable) or failed, and each state has its event.
func TestBankDebitMoves(t *testing.T) {
	s, _, c := newServer(t)
	s.AddCustomer("cus_3", stripetest.PaymentMethod{ID: "pm_3", Type: "us_bank_account", Last4: "6789"})
	debit := func() string {
		p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(900), Currency: stripe.String("usd"), Customer: stripe.String("cus_3"),
			PaymentMethod: stripe.String("pm_3"), Confirm: stripe.Bool(true), OffSession: stripe.Bool(true),
			Metadata: map[string]string{"sub": "s3"}}
		pi, err := c.V1PaymentIntents.Create(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, stripe.PaymentIntentStatusProcessing, pi.Status)
		return pi.ID
	}

	settled := debit()
	ev, err := s.Event(stripe.EventTypePaymentIntentProcessing, settled)
	require.NoError(t, err)
	var pi stripe.PaymentIntent
	construct(t, ev, s.WebhookSecret(), &pi)
	assert.Equal(t, stripe.PaymentIntentStatusProcessing, pi.Status)
	_, err = s.Event(stripe.EventTypePaymentIntentSucceeded, settled)
	assert.ErrorIs(t, err, stripetest.ErrIntentState, "not settled yet")
	assert.ErrorIs(t, s.Refund(settled), stripetest.ErrIntentState, "a processing debit is not refunded")
	require.NoError(t, s.Settle(settled))
	ev, err = s.Event(stripe.EventTypePaymentIntentSucceeded, settled)
	require.NoError(t, err)
	construct(t, ev, s.WebhookSecret(), &pi)
	assert.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
	assert.Equal(t, []string{"us_bank_account"}, pi.PaymentMethodTypes)
	assert.ErrorIs(t, s.Settle(settled), stripetest.ErrIntentState)

	_, err = s.Event(stripe.EventTypeChargeRefunded, settled)
	assert.ErrorIs(t, err, stripetest.ErrIntentState, "not refunded yet")
	require.NoError(t, s.Refund(settled))
	assert.ErrorIs(t, s.Refund(settled), stripetest.ErrIntentState, "refunded once")
	ev, err = s.Event(stripe.EventTypeChargeRefunded, settled)
	require.NoError(t, err)
	var ch stripe.Charge
	construct(t, ev, s.WebhookSecret(), &ch)
	assert.True(t, ch.Refunded)
	assert.Equal(t, int64(900), ch.Amount)
	assert.Equal(t, int64(900), ch.AmountRefunded)
	assert.Equal(t, settled, ch.PaymentIntent.ID)
	assert.Equal(t, map[string]string{"sub": "s3"}, ch.Metadata, "Stripe copies the intent's metadata to its charge")
	assert.Equal(t, "6789", ch.PaymentMethodDetails.USBankAccount.Last4)
	assert.True(t, s.Intents()[0].Refunded)

	failed := debit()
	assert.Error(t, s.FailProcessing(failed, stripetest.Succeed()), "a failure has a code")
	require.NoError(t, s.FailProcessing(failed, stripetest.BankDebitFailed("account_closed")))
	ev, err = s.Event(stripe.EventTypePaymentIntentPaymentFailed, failed)
	require.NoError(t, err)
	construct(t, ev, s.WebhookSecret(), &pi)
	assert.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, pi.Status)
	assert.Equal(t, stripe.ErrorCode("account_closed"), pi.LastPaymentError.Code)
	assert.Equal(t, "The customer's bank account has been closed.", pi.LastPaymentError.Msg)
	assert.Equal(t, stripe.PaymentMethodTypeUSBankAccount, pi.LastPaymentError.PaymentMethod.Type)
	assert.ErrorIs(t, s.Settle(failed), stripetest.ErrIntentState)
	assert.Equal(t, []string{settled}, ids(s.Charged()))
}

func ids(in []stripetest.Intent) []string {
	out := make([]string, len(in))
	for i, x := range in {
		out[i] = x.ID
	}
	return out
}

// TestNewEvent signs an event about any object, with the secret given.
func TestNewEvent(t *testing.T) {
	sub := map[string]any{"id": "sub_1", "object": "subscription", "status": "active", "customer": "cus_1"}
	ev, err := stripetest.NewEvent(stripe.EventTypeCustomerSubscriptionUpdated, sub,
		stripetest.EventOptions{ID: "evt_sub", Created: time.Unix(1_800_000_000, 0), Secret: "whsec_host"})
	require.NoError(t, err)
	var got stripe.Subscription
	e := construct(t, ev, "whsec_host", &got)
	assert.Equal(t, "evt_sub", e.ID)
	assert.Equal(t, int64(1_800_000_000), e.Created)
	assert.Equal(t, stripe.SubscriptionStatusActive, got.Status)
	assert.Equal(t, "cus_1", got.Customer.ID)

	def, err := stripetest.NewEvent(stripe.EventTypeCustomerSubscriptionUpdated, sub, stripetest.EventOptions{})
	require.NoError(t, err)
	construct(t, def, stripetest.DefaultWebhookSecret, &got)
	assert.NotEqual(t, ev.ID, def.ID)
	_, err = stripetest.NewEvent(stripe.EventTypeCustomerSubscriptionUpdated, []int{1}, stripetest.EventOptions{})
	assert.Error(t, err, "an object is a JSON object")
}
