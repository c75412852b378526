package stripetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Outcome is how the fake answers a customer's confirmation.
type Outcome struct {
	// Code is Stripe's error code of a failed confirmation, e.g.
	// "card_declined"; empty for a payment that goes through (succeeded
	// for cards, processing for us_bank_account).
	Code string
	// DeclineCode is the issuer's reason, e.g. "insufficient_funds".
	DeclineCode string
	// Message is Stripe's message.
	Message string
	// Action leaves the payment waiting for the customer (see
	// [RequiresAction]); Code and DeclineCode are then ignored.
	Action bool
	// RedirectURL is the next_action.redirect_to_url.url of an Action
	// outcome; empty, the next action is use_stripe_sdk, with no link.
	RedirectURL string
}

// Succeed is a payment that goes through: succeeded for a card, processing
// for a us_bank_account debit.
func Succeed() Outcome { return Outcome{} }

// Decline is a card decline with the issuer's decline code, e.g.
// "insufficient_funds" or "stolen_card".
func Decline(declineCode string) Outcome {
	return Outcome{Code: "card_declined", DeclineCode: declineCode, Message: "Your card was declined."}
}

// AuthenticationRequired is an off-session payment the issuer wants the
// customer to authenticate.
func AuthenticationRequired() Outcome {
	return Outcome{Code: "authentication_required", DeclineCode: "authentication_required",
		Message: "Your card was declined. This transaction requires authentication."}
}

// RequiresAction is a confirmation Stripe leaves waiting for the
// customer to authenticate: answered 200 with the intent requires_action
// and its next_action, a redirect_to_url to redirectURL (or, with "",
// use_stripe_sdk: the customer confirms with Stripe.js, no link). Stripe
// answers so a confirmation that may wait for the customer (one made
// with a return_url, or for a payment method type that redirects); an
// off-session card payment is declined authentication_required instead
// ([AuthenticationRequired]). The fake answers it to whatever
// confirmation meets it, so that a test can drive a client's handling
// of an intent left requires_action, as a lookup may also find one.
func RequiresAction(redirectURL string) Outcome {
	return Outcome{Action: true, RedirectURL: redirectURL}
}

// BankDebitFailed is a bank debit (us_bank_account) that failed after
// processing, with Stripe's failure code: "insufficient_funds",
// "account_closed", "no_account", "debit_not_authorized" and so on; for
// [Server.FailProcessing].
func BankDebitFailed(code string) Outcome {
	msg, ok := bankFailures[code]
	if !ok {
		msg = "The customer's bank could not complete this payment."
	}
	return Outcome{Code: code, Message: msg}
}

// bankFailures are the messages of Stripe's ACH failure codes.
var bankFailures = map[string]string{
	"insufficient_funds":   "The customer's account has insufficient funds to cover this payment.",
	"account_closed":       "The customer's bank account has been closed.",
	"no_account":           "The customer's bank account could not be located.",
	"debit_not_authorized": "The customer has notified their bank that this payment was unauthorized.",
}

// FaultKind names a fault.
type FaultKind int

// The faults.
const (
	// FaultRateLimit refuses the request with 429 before acting on it.
	FaultRateLimit FaultKind = iota + 1
	// FaultServerError answers 500 before acting; the 500 is saved for the
	// key and replayed.
	FaultServerError
	// FaultDropResponse acts (the intent is created and the response saved
	// for the key) and then closes the connection without answering.
	FaultDropResponse
	// FaultRunning keeps the request running: the key is in use and no
	// intent exists until [Server.CompleteRunning], whatever the client
	// does meanwhile (it times out or gives up).
	FaultRunning
)

// Fault is what happens to one request.
type Fault struct {
	Kind FaultKind
	// RetryAfter is the Retry-After of a FaultRateLimit; 0 sends none.
	RetryAfter time.Duration
}

// RateLimited is a 429 asking the client to wait after.
func RateLimited(after time.Duration) Fault { return Fault{Kind: FaultRateLimit, RetryAfter: after} }

// ServerError is a 500 before acting, saved for the key.
func ServerError() Fault { return Fault{Kind: FaultServerError} }

// DropResponse acts and drops the connection.
func DropResponse() Fault { return Fault{Kind: FaultDropResponse} }

// Running keeps the request running until [Server.CompleteRunning].
func Running() Fault { return Fault{Kind: FaultRunning} }

func (s *Server) fault(key string) Fault {
	if q := s.faults[key]; len(q) > 0 {
		s.faults[key] = q[1:]
		return q[0]
	}
	if s.faultFunc != nil {
		return s.faultFunc(key)
	}
	return Fault{}
}

func (s *Server) prune() {
	now := s.clock()
	for k, st := range s.keys {
		if !st.running && now.Sub(st.created) >= KeyLifetime {
			delete(s.keys, k)
		}
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	s.post(w, r, func() { s.creates++ }, s.validate, s.act)
}

// post serves a POST that acts on the fake (create, confirm, cancel) with
// Stripe's idempotency and the injected faults of its key: count runs
// first, under s.mu, for every request; validate refuses before acting
// (the answer is not saved for the key); act acts and answers (saved).
// validate and act run under s.mu.
func (s *Server) post(w http.ResponseWriter, r *http.Request, count func(), validate func(url.Values) (int, map[string]any), act func(url.Values) (int, []byte)) {
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "parameter_invalid", err.Error()))
		return
	}
	form := r.PostForm
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	count()
	s.prune()
	f := s.fault(key)
	if f.Kind == FaultRateLimit {
		s.mu.Unlock()
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
		}
		writeError(w, http.StatusTooManyRequests, apiError("invalid_request_error", "rate_limit",
			"Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits."))
		return
	}
	fp := fingerprint(r, form)
	if st, ok := s.keys[key]; ok && key != "" {
		switch {
		case st.running:
			s.mu.Unlock()
			writeError(w, http.StatusConflict, apiError("idempotency_error", "idempotency_key_in_use",
				"There is currently another in-progress request using this Stripe-Idempotency-Key. Please try again later."))
		case st.fingerprint != fp:
			s.mu.Unlock()
			writeError(w, http.StatusBadRequest, apiError("idempotency_error", "",
				"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '"+key+"' if you meant to execute a different request."))
		default:
			status, body := st.status, st.body
			s.mu.Unlock()
			if f.Kind == FaultDropResponse {
				drop(w)
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.Header().Set("Idempotency-Key", key)
			w.WriteHeader(status)
			_, _ = w.Write(body)
		}
		return
	}
	if status, e := validate(form); e != nil {
		s.mu.Unlock()
		writeError(w, status, e)
		return
	}
	switch f.Kind {
	case FaultServerError:
		body, _ := json.Marshal(map[string]any{"error": apiError("api_error", "", "An unknown error occurred")})
		s.save(key, fp, http.StatusInternalServerError, body)
		s.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(body)
		return
	case FaultRunning:
		if key != "" {
			s.keys[key] = &keyState{fingerprint: fp, created: s.clock(), running: true}
		}
		s.running = append(s.running, func() {
			status, body := act(form)
			if key != "" {
				delete(s.keys, key)
			}
			s.save(key, fp, status, body)
		})
		s.mu.Unlock()
		<-r.Context().Done() // the client gave up; the request runs on
		return
	}
	status, body := act(form)
	s.save(key, fp, status, body)
	s.mu.Unlock()
	if f.Kind == FaultDropResponse {
		drop(w)
		return
	}
	if key != "" {
		w.Header().Set("Idempotency-Key", key)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// drop closes the connection without an answer.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func (s *Server) save(key, fp string, status int, body []byte) {
	if key == "" {
		return
	}
	s.keys[key] = &keyState{fingerprint: fp, created: s.clock(), status: status, body: body}
}

// validate refuses, before acting, a request Stripe would refuse as
// invalid; such answers are not saved for the key.
func (s *Server) validate(f url.Values) (int, map[string]any) {
	invalid := func(code, param, msg string) (int, map[string]any) {
		e := apiError("invalid_request_error", code, msg)
		if param != "" {
			e["param"] = param
		}
		return http.StatusBadRequest, e
	}
	amount, err := strconv.ParseInt(f.Get("amount"), 10, 64)
	switch {
	case f.Get("amount") == "":
		return invalid("parameter_missing", "amount", "Missing required param: amount.")
	case err != nil:
		return invalid("parameter_invalid_integer", "amount", "Invalid integer: "+f.Get("amount"))
	case amount < 50:
		return invalid("amount_too_small", "amount", "Amount must be at least $0.50 usd")
	case f.Get("currency") == "":
		return invalid("parameter_missing", "currency", "Missing required param: currency.")
	}
	c, ok := s.customers[f.Get("customer")]
	if !ok {
		return invalid("resource_missing", "customer", "No such customer: '"+f.Get("customer")+"'")
	}
	_ = c
	if _, ok := s.methods[f.Get("payment_method")]; !ok {
		return invalid("resource_missing", "payment_method", "No such PaymentMethod: '"+f.Get("payment_method")+"'")
	}
	if f.Get("confirm") != "true" || f.Get("off_session") != "true" {
		return invalid("parameter_invalid", "confirm", "stripetest models only confirm=true, off_session=true")
	}
	return 0, nil
}

// act creates and confirms an intent; the caller holds s.mu.
func (s *Server) act(f url.Values) (int, []byte) {
	s.seq++
	amount, _ := strconv.ParseInt(f.Get("amount"), 10, 64)
	in := &intent{
		ID: fmt.Sprintf("pi_%06d", s.seq), Customer: f.Get("customer"), Amount: amount,
		Currency: strings.ToLower(f.Get("currency")), Method: f.Get("payment_method"),
		Metadata: map[string]string{}, Desc: f.Get("description"), Created: s.clock().Unix(),
		Charge: fmt.Sprintf("ch_%06d", s.seq),
	}
	for k, vs := range f {
		if strings.HasPrefix(k, "metadata[") && strings.HasSuffix(k, "]") && len(vs) > 0 {
			in.Metadata[k[len("metadata["):len(k)-1]] = vs[0]
		}
	}
	s.intents = append(s.intents, in)
	s.byID[in.ID] = in
	return s.confirmOffSession(in, expandSet(f)["payment_method"])
}

// confirmOffSession confirms in off-session with the next scripted
// outcome of its customer and answers as Stripe does: the intent, or a
// 402 card_error carrying the failed intent. The caller holds s.mu.
func (s *Server) confirmOffSession(in *intent, expand bool) (int, []byte) {
	c := s.customers[in.Customer]
	o := Succeed()
	if n := len(c.script); n > 0 {
		o = c.script[min(c.charged, n-1)]
	}
	c.charged++
	if o.Action {
		s.await(in, o)
		body, _ := json.Marshal(s.render(in, expand))
		return http.StatusOK, body
	}
	if o.Code == "" {
		in.Status = s.goneThrough(in)
		in.LastError = nil
		body, _ := json.Marshal(s.render(in, expand))
		return http.StatusOK, body
	}
	s.fail(in, o)
	errBody := maps2(in.LastError)
	errBody["payment_intent"] = s.render(in, expand)
	body, _ := json.Marshal(map[string]any{"error": errBody})
	return http.StatusPaymentRequired, body
}

func maps2(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
