package billingstripe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/stripe/stripe-go/v85"
)

// Customer is the Stripe side of a billed user: the customer the
// PaymentIntents belong to and the saved payment method they charge
// off-session (a card or a verified us_bank_account).
type Customer struct {
	// ID is the Stripe customer ID, "cus_…".
	ID string
	// PaymentMethod is the payment method ID, "pm_…", attached to the
	// customer.
	PaymentMethod string
}

// Customers maps the library's users to Stripe: the host's port.
//
// An error means the user cannot be charged now; Collect returns it and
// the attempt stays in flight (nothing reached Stripe; the next run
// presents it again). LookupPayment lists the intents of the customer
// returned here, so a user must keep the Stripe customer their charges
// were made on: moving a user to another customer while an attempt is in
// flight hides that attempt's intent from the lookup.
type Customers interface {
	StripeCustomer(ctx context.Context, userID string) (Customer, error)
}

// CustomersFunc adapts a function to [Customers].
type CustomersFunc func(ctx context.Context, userID string) (Customer, error)

// StripeCustomer calls f.
func (f CustomersFunc) StripeCustomer(ctx context.Context, userID string) (Customer, error) {
	return f(ctx, userID)
}

// Default timings of stripe-go's default backend.
const (
	// DefaultReplayWindow is how long the provider trusts Stripe to keep
	// an idempotency key: Stripe may prune a key once it is 24 hours old,
	// so the window stops an hour short of that, for clocks of host and
	// Stripe that differ. A replay at 24 hours could charge again.
	DefaultReplayWindow = 23 * time.Hour

	// StripeGoHTTPTimeout is the HTTP client timeout of stripe-go's
	// default backend.
	StripeGoHTTPTimeout = 80 * time.Second

	// stripeGoMaxBackoff is the longest stripe-go sleeps between tries.
	stripeGoMaxBackoff = 5 * time.Second

	// serverMargin covers Stripe finishing a request after the client
	// gave up on it and the clock difference between host and Stripe.
	serverMargin = time.Minute
)

// DefaultRequestTimeout is the [RequestTimeoutFor] stripe-go's default
// backend: 3 tries of 80 s, 2 waits of at most 5 s between them and the
// minute of margin, 5m10s.
var DefaultRequestTimeout = RequestTimeoutFor(StripeGoHTTPTimeout, stripe.DefaultMaxNetworkRetries)

// RequestTimeoutFor is the longest a request with one idempotency key can
// keep running at Stripe when the stripe-go backend has HTTP client
// timeout httpTimeout and makes maxNetworkRetries retries: stripe-go
// retries dropped connections, timeouts and lock_timeout answers with the
// same key, so a call lasts up to (maxNetworkRetries+1)·httpTimeout plus
// a backoff of at most 5 s between tries; a minute is added for Stripe
// finishing the last try after the client gave up and for clock
// differences. [New] computes it from the client's backend by itself.
func RequestTimeoutFor(httpTimeout time.Duration, maxNetworkRetries int64) time.Duration {
	if maxNetworkRetries < 0 {
		maxNetworkRetries = 0
	}
	return time.Duration(maxNetworkRetries+1)*httpTimeout + time.Duration(maxNetworkRetries)*stripeGoMaxBackoff + serverMargin
}

// requestTimeoutOf derives the request timeout from the backend the
// client's PaymentIntents calls go through, the one Collect and
// LookupPayment use. It refuses a backend whose HTTP client has no
// timeout (a try could run for ever, so no "not found" could ever be
// believed) and one whose settings it cannot read (a backend of the
// host's own type), since a guessed fence too short would let a lookup
// believe a request still running is absent, and the attempt start again
// with a new key.
func requestTimeoutOf(client *stripe.Client) (time.Duration, error) {
	if client.V1PaymentIntents == nil {
		return 0, errors.New("the client has no PaymentIntents service")
	}
	b := client.V1PaymentIntents.B
	for {
		u, ok := b.(*stripe.UsageBackend)
		if !ok || u == nil {
			break
		}
		b = u.B
	}
	impl, ok := b.(*stripe.BackendImplementation)
	switch {
	case !ok || impl == nil:
		return 0, fmt.Errorf("the PaymentIntents backend is a %T, whose HTTP timeout and retries cannot be read", b)
	case impl.HTTPClient == nil:
		return 0, errors.New("the PaymentIntents backend has no HTTP client")
	case impl.HTTPClient.Timeout <= 0:
		return 0, errors.New("the PaymentIntents backend's HTTP client has no timeout, so a request may run for ever")
	}
	return RequestTimeoutFor(impl.HTTPClient.Timeout, impl.MaxNetworkRetries), nil
}

// Config configures a [Provider].
type Config struct {
	// Client is the Stripe client, from stripe.NewClient(secretKey).
	// Required.
	Client *stripe.Client
	// Customers maps users to Stripe customers and payment methods.
	// Required.
	Customers Customers
	// Currency is the ISO code of the amounts collected, lower case.
	// billing.Amount counts hundredths, so only currencies Stripe counts
	// in hundredths are accepted; zero-decimal (jpy, krw, …) and
	// three-decimal (bhd, kwd, …) currencies are refused. Defaults to
	// "usd".
	Currency string
	// ReplayWindow is how long after an attempt's start its key may be
	// replayed; it must stay below the 24 hours after which Stripe may
	// forget the key. Defaults to [DefaultReplayWindow], 23 hours.
	ReplayWindow time.Duration
	// RequestTimeout is the longest a request can keep running at Stripe
	// (see [billing.RequestTimeout]): a lookup that finds no intent for a
	// key is believed only once this long has passed since the key was
	// last presented. Defaults to [RequestTimeoutFor] the HTTP client
	// timeout and MaxNetworkRetries of Client's PaymentIntents backend
	// ([DefaultRequestTimeout], 5m10s, for stripe-go's default one); New
	// refuses a backend whose HTTP client has no timeout, or that is not
	// stripe-go's own and so cannot be read, unless RequestTimeout is
	// set. Set it to cover every way the host's transport can prolong a
	// request.
	RequestTimeout time.Duration
	// LookupMargin is how long before an attempt's start a lookup lists
	// intents from, for clock differences between host and Stripe.
	// Defaults to an hour.
	LookupMargin time.Duration
	// Description is the PaymentIntent description of a request. Defaults
	// to "<tier> subscription, billing date <YYYY-MM-DD>", followed by
	// ", invoice <number>" when the request names its invoice.
	Description func(req billing.PaymentRequest) string
	// ConfirmURL returns the link where the customer confirms a payment
	// their bank holds for authentication (3-D Secure), the
	// [billing.PaymentResult.ActionURL] of a decline of kind
	// [billing.DeclineAuthenticationRequired] that the collector's
	// dunning sends in its action-required notice. Stripe gives a link
	// of its own (next_action.redirect_to_url.url, which wins when
	// present) only for an intent confirmed with a return_url; an
	// off-session decline carries none: the customer confirms the
	// intent on a page of the host's, with Stripe.js
	// (stripe.confirmCardPayment and the intent's client_secret). It is
	// called with the PaymentIntent as Stripe's answer carries it (its
	// ID, customer, metadata naming the attempt, client_secret); a link
	// that is no absolute http(s) URL of at most 2048 bytes is dropped
	// and logged, as is "". Defaults to nil: only Stripe's own links are
	// sent, and a decline without one gets the payment-failed notice,
	// with the host's update-payment link, instead.
	ConfirmURL func(pi *stripe.PaymentIntent) string
	// Logger logs what the provider does. Defaults to a logger that
	// discards everything.
	Logger *slog.Logger
	// Clock reads the time to interpret Retry-After dates. Defaults to
	// time.Now.
	Clock func() time.Time
}

// Provider charges through Stripe PaymentIntents, created and confirmed
// off-session, one per attempt, with the attempt's idempotency key. It
// implements [billing.PaymentProvider], [billing.PaymentLookup],
// [billing.ReplayWindow] and [billing.RequestTimeout].
//
// # Answers
//
// Every answer of Stripe is mapped in one place:
//
//   - an intent succeeded: succeeded; processing (ACH debits): pending;
//   - an intent requires_payment_method (its confirmation failed):
//     declined, retryable by the decline code of its last payment error
//     (see Declines); requires_action (off-session, so it needs the
//     customer's authentication): declined, not retryable;
//     requires_confirmation (never confirmed, so nothing charged; not
//     one this adapter leaves): declined, not retryable; canceled:
//     declined, not retryable. A lookup is stricter: an intent not yet
//     through a confirmation may be one a request still running is
//     confirming, so it is an error there (see [Provider.LookupPayment]);
//   - an intent requires_capture, or in a state Stripe may add later: an
//     error wrapping [ErrUnexpectedAnswer];
//   - HTTP 402 card errors: declined, retryable by decline code, with the
//     intent and payment method the error carries; other errors carrying
//     an intent in a failed state: as that intent;
//   - HTTP 429 (rate_limit, and lock_timeout once stripe-go's own retries
//     are spent) to Collect: the outcome of an intent with the key when a
//     lookup finds one, else a plain error, outcome unknown, never a
//     refusal: Stripe refused that try before acting on it, but an
//     earlier try of the same call may still be running (see Rate
//     limits). A 429 to a lookup is a [*billing.RateLimitedError] with the
//     Retry-After wait: listing changes nothing;
//   - HTTP 409 idempotency_key_in_use: an error wrapping
//     [billing.ErrKeyInUse], the first request may still charge;
//   - idempotency_error (the key with other parameters): an error
//     wrapping [ErrIdempotencyMismatch];
//   - HTTP 5xx, timeouts, dropped connections, cancelled contexts and
//     bodies that do not parse: a plain error, outcome unknown;
//   - other 4xx: an error wrapping [ErrRejected].
//
// # Declines
//
// Retryable: the issuer or network failed or the account lacks funds or
// limit for now (insufficient_funds, processing_error, try_again_later,
// issuer_not_available, reenter_transaction, approve_with_id,
// card_velocity_exceeded, withdrawal_count_limit_exceeded,
// duplicate_transaction), and the unexplained declines dunning
// conventionally retries (generic_decline, call_issuer, no_action_taken,
// card_declined without a decline code). Not retryable: a card gone or
// suspected (stolen_card, lost_card, pickup_card, fraudulent,
// restricted_card, security_violation, merchant_blacklist), an
// authorization withdrawn (revocation_of_authorization,
// revocation_of_all_authorizations, stop_payment_order), an issuer that
// said never again (do_not_honor, do_not_try_again), a card that needs
// the customer (expired_card, incorrect_number, incorrect_cvc, PIN and ZIP
// errors, authentication_required, card_not_supported, …), test-mode
// declines, and every code Stripe may add later: card networks penalise
// retries of final declines, and an operator can still collect such a
// record by hand.
//
// Each decline also names its kind ([billing.PaymentResult.Decline]), on
// which the collector's dunning schedule decides: insufficient_funds is
// [billing.DeclineInsufficientFunds]; a card whose details the customer
// must update (expired_card, incorrect_number, invalid_number,
// invalid_expiry_month, invalid_expiry_year,
// new_account_information_available) is [billing.DeclineExpiredCard];
// authentication_required, and an intent left requires_action, is
// [billing.DeclineAuthenticationRequired], with the link where the
// customer confirms it ([billing.PaymentResult.ActionURL]: Stripe's
// next_action.redirect_to_url.url when the intent has one, else
// [Config.ConfirmURL]); the codes Stripe and the card networks say not
// to retry (stolen_card, lost_card, pickup_card, fraudulent,
// restricted_card, security_violation, merchant_blacklist, the
// revocations, stop_payment_order, do_not_honor, do_not_try_again,
// invalid_account), and every other decline not retryable, are
// [billing.DeclineHard]; the rest, retryable, are
// [billing.DeclineOther].
//
// # Rate limits
//
// A 429 proves only that its own try did nothing: stripe-go resends a
// request that timed out or whose connection dropped, and Go's HTTP
// transport resends a POST carrying an Idempotency-Key on a broken
// keep-alive connection by itself, so an earlier try of the same call may
// have charged, or may still be running at Stripe. Collect therefore looks
// the key up after a 429: an intent with the key is the answer; no intent,
// or a failed lookup, leaves the outcome unknown. A try still running is
// invisible to the list API, so "no intent" proves nothing yet, and a
// refusal would let the collector withdraw the attempt: the record could
// then change and the attempt start again later with a fresh start time,
// past which the key could be replayed after Stripe forgot it and charge a
// second time.
//
// So a rate-limited charge stays in flight, and the next run settles it
// as any unknown outcome: within the replay window it presents the same
// key again (Stripe saves no answer to a 429, so that replay is executed
// once, or answered with the earlier try's outcome, or 409 while that try
// still runs), else a lookup, believed to find nothing only once
// [Provider.RequestTimeout] has passed since the key was last presented.
// The cost: Collect never returns a [billing.ErrRateLimited], so the
// collector does not retry a rate-limited charge in the same run
// (ProcessorBudget's RateLimitRetries does not apply to it) and leaves it
// to the next run, counted as unknown and as rate limited. It still backs
// off for it: the error carries Stripe's wait through the
// ProcessorThrottled method the collector honours, so the rest of the run
// slows down as for a refusal.
type Provider struct {
	cfg Config
}

var (
	_ billing.PaymentProvider = (*Provider)(nil)
	_ billing.PaymentLookup   = (*Provider)(nil)
	_ billing.ReplayWindow    = (*Provider)(nil)
	_ billing.RequestTimeout  = (*Provider)(nil)
)

// nonCentCurrencies are the currencies Stripe does not count in
// hundredths.
var nonCentCurrencies = map[string]bool{
	// zero-decimal
	"bif": true, "clp": true, "djf": true, "gnf": true, "jpy": true, "kmf": true, "krw": true, "mga": true,
	"pyg": true, "rwf": true, "ugx": true, "vnd": true, "vuv": true, "xaf": true, "xof": true, "xpf": true,
	// three-decimal
	"bhd": true, "jod": true, "kwd": true, "omr": true, "tnd": true,
}

// New returns a Provider for cfg, with defaults filled in, or an error
// naming the field that is missing or wrong.
func New(cfg Config) (*Provider, error) {
	if cfg.Client == nil {
		return nil, errors.New("billingstripe: Config.Client is required")
	}
	if cfg.Customers == nil {
		return nil, errors.New("billingstripe: Config.Customers is required")
	}
	if cfg.Currency == "" {
		cfg.Currency = "usd"
	}
	cfg.Currency = strings.ToLower(cfg.Currency)
	if len(cfg.Currency) != 3 || nonCentCurrencies[cfg.Currency] {
		return nil, fmt.Errorf("billingstripe: Config.Currency %q: not a currency Stripe counts in hundredths", cfg.Currency)
	}
	for name, d := range map[string]time.Duration{"ReplayWindow": cfg.ReplayWindow, "RequestTimeout": cfg.RequestTimeout, "LookupMargin": cfg.LookupMargin} {
		if d < 0 {
			return nil, fmt.Errorf("billingstripe: Config.%s %v is negative", name, d)
		}
	}
	if cfg.ReplayWindow >= 24*time.Hour {
		return nil, fmt.Errorf("billingstripe: Config.ReplayWindow %v: Stripe may forget keys after 24 hours, a replay then could charge again", cfg.ReplayWindow)
	}
	if cfg.ReplayWindow == 0 {
		cfg.ReplayWindow = DefaultReplayWindow
	}
	if cfg.RequestTimeout == 0 {
		d, err := requestTimeoutOf(cfg.Client)
		if err != nil {
			return nil, fmt.Errorf("billingstripe: Config.RequestTimeout is not set and cannot be derived from Config.Client: %w", err)
		}
		cfg.RequestTimeout = d
	}
	if cfg.LookupMargin == 0 {
		cfg.LookupMargin = time.Hour
	}
	if cfg.Description == nil {
		cfg.Description = defaultDescription
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Provider{cfg: cfg}, nil
}

func defaultDescription(req billing.PaymentRequest) string {
	tier, _, _ := strings.Cut(req.Tier, ":") // "Name:Version"
	if tier == "" {
		tier = "dynabill"
	}
	d := tier + " subscription, billing date " + req.BillingDate.UTC().Format(billingDateLayout)
	if req.InvoiceNumber != "" {
		d += ", invoice " + req.InvoiceNumber
	}
	return d
}

// ReplayWindow is how long after an attempt's start the collector may
// replay its key (see [Config.ReplayWindow]).
func (p *Provider) ReplayWindow() time.Duration { return p.cfg.ReplayWindow }

// RequestTimeout is the longest a request can keep running at Stripe.
func (p *Provider) RequestTimeout() time.Duration { return p.cfg.RequestTimeout }

// Collect creates and confirms, off-session, one PaymentIntent for the
// attempt, with req.IdempotencyKey as its Idempotency-Key and metadata
// naming the attempt (see [MetadataIdempotencyKey] and its siblings), and
// maps Stripe's answer (see the mapping on [Provider]). The same request
// presented again is answered by Stripe with the first answer while it
// keeps the key. An error means the outcome is unknown; Collect never
// reports a refusal ([billing.ErrRateLimited]): a 429 is answered by the
// intent a lookup finds for the key, and is otherwise an unknown outcome,
// since an earlier try of the call may still be running (see Rate limits
// on [Provider]).
func (p *Provider) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	if req.IdempotencyKey == "" {
		return billing.PaymentResult{}, fmt.Errorf("billingstripe: subscription %s attempt %d: no idempotency key", req.SubscriptionID, req.Attempt)
	}
	if req.Amount <= 0 {
		return billing.PaymentResult{}, fmt.Errorf("billingstripe: key %s: %w: amount %s is not positive", req.IdempotencyKey, ErrRejected, req.Amount)
	}
	cust, err := p.cfg.Customers.StripeCustomer(ctx, req.UserID)
	if err != nil {
		return billing.PaymentResult{}, fmt.Errorf("billingstripe: key %s: Stripe customer of user %s: %w", req.IdempotencyKey, req.UserID, err)
	}
	if req.PriorPayment != "" {
		res, done, err := p.fromPrior(ctx, req, cust)
		if err != nil {
			p.cfg.Logger.InfoContext(ctx, "billingstripe: no outcome", "key", req.IdempotencyKey, "payment_intent", req.PriorPayment, "error", err)
			return billing.PaymentResult{}, fmt.Errorf("billingstripe: %w", err)
		}
		if done {
			p.cfg.Logger.DebugContext(ctx, "billingstripe: outcome", "key", req.IdempotencyKey, "outcome", res.Outcome.String(), "payment_intent", res.TransactionID)
			return res, nil
		}
	}
	params := &stripe.PaymentIntentCreateParams{
		Amount:        stripe.Int64(req.Amount.MinorUnits()),
		Currency:      stripe.String(p.cfg.Currency),
		Customer:      stripe.String(cust.ID),
		PaymentMethod: stripe.String(cust.PaymentMethod),
		Confirm:       stripe.Bool(true),
		OffSession:    stripe.Bool(true),
		Description:   stripe.String(p.cfg.Description(req)),
		Metadata:      metadata(req),
	}
	params.AddExpand("payment_method")
	params.SetIdempotencyKey(req.IdempotencyKey)
	p.cfg.Logger.DebugContext(ctx, "billingstripe: create PaymentIntent", "key", req.IdempotencyKey, "customer", cust.ID, "amount", req.Amount.String())
	pi, callErr := p.cfg.Client.V1PaymentIntents.Create(ctx, params)
	if callErr != nil {
		pi = nil // stripe-go hands back an empty intent with its errors
	}
	res, err := classify(req.IdempotencyKey, pi, callErr, p.cfg.Clock())
	if err == nil && pi != nil {
		err = p.check(req, pi)
	}
	if err == nil {
		p.withConfirmURL(ctx, &res, cmp.Or(pi, errIntent(callErr)))
	}
	if errors.Is(err, billing.ErrRateLimited) {
		res, err = p.confirmRefusal(ctx, req, err)
	}
	if err != nil {
		p.cfg.Logger.InfoContext(ctx, "billingstripe: no outcome", "key", req.IdempotencyKey, "error", err)
		return billing.PaymentResult{}, fmt.Errorf("billingstripe: %w", err)
	}
	p.cfg.Logger.DebugContext(ctx, "billingstripe: outcome", "key", req.IdempotencyKey, "outcome", res.Outcome.String(), "payment_intent", res.TransactionID)
	return res, nil
}

// errIntent is the PaymentIntent a Stripe error carries, nil for none.
func errIntent(err error) *stripe.PaymentIntent {
	var se *stripe.Error
	if errors.As(err, &se) {
		return se.PaymentIntent
	}
	return nil
}

// withConfirmURL gives res, Stripe's answer about pi, the host's
// confirmation link ([Config.ConfirmURL]) when it is a decline that
// asks for the customer's authentication and Stripe gave no link.
func (p *Provider) withConfirmURL(ctx context.Context, res *billing.PaymentResult, pi *stripe.PaymentIntent) {
	if res.Outcome != billing.OutcomeDeclined || res.Decline != billing.DeclineAuthenticationRequired || res.ActionURL != "" ||
		p.cfg.ConfirmURL == nil || pi == nil || pi.ID == "" {
		return
	}
	u := p.cfg.ConfirmURL(pi)
	if res.ActionURL = checkedURL(u); res.ActionURL == "" {
		p.cfg.Logger.WarnContext(ctx, "billingstripe: Config.ConfirmURL gave no absolute http(s) URL of at most 2048 bytes; the decline carries no link",
			"payment_intent", pi.ID, "url_bytes", len(u))
	}
}

// check refuses an intent that is not the one req asked for.
func (p *Provider) check(req billing.PaymentRequest, pi *stripe.PaymentIntent) error {
	switch {
	case pi.Metadata[MetadataIdempotencyKey] != req.IdempotencyKey:
		return fmt.Errorf("key %s: %w: PaymentIntent %s carries key %q", req.IdempotencyKey, ErrUnexpectedAnswer, pi.ID, pi.Metadata[MetadataIdempotencyKey])
	case pi.Amount != req.Amount.MinorUnits() || !strings.EqualFold(string(pi.Currency), p.cfg.Currency):
		return fmt.Errorf("key %s: %w: PaymentIntent %s is for %d %s, the attempt for %d %s",
			req.IdempotencyKey, ErrUnexpectedAnswer, pi.ID, pi.Amount, pi.Currency, req.Amount.MinorUnits(), p.cfg.Currency)
	}
	return nil
}

// metadata is the PaymentIntent metadata of req.
func metadata(req billing.PaymentRequest) map[string]string {
	m := map[string]string{
		MetadataIdempotencyKey: req.IdempotencyKey,
		MetadataSubscriptionID: req.SubscriptionID,
		MetadataUserID:         req.UserID,
		MetadataBillingDate:    req.BillingDate.UTC().Format(billingDateLayout),
		MetadataAttempt:        strconv.Itoa(req.Attempt),
	}
	if req.InvoiceNumber != "" {
		m[MetadataInvoiceNumber] = req.InvoiceNumber
		m[MetadataInvoiceID] = req.InvoiceID
	}
	return m
}

// confirmRefusal settles a 429 answer to Collect, refused, as far as a
// lookup can. The 429 proves only that its own try did nothing: stripe-go
// retries a timed-out try or a dropped connection with the same key, and
// Go's HTTP transport replays a POST carrying an Idempotency-Key on a
// broken keep-alive connection by itself, so an earlier try of the same
// call may have charged before the rate-limited one, or may still be
// running at Stripe. A lookup decides what it can: an intent with the key
// is the answer. No intent, or a lookup that fails, leaves the outcome
// unknown, never a refusal: a try still running is invisible to the list
// API, and an attempt withdrawn as refused is no longer fenced by its key.
// The collector keeps the attempt in flight and settles it in a later run,
// by a replay with the same key (Stripe saves no answer to a 429, so the
// replay is executed once or answered with the earlier try's outcome) or
// by a lookup it believes only once no request for the key can still be
// running.
func (p *Provider) confirmRefusal(ctx context.Context, req billing.PaymentRequest, refused error) (billing.PaymentResult, error) {
	res, found, err := p.LookupPayment(ctx, req)
	switch {
	case err != nil:
		return billing.PaymentResult{}, fmt.Errorf("key %s: rate limited, and an earlier try of the call may have charged: outcome unknown: %w; lookup: %w",
			req.IdempotencyKey, withoutRateLimit(refused), withoutRateLimit(err))
	case found:
		p.cfg.Logger.InfoContext(ctx, "billingstripe: rate limited after an earlier try charged", "key", req.IdempotencyKey, "payment_intent", res.TransactionID)
		return res, nil
	}
	return billing.PaymentResult{}, fmt.Errorf("key %s: rate limited, and no PaymentIntent has the key yet, but an earlier try of the call may still be running: outcome unknown: %w",
		req.IdempotencyKey, withoutRateLimit(refused))
}

// withoutRateLimit keeps err's message and the wait Stripe asked for, but
// not its [billing.ErrRateLimited] identity: an unknown outcome must not
// read as a refusal. The collector still slows down for it (see
// [throttledError]).
func withoutRateLimit(err error) error {
	if !errors.Is(err, billing.ErrRateLimited) {
		return err
	}
	t := &throttledError{msg: err.Error()}
	var rl *billing.RateLimitedError
	if errors.As(err, &rl) {
		t.wait = rl.RetryAfter
	}
	return t
}

// throttledError is a 429 from Stripe that decides nothing about the
// outcome: the collector keeps the attempt in flight, and its
// ProcessorThrottled method makes it slow down as for a refusal (see
// [billing.PaymentProvider]).
type throttledError struct {
	msg  string
	wait time.Duration
}

func (e *throttledError) Error() string { return e.msg }

// ProcessorThrottled returns the wait Stripe asked for, 0 when it did not
// say.
func (e *throttledError) ProcessorThrottled() time.Duration { return e.wait }
