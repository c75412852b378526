package billingstripe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v85"
	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
)

// DefaultWebhookMaxBody is the default of [WebhookConfig.MaxBodyBytes]:
// Stripe's event payloads stay far below it.
const DefaultWebhookMaxBody int64 = 1 << 20

// ErrUnmapped is what a host port returns (wrapped) for a Stripe object
// that is not the host's to apply: a customer it has no user for, a price
// that is no tier. The handler then ignores the event and answers 200.
var ErrUnmapped = errors.New("billingstripe: not mapped by the host")

// errMalformed marks an event the handler understands but cannot apply
// as sent: its object does not decode, or a field the library validates
// is out of range (a subscription status it does not know, a pass type
// that is none). Such an event answers 400.
var errMalformed = errors.New("billingstripe: malformed event")

// Settler applies the settlement of a payment to its billing record;
// [*billing.Collector] implements it.
type Settler interface {
	ApplySettlement(ctx context.Context, s billing.Settlement) (billing.Period, bool, error)
}

// PaymentMethodUpdater charges a user's owed periods at once when the
// user's payment method was updated; [*billing.Collector] implements it.
// The handler uses it when [WebhookConfig.Collector] implements it too.
type PaymentMethodUpdater interface {
	PaymentMethodUpdated(ctx context.Context, req billing.UserRequest) (billing.PaymentMethodUpdate, error)
}

var _ PaymentMethodUpdater = (*billing.Collector)(nil)

// Entitlements is the part of [entitlement.Accounts] the handler writes:
// provider subscriptions, founder passes and monthly credit grants.
type Entitlements interface {
	ApplyProviderEvent(ctx context.Context, ev entitlement.ProviderEvent) (applied bool, err error)
	GrantFounderPass(ctx context.Context, userID string, pass entitlement.PassType, paymentIntentID string, purchasedAt time.Time) (granted bool, err error)
	MonthlyGrant(ctx context.Context, userID string, tier entitlement.Tier, period, eventID string) (entitlement.MonthlyGrantResult, error)
}

// CustomerUsers maps a Stripe customer to the host's user.
type CustomerUsers interface {
	// UserOfCustomer returns the user of customerID ("cus_…"), or an
	// error wrapping [ErrUnmapped] when the customer is none of the
	// host's users. Any other error is taken as temporary.
	UserOfCustomer(ctx context.Context, customerID string) (userID string, err error)
}

// PriceTiers maps a Stripe price to an access tier.
type PriceTiers interface {
	// TierOfPrice returns the tier a subscription to priceID (a price of
	// productID) grants, or an error wrapping [ErrUnmapped] when the price
	// is no tier of the host's.
	TierOfPrice(ctx context.Context, priceID, productID string) (entitlement.Tier, error)
}

// FounderPassPurchases tells which founder pass a one-off payment bought.
type FounderPassPurchases interface {
	// FounderPassOf returns the user and the pass a succeeded
	// PaymentIntent paid for; ok is false when the intent is no pass
	// purchase (a host typically reads a metadata key it set on the
	// intent, e.g. through Checkout's payment_intent_data.metadata, and
	// maps the customer to the user).
	FounderPassOf(ctx context.Context, pi *stripe.PaymentIntent) (userID string, pass entitlement.PassType, ok bool, err error)
}

// IntentMetadata looks up the metadata of a PaymentIntent.
type IntentMetadata interface {
	PaymentIntentMetadata(ctx context.Context, paymentIntentID string) (map[string]string, error)
}

// WebhookConfig configures [NewWebhookHandler]. At least one of
// Collector and Accounts is required.
type WebhookConfig struct {
	// Secret is the webhook endpoint's signing secret ("whsec_…").
	// Required. It is never logged.
	Secret string
	// Collector applies the settlement, return and refund of the
	// payments the [Provider] made and, when it is also a
	// [PaymentMethodUpdater] (as [*billing.Collector] is) and Users is
	// set, charges a customer's owed periods when the payment method
	// changed. Defaults to nil: those events are ignored.
	Collector Settler
	// Intents looks up the metadata of a refunded charge's PaymentIntent
	// when the charge does not carry the dynabill metadata itself.
	// Defaults to nil: such refunds are ignored and logged.
	// [NewIntentMetadata] implements it with a Stripe client.
	Intents IntentMetadata
	// Accounts receives subscription events, founder passes and monthly
	// credit grants. Defaults to nil: those events are ignored. When set,
	// Users and Tiers are required.
	Accounts Entitlements
	// Users maps customers to users: required with Accounts; with
	// Collector, the payment-method events need it (without it they are
	// ignored).
	Users CustomerUsers
	// Tiers maps prices to tiers (with Accounts).
	Tiers PriceTiers
	// Passes recognises founder pass purchases. Defaults to nil: no
	// payment is taken for a pass purchase.
	Passes FounderPassPurchases
	// MaxBodyBytes bounds the request body; a larger body answers 413.
	// Defaults to [DefaultWebhookMaxBody].
	MaxBodyBytes int64
	// Logger receives one line per event handled (never the secret).
	// Defaults to nil: quiet.
	Logger *slog.Logger
}

// WebhookHandler is the http.Handler of a Stripe webhook endpoint. It
// verifies the Stripe-Signature header with the endpoint secret (and the
// SDK's default timestamp tolerance of five minutes), then applies the
// events it understands. Stripe delivers each event at least once and in
// any order; every change the handler makes is idempotent and ordered by
// the store it writes to, so a redelivered or late event changes nothing
// it should not.
//
// # Events
//
//   - payment_intent.succeeded and payment_intent.payment_failed of an
//     intent the [Provider] created (metadata [MetadataSubscriptionID]):
//     [billing.SettlementSettled] or [billing.SettlementReturned] (the
//     reason from last_payment_error) for the record of that
//     subscription. A card payment's succeeded event usually finds the
//     record already COMPLETED: a replay, nothing changes. A card's
//     payment_failed (the payment method of last_payment_error, or of
//     the intent, is a card) is ignored: the card answered the
//     confirmation, and the collector recorded that decline from the
//     answer (or from the replay or lookup of an attempt whose answer was
//     lost); only a delayed method's failure, such as an ACH debit
//     returned after processing, or one whose method the event does not
//     name, is applied as a return. A payment_failed whose intent carries
//     an idempotency key other than the record's latest attempt's, about
//     a record still waiting to be collected, is of an earlier attempt
//     and is ignored, not redelivered.
//   - charge.refunded of a fully refunded charge of such an intent:
//     [billing.SettlementRefunded]. Stripe copies an intent's metadata to
//     the charges it creates; a charge without it is tied to its intent
//     through [WebhookConfig.Intents]. Partial refunds are ignored: a
//     record is either paid or refunded.
//   - customer.subscription.created, .updated and .deleted:
//     [entitlement.ProviderEvent] through [Entitlements.ApplyProviderEvent],
//     which applies events in the order Stripe created them. The tier is
//     that of the subscription item whose price maps to the highest tier;
//     its current period (held by the items since Stripe's 2025 API
//     versions) bounds the subscription.
//   - payment_intent.succeeded of an intent [FounderPassPurchases] names
//     a pass purchase: [Entitlements.GrantFounderPass], once per user and
//     pass. The succeeded intent is the one event that means the money
//     arrived whatever the payment method and however the intent was made
//     (Checkout, Payment Links, Elements); checkout.session.completed
//     comes before the payment of a delayed method such as ACH.
//   - invoice.paid of a subscription's first or renewal invoice
//     (billing_reason subscription_create or subscription_cycle; proration
//     and manual invoices grant nothing): [Entitlements.MonthlyGrant] of
//     the subscription line's tier for the period it pays, named by the
//     line's period start as "2006-01-02T15:04:05Z", so a redelivered
//     invoice grants nothing twice.
//   - customer.updated whose invoice_settings.default_payment_method
//     changed to a payment method (its previous_attributes name the
//     field), and payment_method.automatically_updated of a customer's
//     method (the card network gave the card a new number or expiry):
//     the payment method changed, so
//     [billing.Collector.PaymentMethodUpdated] charges the owed
//     periods of the customer's user ([CustomerUsers]) at once, and the
//     periods they held back, with the request key
//     "stripe:" + the event's ID: a redelivered event is the same
//     request, answered from the first delivery's rows, and charges
//     nothing more. payment_method.attached and setup_intent.succeeded
//     are not handled: a method attached or set up is not yet the one
//     the [Provider] charges (the host's [Customers] names that); a host
//     that makes it the customer's default, as Stripe's guide to
//     updating payment details does, sends customer.updated, and a host
//     that keeps the method in its own records calls
//     PaymentMethodUpdated itself when it stores the new one. A decline
//     of the new method answers 200 too: the period stays owed and its
//     dunning goes on.
//
// Every other event type answers 200 and is ignored, as are events about
// objects that are not the host's (no dynabill metadata, a customer or
// price a port reports [ErrUnmapped], a record this deployment does not
// have, or a return or refund whose transaction is not the record's).
//
// # Payments that succeed after a decline
//
// A PaymentIntent that failed can succeed later (the customer confirms it
// on-session after an off-session decline, for 3-D Secure or with another
// card), but one that succeeded never fails afterwards. So the success
// wins in either order of delivery: a succeeded event records the declined
// (ERROR) record COMPLETED once, and the retry run charges the period no
// more; a payment_failed delivered after the success of the same intent is
// ignored. The succeeded event of an earlier attempt's intent (declined,
// retried with a new intent, then confirmed) completes the record with
// that intent while the period is unpaid; when another intent paid the
// period, the collector reports a duplicate payment
// ([billing.EventDuplicatePayment], [billing.ErrDuplicatePayment]) and the
// handler answers 200 "duplicate payment reported" with a warning in its
// log: the duplicate is for the host to refund. See
// [billing.Collector.ApplySettlement].
//
// # Responses
//
// Stripe retries every answer but a 2xx for up to three days, so the
// status says whether a later delivery can do better:
//
//   - 200: applied, a replay, ignored, or a duplicate payment reported
//     (nothing a redelivery could do better).
//   - 400: a bad or missing signature, an expired timestamp, or a body
//     that is no event of the SDK's API version; nothing changed. Also an
//     event of a known type whose object cannot be applied as sent (it
//     does not decode, or carries a subscription status, tier or pass
//     type the library refuses): answering 200 would lose it silently,
//     while Stripe's retries and its failing-endpoint alerts keep it
//     visible until a fixed deployment applies it.
//   - 405 for a method other than POST; 413 for a body over MaxBodyBytes.
//   - 409: the record cannot take the change yet (a refund that arrived
//     before the settlement of the same debit); a redelivery applies it.
//   - 503: the settlement arrived before the outcome of the record's
//     latest attempt, the one that made the intent, could be recorded
//     ([billing.ErrSettlementEarly]), or an owed period's attempt is in
//     flight with its outcome unknown, so the new payment method cannot
//     be charged yet ([billing.ErrAttemptInFlight]).
//   - 500: a store, collector or host port failed; Stripe retries.
type WebhookHandler struct {
	cfg WebhookConfig
	log *slog.Logger
}

var _ http.Handler = (*WebhookHandler)(nil)

// NewWebhookHandler returns the handler of cfg, or an error naming the
// first missing field.
func NewWebhookHandler(cfg WebhookConfig) (*WebhookHandler, error) {
	switch {
	case cfg.Secret == "":
		return nil, errors.New("billingstripe: WebhookConfig.Secret is required")
	case cfg.Collector == nil && cfg.Accounts == nil:
		return nil, errors.New("billingstripe: WebhookConfig needs a Collector, Accounts, or both")
	case cfg.Accounts != nil && cfg.Users == nil:
		return nil, errors.New("billingstripe: WebhookConfig.Users is required with Accounts")
	case cfg.Accounts != nil && cfg.Tiers == nil:
		return nil, errors.New("billingstripe: WebhookConfig.Tiers is required with Accounts")
	case cfg.MaxBodyBytes < 0:
		return nil, fmt.Errorf("billingstripe: WebhookConfig.MaxBodyBytes is negative: %d", cfg.MaxBodyBytes)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultWebhookMaxBody
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &WebhookHandler{cfg: cfg, log: log}, nil
}

// ServeHTTP verifies and applies one event delivery.
func (h *WebhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	ctx := r.Context()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.log.WarnContext(ctx, "stripe webhook: body too large", "limit", h.cfg.MaxBodyBytes)
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), h.cfg.Secret)
	if err != nil {
		// The SDK's signature errors are sentinels; a body that is no
		// event of its API version is a plain error. Neither changes
		// anything, and neither is told apart to the caller.
		h.log.WarnContext(ctx, "stripe webhook: refused", "error", err)
		http.Error(w, "invalid event or signature", http.StatusBadRequest)
		return
	}
	outcome, err := h.apply(ctx, &ev)
	status := http.StatusOK
	if err != nil {
		status, outcome = h.statusOf(err)
	}
	attrs := []any{"event", ev.ID, "type", string(ev.Type), "outcome", outcome, "status", status}
	switch {
	case status >= 500:
		h.log.ErrorContext(ctx, "stripe webhook", append(attrs, "error", err)...)
	case status != http.StatusOK, errors.Is(err, billing.ErrDuplicatePayment):
		h.log.WarnContext(ctx, "stripe webhook", append(attrs, "error", err)...)
	case err != nil:
		h.log.InfoContext(ctx, "stripe webhook", append(attrs, "reason", err)...)
	default:
		h.log.DebugContext(ctx, "stripe webhook", attrs...)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, outcome+"\n")
}

// The outcomes the handler answers (and logs).
const (
	outcomeApplied = "applied"
	outcomeReplay  = "replay"
	outcomeIgnored = "ignored"
	// outcomeIgnoredCard answers a card's payment_failed: its decline
	// is recorded from the charge's own answer.
	outcomeIgnoredCard = "ignored, recorded by the charge"
	// outcomeIgnoredStale answers an event of an attempt the record has
	// moved past.
	outcomeIgnoredStale = "ignored, an earlier attempt"
	// outcomeIgnoredSucceeded answers the failure of an intent the
	// record holds as succeeded: the failure came first.
	outcomeIgnoredSucceeded = "ignored, the intent succeeded"
	// outcomeDuplicate answers the success of an intent for a period
	// another transaction paid: reported, not applied.
	outcomeDuplicate = "duplicate payment reported"
)

// statusOf maps an error of apply to its answer: 200 for events that are
// not this host's, 4xx and 5xx as [WebhookHandler] documents.
func (h *WebhookHandler) statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, errMalformed):
		return http.StatusBadRequest, "malformed"
	case errors.Is(err, billing.ErrSettlementEarly):
		return http.StatusServiceUnavailable, "early"
	case errors.Is(err, billing.ErrAttemptInFlight):
		return http.StatusServiceUnavailable, "attempt in flight"
	case errors.Is(err, billing.ErrIllegalTransition):
		return http.StatusConflict, "not yet applicable"
	case errors.Is(err, billing.ErrDuplicatePayment):
		return http.StatusOK, outcomeDuplicate
	case errors.Is(err, ErrUnmapped), errors.Is(err, billing.ErrTransactionMismatch), errors.Is(err, billing.ErrNotFound):
		return http.StatusOK, outcomeIgnored
	}
	return http.StatusInternalServerError, "failed"
}

// apply handles one verified event and returns its outcome; an error is
// classified by statusOf.
func (h *WebhookHandler) apply(ctx context.Context, ev *stripe.Event) (string, error) {
	switch ev.Type {
	case stripe.EventTypePaymentIntentSucceeded, stripe.EventTypePaymentIntentPaymentFailed:
		return h.paymentIntent(ctx, ev)
	case stripe.EventTypeChargeRefunded:
		return h.chargeRefunded(ctx, ev)
	case stripe.EventTypeCustomerSubscriptionCreated, stripe.EventTypeCustomerSubscriptionUpdated, stripe.EventTypeCustomerSubscriptionDeleted:
		return h.subscription(ctx, ev)
	case stripe.EventTypeInvoicePaid:
		return h.invoicePaid(ctx, ev)
	case stripe.EventTypeCustomerUpdated, stripe.EventTypePaymentMethodAutomaticallyUpdated:
		return h.paymentMethodUpdated(ctx, ev)
	}
	return outcomeIgnored, nil
}

// stripeIntents is [IntentMetadata] over a Stripe client.
type stripeIntents struct{ client *stripe.Client }

// NewIntentMetadata returns an [IntentMetadata] that retrieves the
// PaymentIntent with client.
func NewIntentMetadata(client *stripe.Client) IntentMetadata { return stripeIntents{client} }

// PaymentIntentMetadata implements [IntentMetadata].
func (s stripeIntents) PaymentIntentMetadata(ctx context.Context, id string) (map[string]string, error) {
	pi, err := s.client.V1PaymentIntents.Retrieve(ctx, id, nil)
	if err != nil {
		return nil, fmt.Errorf("billingstripe: retrieve payment intent %s: %w", id, err)
	}
	return pi.Metadata, nil
}
