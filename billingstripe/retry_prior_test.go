package billingstripe_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
)

// TestRetryAfterOnSessionConfirmationChargesOnce is issue 40's first
// money item: a card declines off-session, the customer confirms the same
// PaymentIntent on session, and the payment_intent.succeeded notice
// reaches the host only after one, two or three retry runs. The retry run
// must not create a second payment: the provider reads the period's
// earlier intent (PaymentRequest.PriorPayment), finds it succeeded, and
// records the period paid by it. The late notice is then a replay, never
// a duplicate to refund, delivered once or twice, with the card's
// payment_failed before it or after. A retry run before the customer's
// confirmation confirms the same intent again (declined again) rather
// than creating another.
//
// Before the fix the retry run created a second intent with a new key,
// which succeeded: two succeeded intents for one period, and the late
// notice reported as a duplicate payment.
func TestRetryAfterOnSessionConfirmationChargesOnce(t *testing.T) {
	for _, declinedRetries := range []int{0, 1} {
		for _, runs := range []int{1, 2, 3} {
			for _, failed := range []string{"no payment_failed", "payment_failed before", "payment_failed after"} {
				for _, times := range []int{1, 2} {
					name := fmt.Sprintf("%d declined retries/notice after %d runs/%s/delivered %d times", declinedRetries, runs, failed, times)
					t.Run(name, func(t *testing.T) {
						testRetryAfterOnSessionConfirmation(t, declinedRetries, runs, failed, times)
					})
				}
			}
		}
	}
}

func testRetryAfterOnSessionConfirmation(t *testing.T, declinedRetries, runs int, failed string, times int) {
	e := newRecoveryEnv(t)
	e.addCard("u1")
	s := e.subscribe(t, "u1")
	// Every decline the script holds is used by a confirmation; payments
	// after them succeed (a second intent would too).
	script := make([]stripetest.Outcome, 0, declinedRetries+2)
	for range declinedRetries + 1 {
		script = append(script, stripetest.Decline("insufficient_funds"))
	}
	e.srv.Script("cus_u1", append(script, stripetest.Succeed())...)

	e.run(t, billing.RunScheduled)
	declined := e.get(t, s.SubscriptionID)
	require.Equal(t, billing.StatusError, declined.Status)
	require.Len(t, e.srv.Intents(), 1)
	pi := e.srv.Intents()[0].ID
	require.Equal(t, pi, declined.TransactionID)
	rows := e.historyStatuses(t, s.SubscriptionID)
	if failed == "payment_failed before" {
		code, body := e.deliverIntent(t, stripe.EventTypePaymentIntentPaymentFailed, pi)
		require.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, "ignored, recorded by the charge\n", body)
	}

	// Retry runs before the customer acts confirm the same intent again.
	e.retryDays(t, declinedRetries)
	for range declinedRetries {
		rows = append(rows, billing.StatusError)
	}
	require.Equal(t, rows, e.historyStatuses(t, s.SubscriptionID))
	require.Len(t, e.srv.Intents(), 1, "a retry run created another PaymentIntent")
	require.Equal(t, declinedRetries, e.srv.ConfirmRequests())

	// The customer confirms the intent on session; the notice is late.
	require.NoError(t, e.srv.ConfirmOnSession(pi, stripetest.Succeed()))
	e.retryDays(t, runs)

	for range times {
		code, body := e.deliverIntent(t, stripe.EventTypePaymentIntentSucceeded, pi)
		require.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, "replay\n", body, "the late notice of the payment the retry recorded")
	}
	if failed == "payment_failed after" {
		code, body := e.deliverIntent(t, stripe.EventTypePaymentIntentPaymentFailed, pi)
		require.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, "ignored, recorded by the charge\n", body)
	}
	e.retryDays(t, 2)

	// One payment, at Stripe and on the record.
	charged := e.srv.Charged()
	require.Len(t, charged, 1, "the period was charged twice")
	assert.Equal(t, pi, charged[0].ID)
	assert.Len(t, e.srv.Intents(), 1)
	assert.Equal(t, 1, e.srv.CreateRequests(), "a retry run created a payment")
	assert.Equal(t, declinedRetries, e.srv.ConfirmRequests(), "a retry confirmed the succeeded intent")
	paid := e.get(t, s.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, paid.Status)
	assert.Equal(t, pi, paid.TransactionID)
	assert.Empty(t, paid.PaymentError)
	assert.Equal(t, declinedRetries+2, paid.Attempt, "the retry that found the intent paid is the period's last attempt")
	assert.False(t, paid.InFlight())
	assert.Equal(t, append(rows, billing.StatusCompleted), e.historyStatuses(t, s.SubscriptionID), "COMPLETED once")
	assert.NotContains(t, e.logs.String(), "duplicate")
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

// TestCollectFromPriorPayment covers each state the period's earlier
// PaymentIntent can be in when an attempt names it.
func TestCollectFromPriorPayment(t *testing.T) {
	ctx := t.Context()
	// declined makes attempt 1 of user's period and returns its intent.
	declined := func(t *testing.T, e *fakeEnv, user string, o stripetest.Outcome) string {
		t.Helper()
		e.srv.Script("cus_"+user, o)
		res, err := e.p.Collect(ctx, request(user, 1))
		require.NoError(t, err)
		require.Equal(t, billing.OutcomeDeclined, res.Outcome)
		return res.TransactionID
	}
	retry := func(user, prior string) billing.PaymentRequest {
		req := request(user, 2)
		req.PriorPayment = prior
		return req
	}

	t.Run("succeeded on session: that intent, nothing charged", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		pi := declined(t, e, "u1", stripetest.Decline("insufficient_funds"))
		require.NoError(t, e.srv.ConfirmOnSession(pi, stripetest.Succeed()))
		e.srv.Script("cus_u1", stripetest.Succeed())
		res, err := e.p.Collect(ctx, retry("u1", pi))
		require.NoError(t, err)
		assert.Equal(t, billing.PaymentResult{Outcome: billing.OutcomeSucceeded, TransactionID: pi, AccountMask: "4242", PaymentType: "CARD"}, res)
		assert.Equal(t, 1, e.srv.CreateRequests())
		assert.Equal(t, 0, e.srv.ConfirmRequests())
		// A lookup of the retry's key finds the same payment.
		got, found, err := e.p.LookupPayment(ctx, retry("u1", pi))
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, res, got)
	})
	t.Run("declined card: the same intent confirmed again, replayed under its key", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		pi := declined(t, e, "u1", stripetest.Decline("insufficient_funds"))
		e.srv.Script("cus_u1", stripetest.Succeed())
		req := retry("u1", pi)
		e.srv.InjectFault(req.IdempotencyKey+":confirm", stripetest.DropResponse())
		// The answer is lost (or Go's transport resends the request on a
		// fresh connection, which Stripe answers from the key).
		_, _ = e.p.Collect(ctx, req)
		res, err := e.p.Collect(ctx, req) // the collector's replay
		require.NoError(t, err)
		assert.Equal(t, billing.OutcomeSucceeded, res.Outcome)
		assert.Equal(t, pi, res.TransactionID)
		assert.Len(t, e.srv.Intents(), 1)
		assert.Len(t, e.srv.Charged(), 1)
		// The customer cannot pay it again on session.
		require.ErrorIs(t, e.srv.ConfirmOnSession(pi, stripetest.Succeed()), stripetest.ErrIntentState)
	})
	t.Run("declined card again: declined with the same intent", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		pi := declined(t, e, "u1", stripetest.Decline("insufficient_funds"))
		e.srv.Script("cus_u1", stripetest.Decline("stolen_card"))
		res, err := e.p.Collect(ctx, retry("u1", pi))
		require.NoError(t, err)
		assert.Equal(t, billing.OutcomeDeclined, res.Outcome)
		assert.Equal(t, pi, res.TransactionID)
		assert.False(t, res.Retryable)
		assert.Contains(t, res.DeclineReason, "stolen_card")
		// Nothing was charged with the retry's key: a lookup says so.
		_, found, err := e.p.LookupPayment(ctx, retry("u1", pi))
		require.NoError(t, err)
		assert.False(t, found)
	})
	t.Run("failed bank debit: canceled, then a new intent", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addBank("u2")
		res, err := e.p.Collect(ctx, request("u2", 1))
		require.NoError(t, err)
		require.Equal(t, billing.OutcomePending, res.Outcome)
		pi := res.TransactionID
		require.NoError(t, e.srv.FailProcessing(pi, stripetest.BankDebitFailed("insufficient_funds")))
		res, err = e.p.Collect(ctx, retry("u2", pi))
		require.NoError(t, err)
		assert.Equal(t, billing.OutcomePending, res.Outcome)
		assert.NotEqual(t, pi, res.TransactionID)
		assert.Equal(t, 1, e.srv.CancelRequests())
		ins := e.srv.Intents()
		require.Len(t, ins, 2)
		assert.Equal(t, "canceled", ins[0].Status)
		assert.Equal(t, "processing", ins[1].Status)
		// The canceled debit can never go through.
		require.ErrorIs(t, e.srv.ConfirmOnSession(pi, stripetest.Succeed()), stripetest.ErrIntentState)
	})
	t.Run("canceled, unknown or of another period: a new intent", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		e.addCard("u3")
		pi := declined(t, e, "u1", stripetest.Decline("insufficient_funds"))
		other := declined(t, e, "u3", stripetest.Decline("insufficient_funds"))
		e.srv.SetStatus(pi, "canceled")
		e.srv.Script("cus_u1", stripetest.Succeed())
		for i, prior := range []string{pi, "pi_unknown", other, "txn-legacy-1"} {
			req := retry("u1", prior)
			req.Attempt = 2 + i
			req.IdempotencyKey = billing.IdempotencyKey(req.SubscriptionID, req.Attempt)
			res, err := e.p.Collect(ctx, req)
			require.NoError(t, err, prior)
			assert.Equal(t, billing.OutcomeSucceeded, res.Outcome, prior)
			assert.NotContains(t, []string{pi, other}, res.TransactionID, prior)
		}
		assert.Equal(t, 0, e.srv.ConfirmRequests())
		assert.Equal(t, 0, e.srv.CancelRequests())
	})
	t.Run("another amount: canceled, then a new intent", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		pi := declined(t, e, "u1", stripetest.Decline("insufficient_funds"))
		e.srv.Script("cus_u1", stripetest.Succeed())
		req := retry("u1", pi)
		req.Amount = billing.MustParseAmount("9.99")
		res, err := e.p.Collect(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, billing.OutcomeSucceeded, res.Outcome)
		assert.NotEqual(t, pi, res.TransactionID)
		assert.True(t, slices.ContainsFunc(e.srv.Intents(), func(in stripetest.Intent) bool { return in.ID == pi && in.Status == "canceled" }))
	})
	t.Run("the customer paid another amount on session: unknown", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		pi := declined(t, e, "u1", stripetest.Decline("insufficient_funds"))
		require.NoError(t, e.srv.ConfirmOnSession(pi, stripetest.Succeed()))
		req := retry("u1", pi)
		req.Amount = billing.MustParseAmount("9.99")
		_, err := e.p.Collect(ctx, req)
		require.ErrorIs(t, err, billingstripe.ErrUnexpectedAnswer)
		assert.Equal(t, 1, e.srv.CreateRequests())
	})
}
