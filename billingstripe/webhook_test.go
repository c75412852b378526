package billingstripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"
	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

const testSecret = "whsec_test_secret"

// eventJSON is a Stripe event of typ about obj, as Stripe sends it.
func eventJSON(t *testing.T, id string, typ stripe.EventType, created int64, obj map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": stripe.APIVersion, "created": created, "livemode": false,
		"pending_webhooks": 1, "type": typ, "data": map[string]any{"object": obj},
	})
	require.NoError(t, err)
	return b
}

// signedHeader is the Stripe-Signature of body signed with secret at ts.
func signedHeader(body []byte, secret string, ts time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: ts}).Header
}

// deliver posts body to h as Stripe does, signed with the test secret now.
func deliver(h http.Handler, body []byte) *httptest.ResponseRecorder {
	return deliverWith(h, http.MethodPost, body, signedHeader(body, testSecret, time.Now()))
}

func deliverWith(h http.Handler, method string, body []byte, sig string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/stripe/webhook", bytes.NewReader(body))
	if sig != "" {
		req.Header.Set("Stripe-Signature", sig)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// settleEnv is a collector over the memory store with one record of user
// u1 whose ACH debit was submitted (ACHSENT), and the webhook handler in
// front of it.
type settleEnv struct {
	t      *testing.T
	clock  *billingtest.Clock
	store  *memory.Store
	pay    *billingtest.Provider
	c      *billing.Collector
	h      *billingstripe.WebhookHandler
	intent *fakeIntents
	sub    billing.Period
}

var jan31 = time.Date(2025, 1, 31, 0, 0, 0, 0, time.UTC)

func newSettleEnv(t *testing.T, first billingtest.Step) *settleEnv {
	t.Helper()
	e := &settleEnv{t: t, clock: billingtest.NewClock(jan31.Add(time.Hour)), intent: &fakeIntents{meta: map[string]map[string]string{}}}
	e.store = billingtest.NewMemoryStore(t, memory.Options{})
	e.pay = billingtest.NewProvider(billingtest.ProviderOptions{Clock: e.clock})
	c, err := billing.NewCollector(billing.Config{Repository: e.store.Repository(), History: e.store.History(),
		Locker: billingtest.NewLocker(e.clock, time.Minute), Provider: e.pay, Clock: e.clock})
	require.NoError(t, err)
	e.c = c
	e.sub = billing.Period{UserID: "u1", SubscriptionID: "sub-u1-0131", BillingDate: jan31,
		Amount: billing.MustParseAmount("4.99"), Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(jan31),
		Term: billing.TermMonthly, AnchorDay: 31, ReceiptTierName: "Plus:v2",
		CreatedDate: jan31.AddDate(0, -1, 0), LastRunDate: jan31.AddDate(0, -1, 0)}
	require.NoError(t, e.store.Repository().Add(context.Background(), &e.sub))
	e.pay.SetUser("u1", first)
	_, err = c.Run(context.Background(), billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	e.h, err = billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Collector: c, Intents: e.intent})
	require.NoError(t, err)
	return e
}

// record is the record's current state.
func (e *settleEnv) record() billing.Period {
	e.t.Helper()
	cur, err := e.store.Repository().GetByID(context.Background(), e.sub.SubscriptionID)
	require.NoError(e.t, err)
	return cur
}

// history is the statuses of the record's history rows, oldest first.
func (e *settleEnv) history() []billing.Status {
	e.t.Helper()
	rows, err := e.store.History().ListBySubscription(context.Background(), e.sub.SubscriptionID)
	require.NoError(e.t, err)
	out := make([]billing.Status, len(rows))
	for i, r := range rows {
		out[i] = r.Status
	}
	return out
}

const (
	scheduled = billing.StatusScheduled
	achSent   = billing.StatusACHSent
	completed = billing.StatusCompleted
)

// txn is the transaction ID of the collector's charge: the intent ID.
func (e *settleEnv) txn() string {
	e.t.Helper()
	charges := e.pay.ChargesFor(e.sub.SubscriptionID)
	require.Len(e.t, charges, 1)
	return charges[0].TransactionID
}

// intent is a PaymentIntent the Provider made for the record.
func (e *settleEnv) intentObj(id, status string, lastErr map[string]any) map[string]any {
	obj := map[string]any{"id": id, "object": "payment_intent", "amount": 499, "currency": "usd", "status": status,
		"customer": "cus_u1", "created": jan31.Unix(), "metadata": map[string]string{
			billingstripe.MetadataSubscriptionID: e.sub.SubscriptionID, billingstripe.MetadataUserID: "u1",
			billingstripe.MetadataIdempotencyKey: billing.IdempotencyKey(e.sub.SubscriptionID, 1),
			billingstripe.MetadataBillingDate:    "2025-01-31", billingstripe.MetadataAttempt: "1"}}
	if lastErr != nil {
		obj["last_payment_error"] = lastErr
	}
	return obj
}

// charge is the charge of payment intent pi, refunded of amount.
func chargeObj(pi string, refunded int64, meta map[string]string) map[string]any {
	return map[string]any{"id": "ch_" + pi, "object": "charge", "amount": 499, "amount_refunded": refunded, "currency": "usd",
		"refunded": refunded == 499, "payment_intent": pi, "metadata": meta, "status": "succeeded", "paid": true}
}

type fakeIntents struct {
	meta  map[string]map[string]string
	calls int
}

func (f *fakeIntents) PaymentIntentMetadata(_ context.Context, id string) (map[string]string, error) {
	f.calls++
	m, ok := f.meta[id]
	if !ok {
		return nil, fmt.Errorf("no such payment intent: %s", id)
	}
	return m, nil
}

func TestWebhookSignature(t *testing.T) {
	e := newSettleEnv(t, billingtest.Pending())
	good := eventJSON(t, "evt_1", stripe.EventTypePaymentIntentSucceeded, jan31.Unix(), e.intentObj(e.txn(), "succeeded", nil))
	now := time.Now()
	for _, tc := range []struct {
		name   string
		method string
		body   []byte
		sig    string
		status int
	}{
		{"missing signature", http.MethodPost, good, "", http.StatusBadRequest},
		{"garbage signature", http.MethodPost, good, "t=1,v1=zz", http.StatusBadRequest},
		{"wrong secret", http.MethodPost, good, signedHeader(good, "whsec_other", now), http.StatusBadRequest},
		{"tampered body", http.MethodPost, bytes.Replace(good, []byte(`"succeeded"`), []byte(`"succeeded" `), 1), signedHeader(good, testSecret, now), http.StatusBadRequest},
		{"expired timestamp", http.MethodPost, good, signedHeader(good, testSecret, now.Add(-10*time.Minute)), http.StatusBadRequest},
		{"other API version", http.MethodPost, bytes.Replace(good, []byte(stripe.APIVersion), []byte("2024-06-20"), 1),
			signedHeader(bytes.Replace(good, []byte(stripe.APIVersion), []byte("2024-06-20"), 1), testSecret, now), http.StatusBadRequest},
		{"not POST", http.MethodGet, good, signedHeader(good, testSecret, now), http.StatusMethodNotAllowed},
		{"too large", http.MethodPost, append(bytes.Clone(good), bytes.Repeat([]byte(" "), int(billingstripe.DefaultWebhookMaxBody))...), "t=1,v1=00", http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := deliverWith(e.h, tc.method, tc.body, tc.sig)
			assert.Equal(t, tc.status, rec.Code, rec.Body.String())
			assert.Equal(t, billing.StatusACHSent, e.record().Status, "refused delivery changed the record")
			assert.Equal(t, []billing.Status{scheduled, achSent}, e.history(), "refused delivery wrote history")
		})
	}
	rec := deliver(e.h, good)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, billing.StatusCompleted, e.record().Status)
}

func TestWebhookSettlement(t *testing.T) {
	r01 := map[string]any{"code": "insufficient_funds", "message": "The customer's account has insufficient funds.", "type": "card_error"}
	for _, tc := range []struct {
		name string
		// deliveries are the event types delivered in order (each one
		// twice: Stripe delivers at least once); want their answers.
		deliveries []stripe.EventType
		want       []int
		status     billing.Status
		reason     string
		// history is the statuses of the history rows after the deliveries.
		history []billing.Status
	}{
		{name: "settled", deliveries: []stripe.EventType{stripe.EventTypePaymentIntentSucceeded},
			want: []int{200}, status: billing.StatusCompleted, history: []billing.Status{scheduled, achSent, completed}},
		{name: "returned", deliveries: []stripe.EventType{stripe.EventTypePaymentIntentPaymentFailed},
			want: []int{200}, status: billing.StatusError, reason: "The customer's account has insufficient funds. (insufficient_funds)", history: []billing.Status{scheduled, achSent, billing.StatusError}},
		{name: "settled then refunded", deliveries: []stripe.EventType{stripe.EventTypePaymentIntentSucceeded, stripe.EventTypeChargeRefunded},
			want: []int{200, 200}, status: billing.StatusRefunded, history: []billing.Status{scheduled, achSent, completed, billing.StatusRefunded}},
		{name: "refund before its settlement", deliveries: []stripe.EventType{stripe.EventTypeChargeRefunded, stripe.EventTypePaymentIntentSucceeded, stripe.EventTypeChargeRefunded},
			want: []int{409, 200, 200}, status: billing.StatusRefunded, history: []billing.Status{scheduled, achSent, completed, billing.StatusRefunded}},
		// An intent that succeeded never fails afterwards: its failure
		// came first, delivered late, and is ignored.
		{name: "return after settlement", deliveries: []stripe.EventType{stripe.EventTypePaymentIntentSucceeded, stripe.EventTypePaymentIntentPaymentFailed},
			want: []int{200, 200}, status: billing.StatusCompleted, history: []billing.Status{scheduled, achSent, completed}},
		// A failed intent can succeed later: the success is recorded.
		{name: "settlement after return", deliveries: []stripe.EventType{stripe.EventTypePaymentIntentPaymentFailed, stripe.EventTypePaymentIntentSucceeded},
			want: []int{200, 200}, status: billing.StatusCompleted, history: []billing.Status{scheduled, achSent, billing.StatusError, completed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSettleEnv(t, billingtest.Pending())
			pi := e.txn()
			require.Equal(t, billing.StatusACHSent, e.record().Status)
			// The debit's events come days after it, hours apart.
			e.clock.Advance(3 * 24 * time.Hour)
			for i, typ := range tc.deliveries {
				e.clock.Advance(time.Hour)
				var obj map[string]any
				switch typ {
				case stripe.EventTypePaymentIntentSucceeded:
					obj = e.intentObj(pi, "succeeded", nil)
				case stripe.EventTypePaymentIntentPaymentFailed:
					obj = e.intentObj(pi, "requires_payment_method", r01)
				case stripe.EventTypeChargeRefunded:
					obj = chargeObj(pi, 499, e.intentObj(pi, "", nil)["metadata"].(map[string]string))
				}
				body := eventJSON(t, fmt.Sprintf("evt_%d", i), typ, jan31.Unix()+int64(i), obj)
				for range 2 {
					rec := deliver(e.h, body)
					require.Equal(t, tc.want[i], rec.Code, "delivery %d (%s): %s", i, typ, rec.Body.String())
				}
			}
			cur := e.record()
			assert.Equal(t, tc.status, cur.Status)
			assert.Equal(t, pi, cur.TransactionID)
			assert.Equal(t, tc.reason, cur.PaymentError)
			assert.Equal(t, tc.history, e.history(), "history rows")
			billingtest.RequireHistoryMatchesPrimary(t, e.store.Repository(), e.store.History(), "u1")
			billingtest.RequireNoDoubleCharge(t, e.pay)
		})
	}
}

func TestWebhookCardPaymentSucceededIsAReplay(t *testing.T) {
	e := newSettleEnv(t, billingtest.Succeeded())
	require.Equal(t, billing.StatusCompleted, e.record().Status)
	rows := e.history()
	require.Equal(t, []billing.Status{scheduled, completed}, rows)
	rec := deliver(e.h, eventJSON(t, "evt_card", stripe.EventTypePaymentIntentSucceeded, jan31.Unix(), e.intentObj(e.txn(), "succeeded", nil)))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "replay\n", rec.Body.String())
	assert.Equal(t, billing.StatusCompleted, e.record().Status)
	assert.Equal(t, rows, e.history(), "a replay wrote history")
}

func TestWebhookEarlySettlementIsRedelivered(t *testing.T) {
	// The debit was submitted but its answer was lost: the record is
	// still SCHEDULED with the attempt in flight.
	e := newSettleEnv(t, billingtest.UnknownAfterCharge(billingtest.Pending(), nil))
	require.Equal(t, billing.StatusScheduled, e.record().Status)
	cur := e.record()
	require.True(t, cur.InFlight())
	body := eventJSON(t, "evt_early", stripe.EventTypePaymentIntentSucceeded, jan31.Unix(), e.intentObj(e.txn(), "succeeded", nil))
	e.pay.SetUnreachable(true)
	rec := deliver(e.h, body)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	assert.Equal(t, billing.StatusScheduled, e.record().Status, "an early settlement wrote")
	assert.Equal(t, []billing.Status{scheduled}, e.history(), "an early settlement wrote history")
	// Stripe redelivers once the processor answers again: the attempt is
	// recorded (ACHSENT), then settled.
	e.pay.SetUnreachable(false)
	e.clock.Advance(time.Hour)
	rec = deliver(e.h, body)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, billing.StatusCompleted, e.record().Status)
	assert.Equal(t, []billing.Status{scheduled, achSent, completed}, e.history(), "history: the attempt, then the settlement")
	billingtest.RequireNoDoubleCharge(t, e.pay)
}

func TestWebhookIgnoresWhatIsNotOurs(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  stripe.EventType
		obj  func(e *settleEnv) map[string]any
		// intents are the metadata the Intents lookup knows.
		intents     bool
		wantLookups int
	}{
		{name: "intent without dynabill metadata", typ: stripe.EventTypePaymentIntentSucceeded, obj: func(e *settleEnv) map[string]any {
			return map[string]any{"id": "pi_other", "object": "payment_intent", "status": "succeeded", "metadata": map[string]string{"order": "7"}}
		}},
		{name: "intent of a record this deployment does not have", typ: stripe.EventTypePaymentIntentSucceeded, obj: func(e *settleEnv) map[string]any {
			obj := e.intentObj(e.txn(), "succeeded", nil)
			obj["metadata"] = map[string]string{billingstripe.MetadataSubscriptionID: "sub-elsewhere"}
			return obj
		}},
		{name: "partial refund", typ: stripe.EventTypeChargeRefunded, obj: func(e *settleEnv) map[string]any {
			return chargeObj(e.txn(), 100, e.intentObj("", "", nil)["metadata"].(map[string]string))
		}},
		{name: "refund of a charge of no intent", typ: stripe.EventTypeChargeRefunded, obj: func(e *settleEnv) map[string]any {
			ch := chargeObj("", 499, nil)
			ch["payment_intent"] = nil
			return ch
		}},
		{name: "refund of another intent, looked up", typ: stripe.EventTypeChargeRefunded, wantLookups: 1, obj: func(e *settleEnv) map[string]any {
			e.intent.meta["pi_shop"] = map[string]string{"order": "9"}
			return chargeObj("pi_shop", 499, nil)
		}},
		{name: "unknown event type", typ: "customer.created", obj: func(e *settleEnv) map[string]any {
			return map[string]any{"id": "cus_1", "object": "customer"}
		}},
		{name: "subscription event without Accounts", typ: stripe.EventTypeCustomerSubscriptionUpdated, obj: func(e *settleEnv) map[string]any {
			return map[string]any{"id": "sub_1", "object": "subscription", "status": "active", "customer": "cus_u1"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSettleEnv(t, billingtest.Succeeded())
			rows := e.history()
			rec := deliver(e.h, eventJSON(t, "evt_x", tc.typ, jan31.Unix(), tc.obj(e)))
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Equal(t, "ignored\n", rec.Body.String())
			assert.Equal(t, billing.StatusCompleted, e.record().Status)
			assert.Equal(t, rows, e.history(), "an ignored event wrote history")
			assert.Equal(t, tc.wantLookups, e.intent.calls, "intent lookups")
		})
	}
}

func TestWebhookRefundLooksUpTheIntent(t *testing.T) {
	e := newSettleEnv(t, billingtest.Succeeded())
	pi := e.txn()
	e.intent.meta[pi] = e.intentObj(pi, "", nil)["metadata"].(map[string]string)
	body := eventJSON(t, "evt_ref", stripe.EventTypeChargeRefunded, jan31.Unix(), chargeObj(pi, 499, nil))
	for i := range 2 {
		rec := deliver(e.h, body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assert.Equal(t, []string{"applied\n", "replay\n"}[i], rec.Body.String())
	}
	assert.Equal(t, billing.StatusRefunded, e.record().Status)
	assert.Equal(t, 2, e.intent.calls, "one lookup per delivery")

	// A lookup that fails is retried by Stripe: 500, nothing written.
	e2 := newSettleEnv(t, billingtest.Succeeded())
	rec := deliver(e2.h, eventJSON(t, "evt_ref2", stripe.EventTypeChargeRefunded, jan31.Unix(), chargeObj(e2.txn(), 499, nil)))
	require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
	assert.Equal(t, billing.StatusCompleted, e2.record().Status)
}

// failingSettler fails every settlement as a store outage would.
type failingSettler struct{ calls int }

func (f *failingSettler) ApplySettlement(context.Context, billing.Settlement) (billing.Period, bool, error) {
	f.calls++
	return billing.Period{}, false, errors.New("dynamodb: throughput exceeded")
}

func TestWebhookStoreFailureIsRetried(t *testing.T) {
	f := &failingSettler{}
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Collector: f})
	require.NoError(t, err)
	obj := map[string]any{"id": "pi_1", "object": "payment_intent", "status": "succeeded",
		"metadata": map[string]string{billingstripe.MetadataSubscriptionID: "sub-1"}}
	rec := deliver(h, eventJSON(t, "evt_1", stripe.EventTypePaymentIntentSucceeded, jan31.Unix(), obj))
	assert.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
	assert.Equal(t, 1, f.calls)
	assert.NotContains(t, rec.Body.String(), "throughput", "the answer leaks internals")
}

func TestWebhookMalformedObject(t *testing.T) {
	f := &failingSettler{}
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Collector: f})
	require.NoError(t, err)
	body := []byte(strings.ReplaceAll(string(eventJSON(t, "evt_1", stripe.EventTypePaymentIntentSucceeded, jan31.Unix(),
		map[string]any{"id": "pi_1", "object": "payment_intent", "amount": "MARKER"})), `"MARKER"`, `{"not":"a number"}`))
	rec := deliver(h, body)
	assert.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	assert.Zero(t, f.calls)
}

func TestNewWebhookHandlerValidates(t *testing.T) {
	acc, err := billingtest.NewAccounts(billingtest.AccountsOptions{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		cfg  billingstripe.WebhookConfig
		want string
	}{
		{"no secret", billingstripe.WebhookConfig{Collector: &failingSettler{}}, "Secret"},
		{"nothing to apply", billingstripe.WebhookConfig{Secret: testSecret}, "Collector, Accounts"},
		{"accounts without users", billingstripe.WebhookConfig{Secret: testSecret, Accounts: acc, Tiers: tiers{}}, "Users"},
		{"accounts without tiers", billingstripe.WebhookConfig{Secret: testSecret, Accounts: acc, Users: users{}}, "Tiers"},
		{"negative body limit", billingstripe.WebhookConfig{Secret: testSecret, Collector: &failingSettler{}, MaxBodyBytes: -1}, "MaxBodyBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := billingstripe.NewWebhookHandler(tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestWebhookPaymentFailed checks which payment_failed events change a
// record: a card's never does (the charge's own answer recorded its
// decline), nor does one of an attempt the record has moved past, which
// answers 200 so that Stripe stops redelivering it; a delayed debit's
// return still applies.
func TestWebhookPaymentFailed(t *testing.T) {
	nsf := func(method string) map[string]any {
		e := map[string]any{"code": "insufficient_funds", "message": "The customer's account has insufficient funds.", "type": "card_error"}
		if method != "" {
			e["payment_method"] = map[string]any{"id": "pm_1", "object": "payment_method", "type": method}
		}
		return e
	}
	const nsfReason = "The customer's account has insufficient funds. (insufficient_funds)"
	// declinedTwice is a record whose card was declined on attempt 1 and,
	// a day later, on attempt 2.
	// Its two attempts are two payments, as a version of the library
	// before PriorPayment made them (a provider now confirms the first
	// payment again): their records are still in hosts' tables.
	declinedTwice := func(t *testing.T) *settleEnv {
		e := newSettleEnv(t, billingtest.Declined("insufficient_funds", true))
		e.pay.SetIgnorePriorPayment(true)
		e.clock.Advance(24 * time.Hour)
		_, err := e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunRetry})
		require.NoError(t, err)
		cur := e.record()
		require.Equal(t, billing.StatusError, cur.Status)
		require.Equal(t, 2, cur.Attempt)
		require.Equal(t, "txn-"+billing.IdempotencyKey(e.sub.SubscriptionID, 2), cur.TransactionID)
		return e
	}
	attempt1 := func(e *settleEnv) string { return "txn-" + billing.IdempotencyKey(e.sub.SubscriptionID, 1) }
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) *settleEnv
		// intent is the failed intent the event carries.
		intent func(e *settleEnv) map[string]any
		want   string
		// changed is whether the delivery writes the record (to ERROR
		// with wantReason).
		changed    bool
		wantReason string
	}{
		{name: "late card failure of attempt 1 after attempt 2 was declined", setup: declinedTwice,
			intent: func(e *settleEnv) map[string]any {
				return e.intentObj(attempt1(e), "requires_payment_method", nsf("card"))
			}, want: "ignored, recorded by the charge"},
		{name: "late card failure named by the intent's only method type", setup: declinedTwice,
			intent: func(e *settleEnv) map[string]any {
				obj := e.intentObj(attempt1(e), "requires_payment_method", nsf(""))
				obj["payment_method_types"] = []string{"card"}
				return obj
			}, want: "ignored, recorded by the charge"},
		{name: "late failure of attempt 1 of an unnamed method after attempt 2", setup: declinedTwice,
			intent: func(e *settleEnv) map[string]any {
				return e.intentObj(attempt1(e), "requires_payment_method", nsf(""))
			}, want: "ignored, an earlier attempt"},
		{name: "card failure of the attempt recorded", setup: func(t *testing.T) *settleEnv {
			return newSettleEnv(t, billingtest.Declined("insufficient_funds", true))
		}, intent: func(e *settleEnv) map[string]any {
			return e.intentObj(attempt1(e), "requires_payment_method", nsf("card"))
		}, want: "ignored, recorded by the charge"},
		{name: "ACH return", setup: func(t *testing.T) *settleEnv { return newSettleEnv(t, billingtest.Pending()) },
			intent: func(e *settleEnv) map[string]any {
				return e.intentObj(e.txn(), "requires_payment_method", nsf("us_bank_account"))
			}, want: "applied", changed: true, wantReason: nsfReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.setup(t)
			before, rows := e.record(), e.history()
			e.clock.Advance(time.Hour)
			body := eventJSON(t, "evt_failed", stripe.EventTypePaymentIntentPaymentFailed, e.clock.Now().Unix(), tc.intent(e))
			rec := deliver(e.h, body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Equal(t, tc.want+"\n", rec.Body.String())
			cur := e.record()
			if !tc.changed {
				assert.Equal(t, before.Status, cur.Status)
				assert.Equal(t, before.TransactionID, cur.TransactionID)
				assert.Equal(t, before.PaymentError, cur.PaymentError)
				assert.Equal(t, before.Attempt, cur.Attempt)
				assert.Equal(t, rows, e.history(), "an ignored event wrote history")
				return
			}
			assert.Equal(t, billing.StatusError, cur.Status)
			assert.Equal(t, tc.wantReason, cur.PaymentError)
			assert.Equal(t, append(rows, billing.StatusError), e.history())
			// Stripe delivers at least once: the redelivery is a replay.
			rec = deliver(e.h, body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Equal(t, "replay\n", rec.Body.String())
			billingtest.RequireNoDoubleCharge(t, e.pay)
		})
	}
}
