package billingstripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
)

// eventWithPrevious is a Stripe event of typ about obj whose
// previous_attributes are prev, as Stripe sends an update.
func eventWithPrevious(t *testing.T, id string, typ stripe.EventType, created int64, obj, prev map[string]any) []byte {
	t.Helper()
	data := map[string]any{"object": obj}
	if prev != nil {
		data["previous_attributes"] = prev
	}
	b, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": stripe.APIVersion, "created": created, "livemode": false,
		"pending_webhooks": 1, "type": typ, "data": data,
	})
	require.NoError(t, err)
	return b
}

// customerObj is customer cus's object with default payment method pm.
func customerObj(cus, pm string) map[string]any {
	return map[string]any{"id": cus, "object": "customer", "email": "ada@example.com",
		"invoice_settings": map[string]any{"default_payment_method": pm}}
}

// defaultChanged is the previous_attributes of an update that changed
// the default payment method from pm.
func defaultChanged(pm string) map[string]any {
	return map[string]any{"invoice_settings": map[string]any{"default_payment_method": pm}}
}

// methodEnv is a collEnv with a webhook handler that maps customers
// "cus_<user>" to their user, and a user u1 whose card was declined.
type methodEnv struct {
	*collEnv
	h   *billingstripe.WebhookHandler
	sub billing.Period
}

func newMethodEnv(t *testing.T, decline stripetest.Outcome) *methodEnv {
	t.Helper()
	e := &methodEnv{collEnv: newCollEnv(t, collOptions{})}
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Collector: e.c, Users: users{}})
	require.NoError(t, err)
	e.h = h
	e.addCard("u1")
	e.sub = e.subscribe(t, "u1")
	e.srv.Script("cus_u1", decline)
	e.run(t, billing.RunScheduled)
	require.Equal(t, billing.StatusError, e.get(t, e.sub.SubscriptionID).Status)
	require.Len(t, e.srv.Intents(), 1)
	require.Empty(t, e.srv.Charged())
	return e
}

// requests counts the requests that can charge: creates and confirms.
func (e *methodEnv) requests() int { return e.srv.CreateRequests() + e.srv.ConfirmRequests() }

// historyRows counts the history rows of u1's period.
func (e *methodEnv) historyRows(t *testing.T) int {
	t.Helper()
	rows, err := e.hist.ListBySubscription(t.Context(), e.sub.SubscriptionID)
	require.NoError(t, err)
	return len(rows)
}

func (e *methodEnv) deliver(t *testing.T, body []byte) (int, string) {
	t.Helper()
	rec := deliver(e.h, body)
	return rec.Code, rec.Body.String()
}

// TestWebhookPaymentMethodUpdatedChargesOnce: the customer whose card was
// declined sets a new default card; customer.updated charges the owed
// period at once, once: its redelivery, and a later event about the same
// customer, charge nothing more. An update of something else charges
// nothing.
func TestWebhookPaymentMethodUpdatedChargesOnce(t *testing.T) {
	e := newMethodEnv(t, stripetest.Decline("insufficient_funds"))
	at := e.clock.Now().Unix()

	before := e.requests()
	code, body := e.deliver(t, eventWithPrevious(t, "evt_email", stripe.EventTypeCustomerUpdated, at,
		customerObj("cus_u1", "pm_card_u1"), map[string]any{"email": "old@example.com"}))
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "ignored\n", body)
	assert.Equal(t, before, e.requests(), "an update of the email charged")
	assert.Equal(t, billing.StatusError, e.get(t, e.sub.SubscriptionID).Status)

	// The customer saves a new card and makes it the default.
	e.add("u1", stripetest.PaymentMethod{ID: "pm_card_new", Type: "card", Last4: "1881"})
	ev := eventWithPrevious(t, "evt_default", stripe.EventTypeCustomerUpdated, at,
		customerObj("cus_u1", "pm_card_new"), defaultChanged("pm_card_u1"))
	code, body = e.deliver(t, ev)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "applied\n", body)
	paid := e.get(t, e.sub.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, paid.Status)
	assert.Equal(t, "1881", paid.ReceiptAccountMask, "charged on the new card")
	require.Len(t, e.srv.Charged(), 1)
	rows := e.historyRows(t)
	charging := e.requests()

	// Stripe delivers at least once.
	code, body = e.deliver(t, ev)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "replay\n", body)
	code, body = e.deliver(t, eventWithPrevious(t, "evt_card_updater", stripe.EventTypePaymentMethodAutomaticallyUpdated, at,
		map[string]any{"id": "pm_card_new", "object": "payment_method", "type": "card", "customer": "cus_u1"}, nil))
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "applied, nothing owed\n", body)

	assert.Equal(t, charging, e.requests(), "a redelivery or a later event made a request that can charge")
	assert.Len(t, e.srv.Charged(), 1)
	assert.Equal(t, rows, e.historyRows(t), "a redelivery wrote history")
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

// TestWebhookCardUpdaterChargesTheOwedPeriod: the card network gives the
// expired card a new expiry (payment_method.automatically_updated); the
// owed period is charged at once.
func TestWebhookCardUpdaterChargesTheOwedPeriod(t *testing.T) {
	e := newMethodEnv(t, stripetest.Outcome{Code: "expired_card", DeclineCode: "expired_card", Message: "Your card has expired."})
	e.srv.Script("cus_u1", stripetest.Succeed())
	code, body := e.deliver(t, eventWithPrevious(t, "evt_updater", stripe.EventTypePaymentMethodAutomaticallyUpdated, e.clock.Now().Unix(),
		map[string]any{"id": "pm_card_u1", "object": "payment_method", "type": "card", "customer": "cus_u1"}, nil))
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "applied\n", body)
	assert.Equal(t, billing.StatusCompleted, e.get(t, e.sub.SubscriptionID).Status)
	require.Len(t, e.srv.Charged(), 1)
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

// TestWebhookNewCardDeclined: the new card is declined too; the event is
// applied (200: the period stays owed), and its redelivery does not try
// the card again.
func TestWebhookNewCardDeclined(t *testing.T) {
	e := newMethodEnv(t, stripetest.Decline("insufficient_funds"))
	e.add("u1", stripetest.PaymentMethod{ID: "pm_card_new", Type: "card", Last4: "1881"})
	e.srv.Script("cus_u1", stripetest.Decline("insufficient_funds"))
	ev := eventWithPrevious(t, "evt_default", stripe.EventTypeCustomerUpdated, e.clock.Now().Unix(),
		customerObj("cus_u1", "pm_card_new"), defaultChanged("pm_card_u1"))
	before := e.requests()
	code, body := e.deliver(t, ev)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "applied\n", body)
	assert.Equal(t, before+1, e.requests(), "the new card was tried once")
	assert.Equal(t, billing.StatusError, e.get(t, e.sub.SubscriptionID).Status)

	code, body = e.deliver(t, ev)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "replay\n", body)
	assert.Equal(t, before+1, e.requests(), "the redelivery tried the card again")
	assert.Empty(t, e.srv.Charged())
}

// TestWebhookPaymentMethodIgnored: events the handler cannot tie to an
// owed user's new method change nothing and answer 200.
func TestWebhookPaymentMethodIgnored(t *testing.T) {
	e := newMethodEnv(t, stripetest.Decline("insufficient_funds"))
	at := e.clock.Now().Unix()
	noUsers, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Collector: e.c})
	require.NoError(t, err)
	changed := eventWithPrevious(t, "evt_1", stripe.EventTypeCustomerUpdated, at, customerObj("cus_u1", "pm_card_u1"), defaultChanged("pm_old"))
	for _, tc := range []struct {
		name string
		h    http.Handler
		body []byte
	}{
		{"no Users configured", noUsers, changed},
		{"a customer of no user", e.h, eventWithPrevious(t, "evt_2", stripe.EventTypeCustomerUpdated, at,
			customerObj("cus_stranger", "pm_1"), defaultChanged("pm_old"))},
		{"the default removed", e.h, eventWithPrevious(t, "evt_3", stripe.EventTypeCustomerUpdated, at,
			map[string]any{"id": "cus_u1", "object": "customer", "invoice_settings": map[string]any{"default_payment_method": nil}},
			defaultChanged("pm_card_u1"))},
		{"a method of no customer", e.h, eventWithPrevious(t, "evt_4", stripe.EventTypePaymentMethodAutomaticallyUpdated, at,
			map[string]any{"id": "pm_1", "object": "payment_method", "type": "card"}, nil)},
		{"a method attached", e.h, eventWithPrevious(t, "evt_5", stripe.EventTypePaymentMethodAttached, at,
			map[string]any{"id": "pm_1", "object": "payment_method", "type": "card", "customer": "cus_u1"}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.requests()
			rec := deliver(tc.h, tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Equal(t, "ignored\n", rec.Body.String())
			assert.Equal(t, before, e.requests())
			assert.Equal(t, billing.StatusError, e.get(t, e.sub.SubscriptionID).Status)
		})
	}
}

// failingUpdater is a collector whose PaymentMethodUpdated fails with err.
type failingUpdater struct {
	failingSettler
	err  error
	reqs []billing.UserRequest
}

func (f *failingUpdater) PaymentMethodUpdated(_ context.Context, req billing.UserRequest) (billing.PaymentMethodUpdate, error) {
	f.reqs = append(f.reqs, req)
	return billing.PaymentMethodUpdate{}, f.err
}

// TestWebhookPaymentMethodUpdatedFailures: the call is keyed by the
// event; a collector that fails answers 500, an attempt in flight 503,
// so that Stripe delivers the event again.
func TestWebhookPaymentMethodUpdatedFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
	}{
		{"store outage", errors.New("dynamodb: throughput exceeded"), http.StatusInternalServerError},
		{"attempt in flight", fmt.Errorf("payment method updated for user u1: %w", &billing.InFlightError{SubscriptionID: "sub-u1", Key: "dynabill:sub-u1:2",
			Err: errors.New("timeout")}), http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &failingUpdater{err: tc.err}
			h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Collector: f, Users: users{}})
			require.NoError(t, err)
			rec := deliver(h, eventWithPrevious(t, "evt_42", stripe.EventTypeCustomerUpdated, jan31.Unix(),
				customerObj("cus_u1", "pm_new"), defaultChanged("pm_old")))
			assert.Equal(t, tc.status, rec.Code, rec.Body.String())
			assert.Equal(t, []billing.UserRequest{{UserID: "u1", RequestKey: "stripe:evt_42"}}, f.reqs)
		})
	}
}
