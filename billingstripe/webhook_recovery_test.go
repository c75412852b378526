package billingstripe_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
)

// These tests follow a PaymentIntent declined off-session that succeeds
// afterwards (issue 31): the Provider charges through the fake Stripe,
// and the webhook handler applies the intent's events to the collector.

// logBuffer is an io.Writer safe for a logger's concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recoveryEnv is a collEnv with a webhook handler in front of its
// collector, whose log lines are kept.
type recoveryEnv struct {
	*collEnv
	h    *billingstripe.WebhookHandler
	logs *logBuffer
}

func newRecoveryEnv(t *testing.T) *recoveryEnv {
	t.Helper()
	e := &recoveryEnv{collEnv: newCollEnv(t, collOptions{}), logs: &logBuffer{}}
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Collector: e.c,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	require.NoError(t, err)
	e.h = h
	return e
}

// intent returns the fake's intent id.
func (e *recoveryEnv) intent(t *testing.T, id string) stripetest.Intent {
	t.Helper()
	for _, in := range e.srv.Intents() {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("no intent %s", id)
	return stripetest.Intent{}
}

// deliverIntent delivers an event of typ about the fake's intent id as it
// stands, and returns the answer's status and body. A payment_failed
// event carries a card decline as its last payment error.
func (e *recoveryEnv) deliverIntent(t *testing.T, typ stripe.EventType, id string) (int, string) {
	t.Helper()
	in := e.intent(t, id)
	obj := map[string]any{"id": in.ID, "object": "payment_intent", "amount": in.Amount, "currency": in.Currency,
		"status": in.Status, "customer": in.Customer, "created": in.Created.Unix(), "metadata": in.Metadata,
		"payment_method_types": []string{"card"}}
	if typ == stripe.EventTypePaymentIntentPaymentFailed {
		obj["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds",
			"message":        "Your card has insufficient funds.",
			"payment_method": map[string]any{"id": in.PaymentMethod, "object": "payment_method", "type": "card"}}
	}
	rec := deliver(e.h, eventJSON(t, "evt_"+string(typ)+"_"+id, typ, e.clock.Now().Unix(), obj))
	return rec.Code, rec.Body.String()
}

// historyStatuses is the statuses of the record's history rows, oldest first.
func (e *recoveryEnv) historyStatuses(t *testing.T, subID string) []billing.Status {
	t.Helper()
	rows, err := e.hist.ListBySubscription(t.Context(), subID)
	require.NoError(t, err)
	out := make([]billing.Status, len(rows))
	for i, r := range rows {
		out[i] = r.Status
	}
	return out
}

// retryDays runs the retry run on each of the next days.
func (e *recoveryEnv) retryDays(t *testing.T, days int) {
	t.Helper()
	for range days {
		e.clock.Advance(24 * time.Hour)
		e.run(t, billing.RunRetry)
	}
}

// TestWebhookDeclinedIntentSucceedsOnSession: a card charge declined
// off-session (insufficient funds, or 3-D Secure required) is recorded
// ERROR with the intent; the customer confirms the same intent on-session
// and payment_intent.succeeded arrives, after the card's payment_failed
// or alone. The record is COMPLETED once, with one history row, a
// redelivery is a replay, and the retry runs create no new PaymentIntent.
func TestWebhookDeclinedIntentSucceedsOnSession(t *testing.T) {
	for _, tc := range []struct {
		name        string
		decline     stripetest.Outcome
		failedFirst bool
	}{
		{"insufficient funds", stripetest.Decline("insufficient_funds"), false},
		{"insufficient funds, payment_failed delivered first", stripetest.Decline("insufficient_funds"), true},
		{"authentication required", stripetest.AuthenticationRequired(), false},
		{"authentication required, payment_failed delivered first", stripetest.AuthenticationRequired(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRecoveryEnv(t)
			e.addCard("u1")
			s := e.subscribe(t, "u1")
			e.srv.Script("cus_u1", tc.decline)
			e.run(t, billing.RunScheduled)
			declined := e.get(t, s.SubscriptionID)
			require.Equal(t, billing.StatusError, declined.Status)
			require.Len(t, e.srv.Intents(), 1)
			pi := e.srv.Intents()[0].ID
			require.Equal(t, pi, declined.TransactionID)
			require.Empty(t, e.srv.Charged())
			rows := e.historyStatuses(t, s.SubscriptionID)

			if tc.failedFirst {
				code, body := e.deliverIntent(t, stripe.EventTypePaymentIntentPaymentFailed, pi)
				require.Equal(t, http.StatusOK, code, body)
				assert.Equal(t, "ignored, recorded by the charge\n", body)
				assert.Equal(t, rows, e.historyStatuses(t, s.SubscriptionID))
			}

			// The customer confirms the intent on-session.
			e.clock.Advance(2 * time.Hour)
			e.srv.SetStatus(pi, "succeeded")
			code, body := e.deliverIntent(t, stripe.EventTypePaymentIntentSucceeded, pi)
			require.Equal(t, http.StatusOK, code, body)
			assert.Equal(t, "applied\n", body)
			paid := e.get(t, s.SubscriptionID)
			assert.Equal(t, billing.StatusCompleted, paid.Status)
			assert.Equal(t, pi, paid.TransactionID)
			assert.Empty(t, paid.PaymentError)
			assert.Equal(t, append(rows, billing.StatusCompleted), e.historyStatuses(t, s.SubscriptionID))

			// Stripe delivers at least once.
			code, body = e.deliverIntent(t, stripe.EventTypePaymentIntentSucceeded, pi)
			require.Equal(t, http.StatusOK, code, body)
			assert.Equal(t, "replay\n", body)
			if tc.failedFirst {
				// ... and in any order: the failure redelivered after the
				// success changes nothing.
				code, body = e.deliverIntent(t, stripe.EventTypePaymentIntentPaymentFailed, pi)
				require.Equal(t, http.StatusOK, code, body)
			}
			assert.Equal(t, append(rows, billing.StatusCompleted), e.historyStatuses(t, s.SubscriptionID))

			creates := e.srv.CreateRequests()
			e.retryDays(t, 3)
			assert.Equal(t, creates, e.srv.CreateRequests(), "a retry run charged the paid period again")
			assert.Len(t, e.srv.Intents(), 1)
			assert.Equal(t, billing.StatusCompleted, e.get(t, s.SubscriptionID).Status)
			requireOneChargePerPeriod(t, e.srv, e.repo)
		})
	}
}

// TestWebhookEarlierIntentSucceedsAfterRetry: the retry run confirmed
// the declined intent again, declined again, and the customer confirms it
// on-session afterwards. The intent's success completes the period; no
// retry made a second intent. When the period was waived meanwhile, the
// success is a duplicate payment (the customer paid a period no longer
// owed), answered and logged as such, not ignored.
func TestWebhookEarlierIntentSucceedsAfterRetry(t *testing.T) {
	t.Run("period unpaid", func(t *testing.T) {
		e := newRecoveryEnv(t)
		e.addCard("u1")
		s := e.subscribe(t, "u1")
		e.srv.Script("cus_u1", stripetest.Decline("insufficient_funds"), stripetest.Decline("insufficient_funds"))
		e.run(t, billing.RunScheduled)
		e.retryDays(t, 1)
		require.Len(t, e.srv.Intents(), 1, "the retry confirmed the same intent again")
		require.Equal(t, 1, e.srv.ConfirmRequests())
		first := e.srv.Intents()[0].ID
		require.Equal(t, first, e.get(t, s.SubscriptionID).TransactionID)
		rows := e.historyStatuses(t, s.SubscriptionID)

		require.NoError(t, e.srv.ConfirmOnSession(first, stripetest.Succeed()))
		code, body := e.deliverIntent(t, stripe.EventTypePaymentIntentSucceeded, first)
		require.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, "applied\n", body)
		paid := e.get(t, s.SubscriptionID)
		assert.Equal(t, billing.StatusCompleted, paid.Status)
		assert.Equal(t, first, paid.TransactionID)
		assert.Equal(t, append(rows, billing.StatusCompleted), e.historyStatuses(t, s.SubscriptionID))

		creates := e.srv.CreateRequests()
		e.retryDays(t, 3)
		assert.Equal(t, creates, e.srv.CreateRequests(), "a retry run charged the paid period again")
		requireOneChargePerPeriod(t, e.srv, e.repo)
	})
	t.Run("period waived", func(t *testing.T) {
		e := newRecoveryEnv(t)
		e.addCard("u1")
		s := e.subscribe(t, "u1")
		e.srv.Script("cus_u1", stripetest.Decline("insufficient_funds"))
		e.run(t, billing.RunScheduled)
		first := e.srv.Intents()[0].ID
		_, err := e.c.Periods().WaiveByID(t.Context(), s.SubscriptionID)
		require.NoError(t, err)
		waived := e.get(t, s.SubscriptionID)
		require.Equal(t, billing.StatusWaived, waived.Status)
		rows := e.historyStatuses(t, s.SubscriptionID)

		require.NoError(t, e.srv.ConfirmOnSession(first, stripetest.Succeed()))
		code, body := e.deliverIntent(t, stripe.EventTypePaymentIntentSucceeded, first)
		require.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, "duplicate payment reported\n", body)
		assert.Contains(t, e.logs.String(), "level=WARN")
		assert.Contains(t, e.logs.String(), first)
		assert.Equal(t, waived, e.get(t, s.SubscriptionID), "the duplicate changed the record")
		assert.Equal(t, rows, e.historyStatuses(t, s.SubscriptionID), "the duplicate wrote history")
	})
}
