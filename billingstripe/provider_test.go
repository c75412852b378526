package billingstripe_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"
)

// debugLogger logs to stderr at debug level when SIM_DEBUG is set.
func debugLogger() *slog.Logger {
	if os.Getenv("SIM_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

var start = time.Date(2026, 3, 5, 12, 0, 0, 0, time.UTC)

// customers is the host's user → Stripe mapping for the tests.
type customers struct {
	mu sync.Mutex
	m  map[string]billingstripe.Customer
}

func (c *customers) StripeCustomer(_ context.Context, userID string) (billingstripe.Customer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cu, ok := c.m[userID]
	if !ok {
		return billingstripe.Customer{}, fmt.Errorf("no Stripe customer for user %s", userID)
	}
	return cu, nil
}

func (c *customers) set(userID string, cu billingstripe.Customer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[userID] = cu
}

// fakeEnv is a Provider over the fake Stripe.
type fakeEnv struct {
	srv   *stripetest.Server
	clock *billingtest.Clock
	cust  *customers
	p     *billingstripe.Provider
}

func newFakeEnv(t *testing.T, co stripetest.ClientOptions) *fakeEnv {
	t.Helper()
	clock := billingtest.NewClock(start)
	srv := stripetest.New(stripetest.Options{Clock: clock.Now})
	t.Cleanup(srv.Close)
	e := &fakeEnv{srv: srv, clock: clock, cust: &customers{m: map[string]billingstripe.Customer{}}}
	p, err := billingstripe.New(billingstripe.Config{Client: srv.Client(co), Customers: e.cust, Clock: clock.Now, Logger: debugLogger()})
	require.NoError(t, err)
	e.p = p
	return e
}

// addCard adds a user whose Stripe customer has a card ending in 4242.
func (e *fakeEnv) addCard(user string) {
	e.add(user, stripetest.PaymentMethod{ID: "pm_card_" + user, Type: "card", Last4: "4242"})
}

// addBank adds a user whose Stripe customer has a us_bank_account ending in 6789.
func (e *fakeEnv) addBank(user string) {
	e.add(user, stripetest.PaymentMethod{ID: "pm_bank_" + user, Type: "us_bank_account", Last4: "6789"})
}

func (e *fakeEnv) add(user string, pm stripetest.PaymentMethod) {
	e.srv.AddCustomer("cus_"+user, pm)
	e.cust.set(user, billingstripe.Customer{ID: "cus_" + user, PaymentMethod: pm.ID})
}

func request(user string, attempt int) billing.PaymentRequest {
	sub := "sub-" + user
	return billing.PaymentRequest{
		UserID: user, SubscriptionID: sub, Amount: billing.MustParseAmount("4.99"),
		BillingDate: time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC), Tier: "Plus:v2", Process: billing.ProcessInitial,
		Attempt: attempt, IdempotencyKey: billing.IdempotencyKey(sub, attempt), Started: start,
	}
}

func TestCollectOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		bank   bool
		script stripetest.Outcome
		want   billing.PaymentResult
		status string
	}{
		{"card succeeds", false, stripetest.Succeed(),
			billing.PaymentResult{Outcome: billing.OutcomeSucceeded, AccountMask: "4242", PaymentType: "CARD"}, "succeeded"},
		{"ACH debit is processing", true, stripetest.Succeed(),
			billing.PaymentResult{Outcome: billing.OutcomePending, AccountMask: "6789", PaymentType: "ACH"}, "processing"},
		{"insufficient funds", false, stripetest.Decline("insufficient_funds"),
			billing.PaymentResult{Outcome: billing.OutcomeDeclined, Retryable: true, DeclineReason: "Your card was declined. (card_declined/insufficient_funds)",
				Decline: billing.DeclineInsufficientFunds, AccountMask: "4242", PaymentType: "CARD"}, "requires_payment_method"},
		{"stolen card", false, stripetest.Decline("stolen_card"),
			billing.PaymentResult{Outcome: billing.OutcomeDeclined, DeclineReason: "Your card was declined. (card_declined/stolen_card)",
				Decline: billing.DeclineHard, AccountMask: "4242", PaymentType: "CARD"}, "requires_payment_method"},
		{"authentication required off-session", false, stripetest.AuthenticationRequired(),
			billing.PaymentResult{Outcome: billing.OutcomeDeclined,
				DeclineReason: "Your card was declined. This transaction requires authentication. (authentication_required/authentication_required)",
				Decline:       billing.DeclineAuthenticationRequired, AccountMask: "4242", PaymentType: "CARD"}, "requires_payment_method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t, stripetest.ClientOptions{})
			if tt.bank {
				e.addBank("u1")
			} else {
				e.addCard("u1")
			}
			e.srv.Script("cus_u1", tt.script)
			req := request("u1", 1)
			res, err := e.p.Collect(t.Context(), req)
			require.NoError(t, err)
			intents := e.srv.Intents()
			require.Len(t, intents, 1)
			in := intents[0]
			tt.want.TransactionID = in.ID
			assert.Equal(t, tt.want, res)
			assert.Equal(t, tt.status, in.Status)
			assert.Equal(t, int64(499), in.Amount)
			assert.Equal(t, "usd", in.Currency)
			assert.Equal(t, "cus_u1", in.Customer)
			assert.Equal(t, map[string]string{
				billingstripe.MetadataIdempotencyKey: "dynabill:sub-u1:1", billingstripe.MetadataSubscriptionID: "sub-u1",
				billingstripe.MetadataUserID: "u1", billingstripe.MetadataBillingDate: "2026-03-05", billingstripe.MetadataAttempt: "1",
			}, in.Metadata)

			again, err := e.p.Collect(t.Context(), req)
			require.NoError(t, err)
			assert.Equal(t, res, again, "the same key is answered with the first answer")
			assert.Len(t, e.srv.Intents(), 1, "and charges nothing more")

			found, ok, err := e.p.LookupPayment(t.Context(), req)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, res, found, "a lookup maps the intent as Collect mapped the answer")
		})
	}
}

// TestCollectNamesTheInvoice: a request that names its invoice (the
// collector issues invoices) creates an intent whose description and
// metadata carry the invoice's number, and its ID; one that names none
// carries neither.
func TestCollectNamesTheInvoice(t *testing.T) {
	e := newFakeEnv(t, stripetest.ClientOptions{})
	e.addCard("u1")
	e.addCard("u2")
	req := request("u1", 1)
	req.InvoiceID, req.InvoiceNumber = "in_dTE.20260305T090000Z_0a1b2c", "ACME-0007"
	_, err := e.p.Collect(t.Context(), req)
	require.NoError(t, err)
	_, err = e.p.Collect(t.Context(), request("u2", 1))
	require.NoError(t, err)
	intents := e.srv.Intents()
	require.Len(t, intents, 2)
	assert.Equal(t, "Plus subscription, billing date 2026-03-05, invoice ACME-0007", intents[0].Description)
	assert.Equal(t, "ACME-0007", intents[0].Metadata[billingstripe.MetadataInvoiceNumber])
	assert.Equal(t, req.InvoiceID, intents[0].Metadata[billingstripe.MetadataInvoiceID])
	assert.Equal(t, "Plus subscription, billing date 2026-03-05", intents[1].Description)
	assert.NotContains(t, intents[1].Metadata, billingstripe.MetadataInvoiceNumber)
	assert.NotContains(t, intents[1].Metadata, billingstripe.MetadataInvoiceID)
}

func TestCollectFaults(t *testing.T) {
	t.Run("429 with no intent for the key: unknown, never a refusal; the replay charges once", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		req := request("u1", 1)
		e.srv.InjectFault(req.IdempotencyKey, stripetest.RateLimited(3*time.Second))
		_, err := e.p.Collect(t.Context(), req)
		require.Error(t, err)
		assert.NotErrorIs(t, err, billing.ErrRateLimited, "an earlier try may still be running: not a refusal")
		var rl *billing.RateLimitedError
		assert.NotErrorAs(t, err, &rl)
		assert.Contains(t, err.Error(), "outcome unknown")
		assert.Contains(t, err.Error(), req.IdempotencyKey)
		assert.Empty(t, e.srv.Intents())
		res, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err, "Stripe saved no answer to the 429: the replay is executed")
		assert.Equal(t, billing.OutcomeSucceeded, res.Outcome)
		require.Len(t, e.srv.Intents(), 1)
		assert.Equal(t, e.srv.Intents()[0].ID, res.TransactionID)
		assert.Equal(t, 2, e.srv.CreateRequests())
	})
	t.Run("429 while an earlier try of the call still runs: unknown; that try's charge is the answer", func(t *testing.T) {
		// The first try runs on at Stripe after the client timed out;
		// stripe-go retries with the same key and that try is rate-limited.
		e := newFakeEnv(t, stripetest.ClientOptions{MaxNetworkRetries: 1, Timeout: 300 * time.Millisecond})
		e.addCard("u1")
		req := request("u1", 1)
		e.srv.InjectFault(req.IdempotencyKey, stripetest.Running())
		e.srv.InjectFault(req.IdempotencyKey, stripetest.RateLimited(time.Second))
		_, err := e.p.Collect(t.Context(), req)
		require.Error(t, err)
		assert.NotErrorIs(t, err, billing.ErrRateLimited, "the running try may charge: never a refusal")
		assert.Contains(t, err.Error(), "outcome unknown")
		assert.Equal(t, 2, e.srv.CreateRequests(), "the running try and the rate-limited one")
		assert.Empty(t, e.srv.Intents(), "the running try is invisible to the lookup")

		_, err = e.p.Collect(t.Context(), req)
		require.ErrorIs(t, err, billing.ErrKeyInUse, "a replay while the first try runs")
		require.Equal(t, 1, e.srv.CompleteRunning())
		res, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, billing.OutcomeSucceeded, res.Outcome)
		require.Len(t, e.srv.Intents(), 1, "one intent for the key, never a second")
		assert.Equal(t, e.srv.Intents()[0].ID, res.TransactionID)
		assert.Equal(t, req.IdempotencyKey, e.srv.Intents()[0].Metadata[billingstripe.MetadataIdempotencyKey])
	})
	t.Run("429 after an earlier try of the call charged: the charge is the answer", func(t *testing.T) {
		// stripe-go (or Go's transport, on a reused connection) sends the
		// request again after the dropped answer; that try is rate-limited.
		e := newFakeEnv(t, stripetest.ClientOptions{MaxNetworkRetries: 1})
		e.addCard("u1")
		req := request("u1", 1)
		e.srv.InjectFault(req.IdempotencyKey, stripetest.DropResponse())
		e.srv.InjectFault(req.IdempotencyKey, stripetest.RateLimited(time.Second))
		res, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err, "never a refusal: the first try charged")
		require.Len(t, e.srv.Charged(), 1)
		assert.Equal(t, billing.OutcomeSucceeded, res.Outcome)
		assert.Equal(t, e.srv.Charged()[0].ID, res.TransactionID)
		assert.Equal(t, 2, e.srv.CreateRequests())
	})
	t.Run("429 whose confirming lookup fails: unknown, never a refusal", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		calls := 0
		p, err := billingstripe.New(billingstripe.Config{Client: e.srv.Client(stripetest.ClientOptions{}),
			Customers: billingstripe.CustomersFunc(func(ctx context.Context, userID string) (billingstripe.Customer, error) {
				calls++
				if calls > 1 {
					return billingstripe.Customer{}, fmt.Errorf("user directory down")
				}
				return e.cust.StripeCustomer(ctx, userID)
			})})
		require.NoError(t, err)
		req := request("u1", 1)
		e.srv.InjectFault(req.IdempotencyKey, stripetest.RateLimited(time.Second))
		_, err = p.Collect(t.Context(), req)
		require.Error(t, err)
		assert.NotErrorIs(t, err, billing.ErrRateLimited)
		assert.Contains(t, err.Error(), "outcome unknown")
		assert.Contains(t, err.Error(), "user directory down")
	})
	t.Run("a saved 500 is replayed, and the lookup finds nothing", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{MaxNetworkRetries: 2})
		e.addCard("u1")
		req := request("u1", 1)
		e.srv.InjectFault(req.IdempotencyKey, stripetest.ServerError())
		for range 2 {
			_, err := e.p.Collect(t.Context(), req)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "outcome unknown")
			assert.NotErrorIs(t, err, billing.ErrRateLimited)
		}
		assert.Equal(t, 2, e.srv.CreateRequests(), "stripe-go does not retry a 500 from Stripe itself")
		_, found, err := e.p.LookupPayment(t.Context(), req)
		require.NoError(t, err)
		assert.False(t, found)
		assert.Empty(t, e.srv.Intents())
	})
	t.Run("dropped response: unknown, then the replay answers", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		req := request("u1", 1)
		e.srv.InjectFault(req.IdempotencyKey, stripetest.DropResponse())
		_, err := e.p.Collect(t.Context(), req)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "outcome unknown")
		require.Len(t, e.srv.Charged(), 1, "Stripe charged before the connection dropped")
		res, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, billing.OutcomeSucceeded, res.Outcome)
		assert.Equal(t, e.srv.Charged()[0].ID, res.TransactionID)
		assert.Len(t, e.srv.Intents(), 1)
	})
	t.Run("dropped response retried by stripe-go with the same key", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{MaxNetworkRetries: 1})
		e.addCard("u1")
		req := request("u1", 1)
		e.srv.InjectFault(req.IdempotencyKey, stripetest.DropResponse())
		res, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, billing.OutcomeSucceeded, res.Outcome)
		assert.Equal(t, 2, e.srv.CreateRequests())
		assert.Len(t, e.srv.Intents(), 1)
	})
	t.Run("still running: key in use, lookup finds nothing until it completes", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{Timeout: 300 * time.Millisecond})
		e.addCard("u1")
		req := request("u1", 1)
		e.srv.InjectFault(req.IdempotencyKey, stripetest.Running())
		_, err := e.p.Collect(t.Context(), req)
		require.Error(t, err, "the client gave up")
		_, err = e.p.Collect(t.Context(), req)
		require.ErrorIs(t, err, billing.ErrKeyInUse)
		_, found, err := e.p.LookupPayment(t.Context(), req)
		require.NoError(t, err)
		assert.False(t, found, "nothing yet; the collector does not believe it within RequestTimeout")
		require.Equal(t, 1, e.srv.CompleteRunning())
		res, found, err := e.p.LookupPayment(t.Context(), req)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, billing.OutcomeSucceeded, res.Outcome)
		again, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, res, again)
		assert.Len(t, e.srv.Intents(), 1)
	})
	t.Run("same key, other parameters: unknown, look it up", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		req := request("u1", 1)
		first, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err)
		e.add("u1", stripetest.PaymentMethod{ID: "pm_new", Type: "card", Last4: "0077"}) // the user changed card
		_, err = e.p.Collect(t.Context(), req)
		require.ErrorIs(t, err, billingstripe.ErrIdempotencyMismatch)
		assert.Contains(t, err.Error(), "do not retry with a new key")
		found, ok, err := e.p.LookupPayment(t.Context(), req)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, first, found)
		assert.Len(t, e.srv.Intents(), 1)
	})
	t.Run("an invalid request is rejected, not declined", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.cust.set("u1", billingstripe.Customer{ID: "cus_missing", PaymentMethod: "pm_x"})
		_, err := e.p.Collect(t.Context(), request("u1", 1))
		require.ErrorIs(t, err, billingstripe.ErrRejected)
		assert.Empty(t, e.srv.Intents())
	})
	t.Run("a host without the user's customer: unknown, nothing sent", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		_, err := e.p.Collect(t.Context(), request("nobody", 1))
		require.Error(t, err)
		assert.Equal(t, 0, e.srv.CreateRequests())
	})
}

// TestKeysForgottenAfterADay shows why the provider's ReplayWindow stops
// short of a day: from 24 hours on, the same key may charge again.
func TestKeysForgottenAfterADay(t *testing.T) {
	e := newFakeEnv(t, stripetest.ClientOptions{})
	e.addCard("u1")
	assert.Equal(t, 23*time.Hour, e.p.ReplayWindow(), "an hour short of Stripe's day")
	req := request("u1", 1)
	_, err := e.p.Collect(t.Context(), req)
	require.NoError(t, err)
	e.clock.Advance(23*time.Hour + 59*time.Minute)
	_, err = e.p.Collect(t.Context(), req)
	require.NoError(t, err)
	assert.Len(t, e.srv.Charged(), 1, "within the day the key replays")
	e.clock.Advance(time.Minute)
	_, err = e.p.Collect(t.Context(), req)
	require.NoError(t, err)
	assert.Len(t, e.srv.Charged(), 2, "a day after, the key may be new to Stripe")
}

func TestLookupPayment(t *testing.T) {
	t.Run("pages through every intent of the customer", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		e.addCard("u2")
		first := request("u1", 1)
		_, err := e.p.Collect(t.Context(), first)
		require.NoError(t, err)
		for i := 2; i <= 230; i++ {
			_, err := e.p.Collect(t.Context(), request("u1", i))
			require.NoError(t, err)
		}
		_, err = e.p.Collect(t.Context(), request("u2", 1))
		require.NoError(t, err)
		res, found, err := e.p.LookupPayment(t.Context(), first)
		require.NoError(t, err)
		require.True(t, found, "the oldest intent is on the third page")
		assert.Equal(t, e.srv.Intents()[0].ID, res.TransactionID)
		assert.Equal(t, billing.OutcomeSucceeded, res.Outcome)
		_, found, err = e.p.LookupPayment(t.Context(), request("u2", 2))
		require.NoError(t, err)
		assert.False(t, found)
	})
	t.Run("lists from the attempt's start less the margin", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		req := request("u1", 1)
		_, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err)
		late := req
		late.Started = start.Add(30 * time.Minute) // within the hour of margin
		_, found, err := e.p.LookupPayment(t.Context(), late)
		require.NoError(t, err)
		assert.True(t, found)
		late.Started = start.Add(2 * time.Hour) // a start the request cannot have preceded
		_, found, err = e.p.LookupPayment(t.Context(), late)
		require.NoError(t, err)
		assert.False(t, found, "created[gte] bounds the list")
		late.Started = time.Time{}
		_, found, err = e.p.LookupPayment(t.Context(), late)
		require.NoError(t, err)
		assert.True(t, found, "an unknown start lists everything")
	})
	t.Run("another amount is an error, never a result", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addCard("u1")
		req := request("u1", 1)
		_, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err)
		other := req
		other.Amount = billing.MustParseAmount("9.99")
		_, _, err = e.p.LookupPayment(t.Context(), other)
		require.ErrorIs(t, err, billingstripe.ErrUnexpectedAnswer)
		assert.Contains(t, err.Error(), "dynabill:sub-u1:1")
	})
	t.Run("a settled ACH debit and a failed one", func(t *testing.T) {
		e := newFakeEnv(t, stripetest.ClientOptions{})
		e.addBank("u1")
		req := request("u1", 1)
		res, err := e.p.Collect(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, billing.OutcomePending, res.Outcome)
		e.srv.SetStatus(res.TransactionID, "succeeded")
		got, found, err := e.p.LookupPayment(t.Context(), req)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, billing.OutcomeSucceeded, got.Outcome)
		e.srv.SetStatus(res.TransactionID, "canceled")
		got, _, err = e.p.LookupPayment(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, billing.OutcomeDeclined, got.Outcome)
		assert.False(t, got.Retryable)
	})
	t.Run("an intent not confirmed yet is no outcome", func(t *testing.T) {
		// What a create-and-confirm request still running leaves visible
		// to a list: taken for a decline, the charge it may yet make would
		// be recorded nowhere.
		for _, status := range []string{"requires_confirmation", "requires_payment_method"} {
			e := newFakeEnv(t, stripetest.ClientOptions{})
			e.addCard("u1")
			req := request("u1", 1)
			res, err := e.p.Collect(t.Context(), req)
			require.NoError(t, err)
			e.srv.SetStatus(res.TransactionID, status)
			_, found, err := e.p.LookupPayment(t.Context(), req)
			require.ErrorIs(t, err, billingstripe.ErrUnexpectedAnswer, status)
			assert.False(t, found, status)
		}
	})
}

func TestNew(t *testing.T) {
	client := stripe.NewClient("sk_test_x")
	cust := &customers{m: map[string]billingstripe.Customer{}}
	tests := []struct {
		name    string
		cfg     billingstripe.Config
		wantErr string
	}{
		{"defaults", billingstripe.Config{Client: client, Customers: cust}, ""},
		{"upper-case currency", billingstripe.Config{Client: client, Customers: cust, Currency: "EUR"}, ""},
		{"no client", billingstripe.Config{Customers: cust}, "Config.Client"},
		{"no customers", billingstripe.Config{Client: client}, "Config.Customers"},
		{"zero-decimal currency", billingstripe.Config{Client: client, Customers: cust, Currency: "jpy"}, "Config.Currency"},
		{"three-decimal currency", billingstripe.Config{Client: client, Customers: cust, Currency: "kwd"}, "Config.Currency"},
		{"a window of a day", billingstripe.Config{Client: client, Customers: cust, ReplayWindow: 24 * time.Hour}, "Config.ReplayWindow"},
		{"negative window", billingstripe.Config{Client: client, Customers: cust, ReplayWindow: -time.Hour}, "Config.ReplayWindow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := billingstripe.New(tt.cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 23*time.Hour, p.ReplayWindow())
			assert.Equal(t, 5*time.Minute+10*time.Second, p.RequestTimeout())
		})
	}
}

func TestRequestTimeoutFor(t *testing.T) {
	assert.Equal(t, 310*time.Second, billingstripe.DefaultRequestTimeout, "3 × 80 s + 2 × 5 s + 1 min")
	assert.Equal(t, 30*time.Second+time.Minute, billingstripe.RequestTimeoutFor(30*time.Second, 0))
	assert.Equal(t, 4*20*time.Second+3*5*time.Second+time.Minute, billingstripe.RequestTimeoutFor(20*time.Second, 3))
}

// opaqueBackend is a host's own stripe.Backend, whose timeouts New cannot
// read.
type opaqueBackend struct{ stripe.Backend }

// TestNewDerivesRequestTimeout checks that New reads the fence a lookup's
// "not found" waits for from the client's own backend, refuses a backend
// that could keep a request running for ever or whose settings it cannot
// read, and lets an explicit RequestTimeout win.
func TestNewDerivesRequestTimeout(t *testing.T) {
	cust := &customers{m: map[string]billingstripe.Customer{}}
	backend := func(timeout time.Duration, retries int64) *stripe.Client {
		b := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
			URL:               stripe.String("http://127.0.0.1:1"),
			HTTPClient:        &http.Client{Timeout: timeout},
			MaxNetworkRetries: stripe.Int64(retries),
			LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		})
		return stripe.NewClient("sk_test_x", stripe.WithBackends(b))
	}
	opaque := stripe.NewClient("sk_test_x", stripe.WithBackends(&stripe.Backends{
		API: opaqueBackend{}, Connect: opaqueBackend{}, Uploads: opaqueBackend{}, MeterEvents: opaqueBackend{},
	}))
	tests := []struct {
		name     string
		client   *stripe.Client
		explicit time.Duration
		want     time.Duration
		wantErr  string
	}{
		{"default client", stripe.NewClient("sk_test_x"), 0, 3*80*time.Second + 2*5*time.Second + time.Minute, ""},
		{"20 s, no retries", backend(20*time.Second, 0), 0, 20*time.Second + time.Minute, ""},
		{"20 s, 3 retries", backend(20*time.Second, 3), 0, 4*20*time.Second + 3*5*time.Second + time.Minute, ""},
		{"explicit wins over the backend", backend(20*time.Second, 3), 45 * time.Minute, 45 * time.Minute, ""},
		{"no HTTP timeout", backend(0, 2), 0, 0, "no timeout"},
		{"no HTTP timeout, explicit", backend(0, 2), time.Hour, time.Hour, ""},
		{"a backend of the host's own", opaque, 0, 0, "cannot be read"},
		{"a backend of the host's own, explicit", opaque, 20 * time.Minute, 20 * time.Minute, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := billingstripe.New(billingstripe.Config{Client: tt.client, Customers: cust, RequestTimeout: tt.explicit})
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorContains(t, err, "Config.RequestTimeout")
				assert.Nil(t, p)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.RequestTimeout())
		})
	}
}
