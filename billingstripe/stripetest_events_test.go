package billingstripe_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
	"github.com/dynabill/billing/billingtest"
)

// hookEnv is a collector charging through the Provider and the fake
// Stripe, with the webhook handler in front of it verifying signatures
// with the fake's endpoint secret.
type hookEnv struct {
	*collEnv
	h *billingstripe.WebhookHandler
}

func newHookEnv(t *testing.T) *hookEnv {
	t.Helper()
	e := &hookEnv{collEnv: newCollEnv(t, collOptions{})}
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{
		Secret: e.srv.WebhookSecret(), Collector: e.c,
		Intents: billingstripe.NewIntentMetadata(e.srv.Client(stripetest.ClientOptions{})), Logger: debugLogger(),
	})
	require.NoError(t, err)
	e.h = h
	return e
}

// charge runs the scheduled collection of user's record and returns the
// record and the one PaymentIntent it made.
func (e *hookEnv) charge(t *testing.T, user string) (billing.Period, string) {
	t.Helper()
	s := e.subscribe(t, user)
	e.run(t, billing.RunScheduled)
	intents := e.srv.Intents()
	require.Len(t, intents, 1)
	cur := e.get(t, s.SubscriptionID)
	require.Equal(t, intents[0].ID, cur.TransactionID)
	return cur, intents[0].ID
}

// statuses is the statuses of the record's history rows, oldest first.
func (e *hookEnv) statuses(t *testing.T, id string) []billing.Status {
	t.Helper()
	rows, err := e.hist.ListBySubscription(t.Context(), id)
	require.NoError(t, err)
	out := make([]billing.Status, len(rows))
	for i, r := range rows {
		out[i] = r.Status
	}
	return out
}

// deliverEvent builds the fake's event of typ about intent id, delivers
// it to the handler and checks its answer.
func (e *hookEnv) deliverEvent(t *testing.T, typ stripe.EventType, id string, code int, outcome string) stripetest.Event {
	t.Helper()
	ev, err := e.srv.Event(typ, id)
	require.NoError(t, err)
	rec := ev.Deliver(e.h)
	require.Equal(t, code, rec.Code, "%s: %s", typ, rec.Body.String())
	assert.Equal(t, outcome+"\n", rec.Body.String(), typ)
	return ev
}

// TestStripetestEventsReachTheHandler: every event the fake builds passes
// the handler's real signature check and has the effect the handler
// documents on the record the collector wrote.
func TestStripetestEventsReachTheHandler(t *testing.T) {
	t.Run("a card's succeeded is a replay", func(t *testing.T) {
		e := newHookEnv(t)
		e.addCard("u1")
		cur, pi := e.charge(t, "u1")
		require.Equal(t, billing.StatusCompleted, cur.Status)
		before := e.statuses(t, cur.SubscriptionID)
		e.deliverEvent(t, stripe.EventTypePaymentIntentSucceeded, pi, 200, "replay")
		assert.Equal(t, cur, e.get(t, cur.SubscriptionID), "nothing changes")
		assert.Equal(t, before, e.statuses(t, cur.SubscriptionID))
	})
	t.Run("a bank debit processing, then settled", func(t *testing.T) {
		e := newHookEnv(t)
		e.addBank("u2")
		cur, pi := e.charge(t, "u2")
		require.Equal(t, billing.StatusACHSent, cur.Status)
		before := e.statuses(t, cur.SubscriptionID)
		e.deliverEvent(t, stripe.EventTypePaymentIntentProcessing, pi, 200, "ignored")
		assert.Equal(t, billing.StatusACHSent, e.get(t, cur.SubscriptionID).Status)

		e.clock.Advance(3 * 24 * time.Hour)
		require.NoError(t, e.srv.Settle(pi))
		ev := e.deliverEvent(t, stripe.EventTypePaymentIntentSucceeded, pi, 200, "applied")
		got := e.get(t, cur.SubscriptionID)
		assert.Equal(t, billing.StatusCompleted, got.Status)
		assert.Equal(t, pi, got.TransactionID)
		assert.Equal(t, append(before, billing.StatusCompleted), e.statuses(t, cur.SubscriptionID))
		rec := ev.Deliver(e.h)
		assert.Equal(t, 200, rec.Code)
		assert.Equal(t, "replay\n", rec.Body.String(), "a redelivery changes nothing")
		assert.Equal(t, append(before, billing.StatusCompleted), e.statuses(t, cur.SubscriptionID))
		billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u2")
	})
	t.Run("a bank debit failed after processing is a return", func(t *testing.T) {
		e := newHookEnv(t)
		e.addBank("u2")
		cur, pi := e.charge(t, "u2")
		before := e.statuses(t, cur.SubscriptionID)
		e.clock.Advance(3 * 24 * time.Hour)
		require.NoError(t, e.srv.FailProcessing(pi, stripetest.BankDebitFailed("insufficient_funds")))
		e.deliverEvent(t, stripe.EventTypePaymentIntentPaymentFailed, pi, 200, "applied")
		got := e.get(t, cur.SubscriptionID)
		assert.Equal(t, billing.StatusError, got.Status)
		assert.Equal(t, "The customer's account has insufficient funds to cover this payment. (insufficient_funds)", got.PaymentError)
		assert.Equal(t, append(before, billing.StatusError), e.statuses(t, cur.SubscriptionID))
		assert.Empty(t, e.srv.Charged(), "nothing was collected")
	})
	t.Run("a card decline's payment_failed is recorded by the charge", func(t *testing.T) {
		e := newHookEnv(t)
		e.addCard("u1")
		e.srv.Script("cus_u1", stripetest.Decline("insufficient_funds"))
		cur, pi := e.charge(t, "u1")
		require.Equal(t, billing.StatusError, cur.Status)
		before := e.statuses(t, cur.SubscriptionID)
		e.deliverEvent(t, stripe.EventTypePaymentIntentPaymentFailed, pi, 200, "ignored, recorded by the charge")
		assert.Equal(t, cur, e.get(t, cur.SubscriptionID), "nothing changes")
		assert.Equal(t, before, e.statuses(t, cur.SubscriptionID))
	})
	t.Run("a full refund", func(t *testing.T) {
		e := newHookEnv(t)
		e.addCard("u1")
		cur, pi := e.charge(t, "u1")
		before := e.statuses(t, cur.SubscriptionID)
		e.clock.Advance(24 * time.Hour)
		require.NoError(t, e.srv.Refund(pi))
		e.deliverEvent(t, stripe.EventTypeChargeRefunded, pi, 200, "applied")
		got := e.get(t, cur.SubscriptionID)
		assert.Equal(t, billing.StatusRefunded, got.Status)
		assert.Equal(t, pi, got.TransactionID)
		assert.Equal(t, append(before, billing.StatusRefunded), e.statuses(t, cur.SubscriptionID))
		billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, "u1")
	})
}

// TestStripetestEventWrongSecret: an event signed with another secret, or
// delivered to an endpoint with another secret, is refused and changes
// nothing.
func TestStripetestEventWrongSecret(t *testing.T) {
	e := newHookEnv(t)
	e.addBank("u2")
	cur, pi := e.charge(t, "u2")
	require.NoError(t, e.srv.Settle(pi))
	before := e.statuses(t, cur.SubscriptionID)
	ev, err := e.srv.Event(stripe.EventTypePaymentIntentSucceeded, pi)
	require.NoError(t, err)

	rec := ev.SignedWith("whsec_other", time.Now()).Deliver(e.h)
	assert.Equal(t, 400, rec.Code, rec.Body.String())
	other, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: "whsec_other", Collector: e.c})
	require.NoError(t, err)
	rec = ev.Deliver(other)
	assert.Equal(t, 400, rec.Code, rec.Body.String())
	assert.Equal(t, billing.StatusACHSent, e.get(t, cur.SubscriptionID).Status)
	assert.Equal(t, before, e.statuses(t, cur.SubscriptionID))

	rec = ev.Deliver(e.h)
	assert.Equal(t, 200, rec.Code, "the right secret is accepted: %s", rec.Body.String())
	assert.Equal(t, billing.StatusCompleted, e.get(t, cur.SubscriptionID).Status)
}

// TestStripetestOnSessionRecoverySeenByProvider: a card declined
// off-session and confirmed on-session by its customer is found
// succeeded by the provider's lookup, while a replay of the key still
// answers the decline, as Stripe replays a key's first answer.
func TestStripetestOnSessionRecoverySeenByProvider(t *testing.T) {
	e := newFakeEnv(t, stripetest.ClientOptions{})
	e.addCard("u1")
	e.srv.Script("cus_u1", stripetest.Decline("insufficient_funds"))
	req := request("u1", 1)
	declined, err := e.p.Collect(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, billing.OutcomeDeclined, declined.Outcome)
	pi := declined.TransactionID

	require.NoError(t, e.srv.ConfirmOnSession(pi, stripetest.Succeed()))
	found, ok, err := e.p.LookupPayment(t.Context(), req)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, billing.PaymentResult{Outcome: billing.OutcomeSucceeded, TransactionID: pi, AccountMask: "4242", PaymentType: "CARD"}, found)

	replayed, err := e.p.Collect(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, declined, replayed, "a replay answers the key's first answer")
	require.Len(t, e.srv.Intents(), 1, "and makes no second intent")
	assert.Equal(t, []string{pi}, []string{e.srv.Charged()[0].ID}, "the recovered intent is the one charge")
}
