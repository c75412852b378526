package stripetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/stripe/stripe-go/v85"
	"github.com/stripe/stripe-go/v85/webhook"
)

// Event is a webhook event as Stripe delivers it: the JSON body and the
// Stripe-Signature header that signs it. It is a value: deliver it as
// often and in whatever order the test needs.
type Event struct {
	// ID is the event's ID, "evt_…".
	ID string
	// Type is the event's type, e.g. payment_intent.succeeded.
	Type stripe.EventType
	// Body is the request body, the event's JSON.
	Body []byte
	// Signature is the Stripe-Signature header of Body.
	Signature string
}

// SignedWith returns the event signed with secret at the time at
// instead: a test of a wrong secret, or of a timestamp older than the
// handler's tolerance.
func (e Event) SignedWith(secret string, at time.Time) Event {
	e.Signature = sign(e.Body, secret, at)
	return e
}

// Request is the event's delivery as a server receives it: a POST of
// Body to target ("/" when empty) with the Stripe-Signature header, for
// a handler's ServeHTTP. To post to a server over the network, send Body
// with the header "Stripe-Signature: " + Signature.
func (e Event) Request(target string) *http.Request {
	if target == "" {
		target = "/"
	}
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(e.Body))
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	r.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	r.Header.Set("Stripe-Signature", e.Signature)
	return r
}

// Deliver serves the event's delivery to h and returns its answer.
func (e Event) Deliver(h http.Handler) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, e.Request("/"))
	return rec
}

// sign is the Stripe-Signature of body signed with secret at the time at:
// "t=<unix>,v1=<hex HMAC-SHA256 of "<unix>.<body>">".
func sign(body []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
}

// EventOptions configures [NewEvent].
type EventOptions struct {
	// ID is the event's ID. Defaults to "evt_stripetest_<n>", n counting
	// the events NewEvent made.
	ID string
	// Created is the event's creation time. Defaults to time.Now.
	Created time.Time
	// Secret is the endpoint secret the event is signed with. Defaults
	// to [DefaultWebhookSecret].
	Secret string
}

// eventSeq numbers the events of NewEvent without an ID.
var eventSeq atomic.Int64

// NewEvent wraps object (a value that encodes as a JSON object, such as
// a map or a stripe-go struct) in an event of type typ, in the API
// version of the stripe-go the package is built with (the one its
// webhook.ConstructEvent accepts), and signs it now, by the wall clock
// the SDK checks the signature's age with. It is for events about
// objects the fake does not hold; [Server.Event] builds those of its
// intents.
func NewEvent(typ stripe.EventType, object any, o EventOptions) (Event, error) {
	obj, err := json.Marshal(object)
	if err != nil {
		return Event{}, fmt.Errorf("stripetest: %s event: encode the object: %w", typ, err)
	}
	if len(obj) == 0 || obj[0] != '{' {
		return Event{}, fmt.Errorf("stripetest: %s event: the object is no JSON object: %.40s", typ, obj)
	}
	if o.ID == "" {
		o.ID = fmt.Sprintf("evt_stripetest_%d", eventSeq.Add(1))
	}
	if o.Created.IsZero() {
		o.Created = time.Now()
	}
	if o.Secret == "" {
		o.Secret = DefaultWebhookSecret
	}
	body, err := json.Marshal(map[string]any{
		"id": o.ID, "object": "event", "api_version": stripe.APIVersion, "created": o.Created.Unix(),
		"livemode": false, "pending_webhooks": 1, "type": typ,
		"request": map[string]any{"id": nil, "idempotency_key": nil},
		"data":    map[string]any{"object": json.RawMessage(obj)},
	})
	if err != nil {
		return Event{}, fmt.Errorf("stripetest: %s event: %w", typ, err)
	}
	return Event{ID: o.ID, Type: typ, Body: body, Signature: sign(body, o.Secret, time.Now())}, nil
}

// Event builds the event of type typ about the intent id as the fake
// holds it now, created at the fake's clock and signed with
// [Server.WebhookSecret] now, by the wall clock (the SDK checks a
// signature's age against it):
//
//   - payment_intent.succeeded of a succeeded intent;
//   - payment_intent.processing of a processing bank debit;
//   - payment_intent.payment_failed of an intent whose confirmation
//     failed: a card decline, or a bank debit failed after processing
//     ([Server.FailProcessing]), its last_payment_error naming the code
//     and the payment method;
//   - charge.refunded of an intent whose charge was refunded
//     ([Server.Refund]): the charge, carrying the intent's metadata as
//     Stripe copies it.
//
// The payment intent's object is rendered as the API renders it
// (payment_method not expanded), with the amount, currency, customer and
// metadata the creating request gave it. An intent the fake does not
// hold is [ErrNoSuchIntent]; a type its state does not allow (the
// succeeded event of a declined intent) is [ErrIntentState]; any other
// type is an error too.
func (s *Server) Event(typ stripe.EventType, id string) (Event, error) {
	s.mu.Lock()
	in, err := s.intentLocked(id)
	if err != nil {
		s.mu.Unlock()
		return Event{}, fmt.Errorf("stripetest: %s event: %w", typ, err)
	}
	var (
		obj  map[string]any
		ok   bool   // the intent's state allows the event
		need string // the state the event needs
	)
	switch typ {
	case stripe.EventTypePaymentIntentSucceeded:
		obj, ok, need = s.render(in, false), in.Status == "succeeded", "succeeded"
	case stripe.EventTypePaymentIntentProcessing:
		obj, ok, need = s.render(in, false), in.Status == "processing", "processing"
	case stripe.EventTypePaymentIntentPaymentFailed:
		obj, ok, need = s.render(in, false), in.Status == "requires_payment_method" && in.LastError != nil,
			"requires_payment_method after a failed payment"
	case stripe.EventTypeChargeRefunded:
		obj, ok, need = s.renderCharge(in), in.Refunded, "refunded"
	default:
		s.mu.Unlock()
		return Event{}, fmt.Errorf("stripetest: %s event of payment intent %s: the fake builds only %s, %s, %s and %s",
			typ, id, stripe.EventTypePaymentIntentSucceeded, stripe.EventTypePaymentIntentProcessing,
			stripe.EventTypePaymentIntentPaymentFailed, stripe.EventTypeChargeRefunded)
	}
	if !ok {
		status := in.Status
		s.mu.Unlock()
		return Event{}, fmt.Errorf("stripetest: %w: %s event of payment intent %s, which is %s, not %s", ErrIntentState, typ, id, status, need)
	}
	s.seq++
	o := EventOptions{ID: fmt.Sprintf("evt_%06d", s.seq), Created: s.clock(), Secret: s.secret}
	body, err := json.Marshal(obj) // under the lock: the object shares the intent's maps
	s.mu.Unlock()
	if err != nil {
		return Event{}, fmt.Errorf("stripetest: %s event of payment intent %s: %w", typ, id, err)
	}
	return NewEvent(typ, json.RawMessage(body), o)
}

// renderCharge is the JSON of in's latest charge, as a charge.refunded
// event carries it. The caller holds s.mu.
func (s *Server) renderCharge(in *intent) map[string]any {
	pm := s.methods[in.Method]
	details := map[string]any{"type": pm.Type}
	switch pm.Type {
	case "card":
		details["card"] = map[string]any{"last4": pm.Last4, "brand": "visa"}
	case "us_bank_account":
		details["us_bank_account"] = map[string]any{"last4": pm.Last4, "bank_name": "STRIPE TEST BANK"}
	}
	var refunded int64
	if in.Refunded {
		refunded = in.Amount
	}
	return map[string]any{
		"id": in.Charge, "object": "charge", "amount": in.Amount, "amount_captured": in.Amount,
		"amount_refunded": refunded, "refunded": in.Refunded, "captured": true, "paid": true, "status": "succeeded",
		"currency": in.Currency, "customer": in.Customer, "payment_intent": in.ID, "payment_method": in.Method,
		"payment_method_details": details, "metadata": in.Metadata, "description": in.Desc,
		"created": in.Created, "livemode": false,
	}
}
