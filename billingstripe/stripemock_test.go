package billingstripe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"
)

// stripeMockURL returns the base URL of a stripe-mock server: STRIPE_MOCK_URL
// when set, otherwise a stripe-mock binary (on PATH or in GOBIN/GOPATH/bin)
// started on a free loopback port for the test and stopped after it.
// Without one the test is skipped, except under CI=true, where it fails.
func stripeMockURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("STRIPE_MOCK_URL"); u != "" {
		return u
	}
	bin, err := findStripeMock()
	if err != nil {
		msg := "stripe-mock not found (go install github.com/stripe/stripe-mock@v0.203.0, or set STRIPE_MOCK_URL): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-http-addr", addr)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/v1/payment_intents")
		if err == nil {
			_ = resp.Body.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatalf("stripe-mock at %s did not answer: %v\n%s", addr, err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func findStripeMock() (string, error) {
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("GOPATH"); d != "" {
		dirs = append(dirs, filepath.Join(d, "bin"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "stripe-mock")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("not on PATH, in GOBIN or in GOPATH/bin")
}

// recorder records every response's request and status.
type recorder struct {
	mu    sync.Mutex
	calls []string
	next  http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.calls = append(r.calls, fmt.Sprintf("%s %s: %v", req.Method, req.URL.Path, err))
	} else {
		r.calls = append(r.calls, fmt.Sprintf("%s %s %d idempotency-key=%q", req.Method, req.URL.Path, resp.StatusCode, req.Header.Get("Idempotency-Key")))
	}
	return resp, err
}

// TestStripeMockAcceptsEveryRequest sends each kind of request the
// provider makes (create-and-confirm off-session with metadata, expand
// and an idempotency key; the list by customer and created[gte] with
// expand) to stripe-mock, which checks them against Stripe's OpenAPI spec
// and answers 400 to anything the spec does not allow.
func TestStripeMockAcceptsEveryRequest(t *testing.T) {
	url := stripeMockURL(t)
	rec := &recorder{next: http.DefaultTransport}
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(url), HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: rec},
		MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	client := stripe.NewClient("sk_test_123", stripe.WithBackends(backends))
	p, err := billingstripe.New(billingstripe.Config{Client: client, Customers: billingstripe.CustomersFunc(
		func(context.Context, string) (billingstripe.Customer, error) {
			return billingstripe.Customer{ID: "cus_123", PaymentMethod: "pm_123"}, nil
		})})
	require.NoError(t, err)
	req := request("u1", 1)

	// stripe-mock keeps no state and answers with a fixture intent (its
	// own amount, no metadata), which the provider refuses to take as this
	// attempt's outcome: what counts here is that the request was valid.
	_, err = p.Collect(t.Context(), req)
	require.ErrorIs(t, err, billingstripe.ErrUnexpectedAnswer)
	assert.NotErrorIs(t, err, billingstripe.ErrRejected)
	_, _, err = p.LookupPayment(t.Context(), req)
	require.NoError(t, err, "the fixture list holds no intent with the key")
	noStart := req
	noStart.Started = time.Time{}
	_, _, err = p.LookupPayment(t.Context(), noStart)
	require.NoError(t, err)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.calls, 3)
	assert.Equal(t, `POST /v1/payment_intents 200 idempotency-key="dynabill:sub-u1:1"`, rec.calls[0])
	for _, c := range rec.calls[1:] {
		assert.True(t, strings.HasPrefix(c, "GET /v1/payment_intents 200"), c)
	}
}

// TestStripeMockDecodes checks that stripe-mock's fixture intent, in
// today's full wire format, decodes and maps.
func TestStripeMockDecodes(t *testing.T) {
	url := stripeMockURL(t)
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{URL: stripe.String(url), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}})
	client := stripe.NewClient("sk_test_123", stripe.WithBackends(backends))
	pi, err := client.V1PaymentIntents.Retrieve(t.Context(), "pi_123", nil)
	require.NoError(t, err)
	assert.NotEmpty(t, pi.ID)
	assert.NotEmpty(t, pi.Status)
	var _ billing.PaymentProvider = (*billingstripe.Provider)(nil)
}

// priorIntent answers a retrieve of the PaymentIntent id with an intent of
// request("u1", …)'s period that a confirmation failed on, paid by a
// payment method of type pmType, and passes every other request on: the
// stateless stripe-mock cannot hold such an intent itself.
type priorIntent struct {
	id, pmType string
	next       http.RoundTripper
}

func (p *priorIntent) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != "/v1/payment_intents/"+p.id {
		return p.next.RoundTrip(req)
	}
	body := fmt.Sprintf(`{"id":%q,"object":"payment_intent","amount":499,"currency":"usd","status":"requires_payment_method",
		"customer":"cus_123","payment_method":{"id":"pm_123","object":"payment_method","type":%q},
		"metadata":{"dynabill_subscription_id":"sub-u1","dynabill_idempotency_key":"dynabill:sub-u1:1"},
		"last_payment_error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds"}}`, p.id, p.pmType)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

// TestStripeMockAcceptsRetriesOfThePriorIntent sends the requests a retry
// makes on the period's earlier PaymentIntent to stripe-mock: the
// retrieve, the off-session confirmation of a declined card intent with
// the saved payment method, and the cancel of a failed bank debit, each
// with its own idempotency key. stripe-mock answers a fixture intent the
// provider refuses as this attempt's outcome; what counts is that the
// requests were valid (a 400 would be ErrRejected).
func TestStripeMockAcceptsRetriesOfThePriorIntent(t *testing.T) {
	url := stripeMockURL(t)
	for _, tc := range []struct{ pmType, call string }{
		{"card", `POST /v1/payment_intents/pi_prior/confirm 200 idempotency-key="dynabill:sub-u1:2:confirm"`},
		{"us_bank_account", `POST /v1/payment_intents/pi_prior/cancel 200 idempotency-key="dynabill:sub-u1:2:cancel"`},
	} {
		t.Run(tc.pmType, func(t *testing.T) {
			rec := &recorder{next: &priorIntent{id: "pi_prior", pmType: tc.pmType, next: http.DefaultTransport}}
			backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
				URL: stripe.String(url), HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: rec},
				MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
			})
			client := stripe.NewClient("sk_test_123", stripe.WithBackends(backends))
			p, err := billingstripe.New(billingstripe.Config{Client: client, Customers: billingstripe.CustomersFunc(
				func(context.Context, string) (billingstripe.Customer, error) {
					return billingstripe.Customer{ID: "cus_123", PaymentMethod: "pm_123"}, nil
				})})
			require.NoError(t, err)
			req := request("u1", 2)
			req.PriorPayment = "pi_prior"
			_, err = p.Collect(t.Context(), req)
			require.Error(t, err)
			assert.NotErrorIs(t, err, billingstripe.ErrRejected)

			rec.mu.Lock()
			defer rec.mu.Unlock()
			require.GreaterOrEqual(t, len(rec.calls), 2, "%q", rec.calls)
			assert.Equal(t, `GET /v1/payment_intents/pi_prior 200 idempotency-key=""`, rec.calls[0])
			assert.Equal(t, tc.call, rec.calls[1])
		})
	}
}
