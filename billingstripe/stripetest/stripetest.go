// Package stripetest is a stateful fake of the part of Stripe's API the
// billingstripe adapter uses, for tests of hosts and of the adapter: an
// HTTP server that stripe-go's real client talks to.
//
// It keeps PaymentIntents and idempotency keys, which stripe-mock does not,
// and follows Stripe's documented behaviour:
//
//   - POST /v1/payment_intents (form-encoded, confirm and off_session)
//     creates an intent and confirms it at once, with the outcome scripted
//     for its customer ([Server.Script]): succeeded, processing (ACH), a
//     card decline (HTTP 402 card_error carrying the failed intent),
//     authentication required, or the intent left requires_action with
//     its next_action ([RequiresAction]);
//   - GET /v1/payment_intents lists intents newest first, filtered by
//     customer and created[gte], paged by limit and starting_after, and
//     immediately consistent; GET /v1/payment_intents/{id} retrieves one;
//     expand[] of payment_method (data.payment_method in lists) is honoured;
//   - POST /v1/payment_intents/{id}/confirm (off_session, with the saved
//     payment_method) confirms again an intent that needs a payment
//     method, a confirmation or an action, with the customer's next
//     scripted outcome; POST /v1/payment_intents/{id}/cancel cancels such
//     an intent. Both refuse an intent that succeeded, is processing or
//     was canceled (400 payment_intent_unexpected_state): an intent
//     succeeds at most once, whoever confirms it (the API or
//     [Server.ConfirmOnSession]);
//   - idempotency: a request with a key seen before and the same
//     parameters gets the first response replayed, whatever it was (a
//     saved 500 included); while the first is still running, 409
//     idempotency_key_in_use; with other parameters, 400 idempotency_error.
//     Responses to requests refused before acting (validation errors, 409,
//     429) are not saved. Keys are pruned once 24 hours old by the
//     injected clock, after which the key is new again;
//   - faults ([Fault]): 429 with Retry-After before acting, 500 before
//     acting (saved for the key), the response dropped after acting, and a
//     request that keeps running after the client gave up and completes
//     when the test says ([Server.CompleteRunning]).
//
// # What happens after the charge
//
// A test moves an intent the way Stripe or the customer would, and the
// next retrieve or list sees it (a replay of the creating request still
// answers what that request answered, as Stripe's does):
// [Server.ConfirmOnSession] is the customer confirming a failed intent
// on-session (Stripe's recovery of a decline), [Server.Settle] and
// [Server.FailProcessing] end a processing bank debit, and [Server.Refund]
// refunds a succeeded intent's charge in full.
//
// # Webhook events
//
// [Server.Event] builds the event Stripe would send about an intent as the
// fake holds it now (payment_intent.succeeded, .processing, .payment_failed
// and charge.refunded), with the intent's amount, customer, payment method
// and metadata, in the SDK's API version, and signed as Stripe signs
// (Stripe-Signature "t=…,v1=…", an HMAC-SHA256 of "t.body") with the
// endpoint secret of [Options.WebhookSecret]. An [Event] is a snapshot: a
// test builds the events as the intent moves and delivers them in any
// order, as often as it likes ([Event.Deliver], [Event.Request]).
// [NewEvent] signs an event about any object, for the events the fake does
// not model (subscriptions, invoices).
//
// Not modelled: captures, partial refunds, disputes, the charges API, API
// versions, authentication of the API key, and rate limits other than
// injected ones.
//
// # Testing without a Stripe account
//
// Use this package for behaviour: charges, declines, replays, lookups,
// faults and the webhook events that follow them. Use stripe-mock
// (github.com/stripe/stripe-mock) to check that requests have the shape
// Stripe's OpenAPI spec allows. stripe-mock cannot complete a charge
// through the billingstripe provider: it keeps no state and answers from
// fixtures, so the PaymentIntent it returns does not carry the
// idempotency-key metadata the provider wrote, and the provider refuses it
// (billingstripe.ErrUnexpectedAnswer) rather than record a payment it
// cannot tie to the attempt.
package stripetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v85"
)

// KeyLifetime is how long the fake keeps an idempotency key.
const KeyLifetime = 24 * time.Hour

// DefaultWebhookSecret is the default of [Options.WebhookSecret].
const DefaultWebhookSecret = "whsec_stripetest"

// Options configures a [Server].
type Options struct {
	// Clock is the fake's time: created timestamps and key pruning.
	// Defaults to time.Now.
	Clock func() time.Time
	// WebhookSecret is the signing secret of the webhook endpoint the
	// fake's events ([Server.Event]) are signed for; give the handler
	// under test the same. Defaults to [DefaultWebhookSecret].
	WebhookSecret string
}

// Server is the fake Stripe API. Its methods are safe for concurrent use.
type Server struct {
	srv    *httptest.Server
	clock  func() time.Time
	secret string

	mu        sync.Mutex
	customers map[string]*customer
	methods   map[string]PaymentMethod
	intents   []*intent // in creation order
	byID      map[string]*intent
	keys      map[string]*keyState
	faults    map[string][]Fault // by idempotency key, FIFO
	faultFunc func(key string) Fault
	running   []func() // completions of requests still running
	seq       int
	creates   int
	confirms  int
	cancels   int
}

// PaymentMethod is a saved payment method of a customer.
type PaymentMethod struct {
	ID string
	// Type is "card" or "us_bank_account".
	Type  string
	Last4 string
}

type customer struct {
	id      string
	script  []Outcome
	charged int
}

type intent struct {
	ID        string
	Customer  string
	Amount    int64
	Currency  string
	Status    string
	Method    string
	Metadata  map[string]string
	Desc      string
	Created   int64
	LastError map[string]any
	Charge    string
	Refunded  bool
	// CancelReason is the cancellation_reason of a canceled intent.
	CancelReason string
	// Redirect is the redirect link of an intent requires_action ("":
	// use_stripe_sdk).
	Redirect string
}

type keyState struct {
	fingerprint string
	created     time.Time
	running     bool
	status      int
	body        []byte
}

// New starts a fake Stripe on a loopback port. Close it when done.
func New(opts Options) *Server {
	s := &Server{
		clock:     opts.Clock,
		secret:    opts.WebhookSecret,
		customers: map[string]*customer{},
		methods:   map[string]PaymentMethod{},
		byID:      map[string]*intent{},
		keys:      map[string]*keyState{},
		faults:    map[string][]Fault{},
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.secret == "" {
		s.secret = DefaultWebhookSecret
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// WebhookSecret is the endpoint secret the fake's events are signed with.
func (s *Server) WebhookSecret() string { return s.secret }

// URL is the base URL of the fake.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server. Requests still running are dropped.
func (s *Server) Close() { s.srv.CloseClientConnections(); s.srv.Close() }

// ClientOptions tunes [Server.Client].
type ClientOptions struct {
	// MaxNetworkRetries is the retries stripe-go makes on a dropped
	// connection. Defaults to 0, so tests see every fault.
	MaxNetworkRetries int64
	// Timeout is the HTTP client timeout. Defaults to 10 s.
	Timeout time.Duration
}

// Client returns a stripe-go client talking to the fake.
func (s *Server) Client(o ClientOptions) *stripe.Client {
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	quiet := &stripe.LeveledLogger{Level: stripe.LevelNull}
	b := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL:               stripe.String(s.URL()),
		HTTPClient:        &http.Client{Timeout: o.Timeout},
		MaxNetworkRetries: stripe.Int64(o.MaxNetworkRetries),
		LeveledLogger:     quiet,
	})
	return stripe.NewClient("sk_test_stripetest", stripe.WithBackends(b))
}

// AddCustomer creates a customer with a saved payment method; its
// payments succeed until scripted otherwise.
func (s *Server) AddCustomer(id string, pm PaymentMethod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.customers[id] = &customer{id: id}
	s.methods[pm.ID] = pm
}

// Script sets the outcomes of the customer's next confirmations, in
// order; the last one repeats.
func (s *Server) Script(customerID string, outcomes ...Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.customers[customerID]; ok {
		c.script = slices.Clone(outcomes)
	}
}

// InjectFault makes the next request with idempotency key key meet f.
// Faults of a key apply in the order injected, one per request.
func (s *Server) InjectFault(key string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[key] = append(s.faults[key], f)
}

// SetFaultFunc draws a fault for every create, confirm or cancel request whose key has none
// injected; nil (the default) draws none.
func (s *Server) SetFaultFunc(f func(key string) Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultFunc = f
}

// CompleteRunning completes every request still running (see
// [FaultRunning]): the intent is created and confirmed and its response
// saved for the key, as Stripe finishing after the client gave up. It
// returns how many completed.
func (s *Server) CompleteRunning() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.running)
	for _, f := range s.running {
		f()
	}
	s.running = nil
	return n
}

// Intent is a PaymentIntent as the fake holds it.
type Intent struct {
	ID, Customer, Currency, Status, PaymentMethod string
	// Description is the description the intent was created with.
	Description string
	Amount      int64
	Metadata    map[string]string
	Created     time.Time
	// Refunded is whether the intent's charge was refunded in full
	// ([Server.Refund]).
	Refunded bool
}

// Intents returns every intent, oldest first.
func (s *Server) Intents() []Intent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Intent, 0, len(s.intents))
	for _, in := range s.intents {
		out = append(out, Intent{ID: in.ID, Customer: in.Customer, Currency: in.Currency, Status: in.Status,
			PaymentMethod: in.Method, Description: in.Desc, Amount: in.Amount, Metadata: maps(in.Metadata), Created: time.Unix(in.Created, 0).UTC(), Refunded: in.Refunded})
	}
	return out
}

// Charged returns the intents that moved or are moving money (succeeded
// or processing), oldest first.
func (s *Server) Charged() []Intent {
	var out []Intent
	for _, in := range s.Intents() {
		if in.Status == "succeeded" || in.Status == "processing" {
			out = append(out, in)
		}
	}
	return out
}

// CreateRequests is how many create requests reached the fake, refused
// ones included.
func (s *Server) CreateRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates
}

// SetStatus sets an intent's status, e.g. a processing ACH debit that
// settled ("succeeded") or failed ("requires_payment_method").
func (s *Server) SetStatus(id, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.byID[id]; ok {
		in.Status = status
	}
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	s.mu.Lock()
	s.seq++
	w.Header().Set("Request-Id", fmt.Sprintf("req_%d", s.seq))
	s.mu.Unlock()
	switch {
	case r.URL.Path == "/v1/payment_intents" && r.Method == http.MethodPost:
		s.create(w, r)
	case r.URL.Path == "/v1/payment_intents" && r.Method == http.MethodGet:
		s.list(w, r)
	case strings.HasPrefix(r.URL.Path, "/v1/payment_intents/") && r.Method == http.MethodGet:
		s.retrieve(w, r)
	case r.Method == http.MethodPost:
		id, action, ok := intentAction(r.URL.Path)
		switch {
		case ok && action == "confirm":
			s.confirm(w, r, id)
		case ok && action == "cancel":
			s.cancel(w, r, id)
		default:
			writeError(w, http.StatusNotFound, apiError("invalid_request_error", "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+")."))
		}
	default:
		writeError(w, http.StatusNotFound, apiError("invalid_request_error", "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+")."))
	}
}

func apiError(typ, code, msg string) map[string]any {
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	return e
}

func writeError(w http.ResponseWriter, status int, e map[string]any) {
	body, _ := json.Marshal(map[string]any{"error": e})
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// expandSet returns the expand[] values of a form.
func expandSet(f url.Values) map[string]bool {
	out := map[string]bool{}
	for k, vs := range f {
		if k == "expand[]" || strings.HasPrefix(k, "expand[") {
			for _, v := range vs {
				out[v] = true
			}
		}
	}
	return out
}

// fingerprint identifies a request's endpoint and parameters.
func fingerprint(r *http.Request, f url.Values) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", r.Method, r.URL.Path)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, strings.Join(f[k], ","))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Server) retrieve(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/payment_intents/")
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "parameter_invalid", err.Error()))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.byID[id]
	if !ok {
		writeError(w, http.StatusNotFound, apiError("invalid_request_error", "resource_missing", "No such payment_intent: '"+id+"'"))
		return
	}
	body, _ := json.Marshal(s.render(in, expandSet(r.Form)["payment_method"]))
	_, _ = w.Write(body)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "parameter_invalid", err.Error()))
		return
	}
	f := r.Form
	limit := 10
	if v := f.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "parameter_invalid_integer", "Invalid limit: must be between 1 and 100"))
			return
		}
		limit = n
	}
	var gte int64 = -1
	if v := f.Get("created[gte]"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "parameter_invalid_integer", "Invalid integer: "+v))
			return
		}
		gte = n
	}
	expand := expandSet(f)["data.payment_method"]
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*intent // newest first
	for i := len(s.intents) - 1; i >= 0; i-- {
		in := s.intents[i]
		if c := f.Get("customer"); c != "" && in.Customer != c {
			continue
		}
		if gte >= 0 && in.Created < gte {
			continue
		}
		all = append(all, in)
	}
	if after := f.Get("starting_after"); after != "" {
		i := slices.IndexFunc(all, func(in *intent) bool { return in.ID == after })
		if i < 0 {
			writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "resource_missing", "No such payment_intent: '"+after+"'"))
			return
		}
		all = all[i+1:]
	}
	more := len(all) > limit
	if more {
		all = all[:limit]
	}
	data := make([]any, 0, len(all))
	for _, in := range all {
		data = append(data, s.render(in, expand))
	}
	body, _ := json.Marshal(map[string]any{"object": "list", "url": "/v1/payment_intents", "has_more": more, "data": data})
	_, _ = w.Write(body)
}

// render is an intent's JSON, its payment method expanded or not.
func (s *Server) render(in *intent, expand bool) map[string]any {
	var pm any = in.Method
	if expand {
		pm = s.renderMethod(in.Method, in.Customer)
	}
	var charge any
	if in.Charge != "" {
		charge = in.Charge
	}
	var lastErr any
	if in.LastError != nil {
		lastErr = in.LastError
	}
	var cancelReason any
	if in.CancelReason != "" {
		cancelReason = in.CancelReason
	}
	var next any
	switch {
	case in.Status != "requires_action":
	case in.Redirect != "":
		next = map[string]any{"type": "redirect_to_url", "redirect_to_url": map[string]any{"url": in.Redirect, "return_url": nil}}
	default:
		next = map[string]any{"type": "use_stripe_sdk", "use_stripe_sdk": map[string]any{}}
	}
	return map[string]any{
		"id": in.ID, "object": "payment_intent", "amount": in.Amount, "currency": in.Currency,
		"customer": in.Customer, "payment_method": pm, "status": in.Status, "metadata": in.Metadata,
		"description": in.Desc, "created": in.Created, "livemode": false, "confirmation_method": "automatic",
		"capture_method": "automatic", "latest_charge": charge, "last_payment_error": lastErr,
		"payment_method_types": []string{s.methods[in.Method].Type}, "cancellation_reason": cancelReason,
		"next_action": next,
	}
}

func (s *Server) renderMethod(id, cust string) map[string]any {
	pm := s.methods[id]
	out := map[string]any{"id": pm.ID, "object": "payment_method", "type": pm.Type, "customer": cust}
	switch pm.Type {
	case "card":
		out["card"] = map[string]any{"last4": pm.Last4, "brand": "visa"}
	case "us_bank_account":
		out["us_bank_account"] = map[string]any{"last4": pm.Last4, "bank_name": "STRIPE TEST BANK"}
	}
	return out
}
