package billingstripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/timefmt"
)

// decodeEventObject reads the event's object into v; an object that does not decode
// is malformed.
func decodeEventObject(ev *stripe.Event, v any) error {
	if ev.Data == nil || len(ev.Data.Raw) == 0 {
		return fmt.Errorf("%w: %s %s has no object", errMalformed, ev.Type, ev.ID)
	}
	if err := json.Unmarshal(ev.Data.Raw, v); err != nil {
		return fmt.Errorf("%w: %s %s: %w", errMalformed, ev.Type, ev.ID, err)
	}
	return nil
}

// changeOutcome reports a settlement's answer as an outcome.
func changeOutcome(changed bool) string {
	if changed {
		return outcomeApplied
	}
	return outcomeReplay
}

// paymentIntent handles payment_intent.succeeded and .payment_failed: the
// settlement or return of a payment the Provider made, or the purchase of
// a founder pass.
func (h *WebhookHandler) paymentIntent(ctx context.Context, ev *stripe.Event) (string, error) {
	var pi stripe.PaymentIntent
	if err := decodeEventObject(ev, &pi); err != nil {
		return "", err
	}
	if pi.ID == "" {
		return "", fmt.Errorf("%w: %s %s: payment intent without an ID", errMalformed, ev.Type, ev.ID)
	}
	if sub := pi.Metadata[MetadataSubscriptionID]; sub != "" {
		if h.cfg.Collector == nil {
			return "", fmt.Errorf("%w: payment intent %s of subscription %s: no Collector configured", ErrUnmapped, pi.ID, sub)
		}
		s := billing.Settlement{SubscriptionID: sub, TransactionID: pi.ID, Kind: billing.SettlementSettled}
		if ev.Type == stripe.EventTypePaymentIntentPaymentFailed {
			if intentMethodType(&pi) == stripe.PaymentMethodTypeCard {
				// A card answers the confirmation itself: Collect (or the
				// replay or lookup of an attempt whose answer was lost)
				// records the decline. The event of an earlier attempt's
				// intent would otherwise wait for a record that has moved
				// on to a later attempt.
				return outcomeIgnoredCard, nil
			}
			s.Kind = billing.SettlementReturned
			if e := pi.LastPaymentError; e != nil {
				s.Reason = declineReason(e) // as a decline's reason reads
			}
		}
		rec, changed, err := h.cfg.Collector.ApplySettlement(ctx, s)
		if s.Kind == billing.SettlementReturned && errors.Is(err, billing.ErrSettlementEarly) && staleAttempt(&pi, sub, &rec) {
			// The record's latest attempt is another one: this intent's
			// attempt was resolved before it, so no redelivery will ever
			// apply the event, and a failure collected nothing. (The
			// success of an earlier attempt is not ignored: the collector
			// records it, or reports it as a duplicate payment.)
			return outcomeIgnoredStale, nil
		}
		if s.Kind == billing.SettlementReturned && errors.Is(err, billing.ErrIllegalTransition) && succeededBefore(&pi, sub, &rec) {
			// A PaymentIntent that succeeded never fails afterwards: this
			// failure came before the success, delivered late.
			return outcomeIgnoredSucceeded, nil
		}
		if err != nil {
			return "", fmt.Errorf("payment intent %s of subscription %s: %w", pi.ID, sub, err)
		}
		return changeOutcome(changed), nil
	}
	if ev.Type != stripe.EventTypePaymentIntentSucceeded || h.cfg.Passes == nil || h.cfg.Accounts == nil {
		return outcomeIgnored, nil
	}
	user, pass, ok, err := h.cfg.Passes.FounderPassOf(ctx, &pi)
	if err != nil {
		return "", fmt.Errorf("founder pass of payment intent %s: %w", pi.ID, err)
	}
	if !ok {
		return outcomeIgnored, nil
	}
	parsed, err := entitlement.ParsePassType(string(pass))
	if err != nil {
		return "", fmt.Errorf("%w: founder pass of payment intent %s: %w", errMalformed, pi.ID, err)
	}
	if err := entitlement.CheckAccountID(user); err != nil {
		return "", fmt.Errorf("%w: founder pass of payment intent %s: %w", errMalformed, pi.ID, err)
	}
	purchased := time.Unix(pi.Created, 0).UTC()
	if pi.Created == 0 {
		purchased = time.Unix(ev.Created, 0).UTC()
	}
	granted, err := h.cfg.Accounts.GrantFounderPass(ctx, user, parsed, pi.ID, purchased)
	if err != nil {
		return "", fmt.Errorf("founder pass %s of user %s (payment intent %s): %w", parsed, user, pi.ID, err)
	}
	return changeOutcome(granted), nil
}

// intentMethodType is the type of the payment method pi was confirmed
// with, as far as the event tells it: the method of its last payment
// error, the expanded payment method, or its only allowed method type;
// "" when the event does not say.
func intentMethodType(pi *stripe.PaymentIntent) stripe.PaymentMethodType {
	if e := pi.LastPaymentError; e != nil && e.PaymentMethod != nil && e.PaymentMethod.Type != "" {
		return e.PaymentMethod.Type
	}
	if pi.PaymentMethod != nil && pi.PaymentMethod.Type != "" {
		return pi.PaymentMethod.Type
	}
	if len(pi.PaymentMethodTypes) == 1 {
		return stripe.PaymentMethodType(pi.PaymentMethodTypes[0])
	}
	return ""
}

// staleAttempt reports whether the record rec, which ApplySettlement
// answered with [billing.ErrSettlementEarly], is known to be past the
// attempt that made pi: the record of subscription sub carries a latest
// attempt whose key is not the one in pi's metadata. An early settlement
// of the record's own attempt (in flight, its answer lost) keeps the key
// and is redelivered until that attempt is recorded.
func staleAttempt(pi *stripe.PaymentIntent, sub string, rec *billing.Period) bool {
	key := pi.Metadata[MetadataIdempotencyKey]
	return key != "" && rec.SubscriptionID == sub && rec.LastAttempt.Key != "" && rec.LastAttempt.Key != key
}

// succeededBefore reports whether rec, the record of subscription sub that
// refused the return of pi as an illegal transition, holds pi as a
// payment that succeeded (COMPLETED, or REFUNDED since).
func succeededBefore(pi *stripe.PaymentIntent, sub string, rec *billing.Period) bool {
	return rec.SubscriptionID == sub && rec.TransactionID == pi.ID &&
		(rec.Status == billing.StatusCompleted || rec.Status == billing.StatusRefunded)
}

// chargeRefunded handles charge.refunded: a fully refunded charge of a
// payment the Provider made refunds its record.
func (h *WebhookHandler) chargeRefunded(ctx context.Context, ev *stripe.Event) (string, error) {
	var ch stripe.Charge
	if err := decodeEventObject(ev, &ch); err != nil {
		return "", err
	}
	if ch.PaymentIntent == nil || ch.PaymentIntent.ID == "" {
		return outcomeIgnored, nil // not a payment the Provider made
	}
	piID := ch.PaymentIntent.ID
	meta := ch.Metadata
	if meta[MetadataSubscriptionID] == "" && len(ch.PaymentIntent.Metadata) > 0 {
		meta = ch.PaymentIntent.Metadata // an expanded intent
	}
	if meta[MetadataSubscriptionID] == "" {
		if h.cfg.Intents == nil {
			return "", fmt.Errorf("%w: charge %s of payment intent %s carries no %s and no Intents lookup is configured",
				ErrUnmapped, ch.ID, piID, MetadataSubscriptionID)
		}
		var err error
		if meta, err = h.cfg.Intents.PaymentIntentMetadata(ctx, piID); err != nil {
			return "", fmt.Errorf("refund of charge %s: %w", ch.ID, err)
		}
	}
	sub := meta[MetadataSubscriptionID]
	if sub == "" {
		return outcomeIgnored, nil
	}
	if h.cfg.Collector == nil {
		return "", fmt.Errorf("%w: refund of payment intent %s of subscription %s: no Collector configured", ErrUnmapped, piID, sub)
	}
	if !ch.Refunded {
		return "", fmt.Errorf("%w: partial refund (%d of %d) of payment intent %s of subscription %s is not recorded",
			ErrUnmapped, ch.AmountRefunded, ch.Amount, piID, sub)
	}
	_, changed, err := h.cfg.Collector.ApplySettlement(ctx, billing.Settlement{SubscriptionID: sub, TransactionID: piID, Kind: billing.SettlementRefunded})
	if err != nil {
		return "", fmt.Errorf("refund of payment intent %s of subscription %s: %w", piID, sub, err)
	}
	return changeOutcome(changed), nil
}

// subscription handles customer.subscription.created, .updated and
// .deleted: the subscription's state as of the event, applied in the
// order of the events' creation by the accounts store.
func (h *WebhookHandler) subscription(ctx context.Context, ev *stripe.Event) (string, error) {
	if h.cfg.Accounts == nil {
		return outcomeIgnored, nil
	}
	var sub stripe.Subscription
	if err := decodeEventObject(ev, &sub); err != nil {
		return "", err
	}
	if sub.Customer == nil || sub.Customer.ID == "" || sub.Items == nil {
		return "", fmt.Errorf("%w: %s %s: subscription %s without customer or items", errMalformed, ev.Type, ev.ID, sub.ID)
	}
	user, err := h.userOf(ctx, sub.Customer.ID)
	if err != nil {
		return "", fmt.Errorf("subscription %s: %w", sub.ID, err)
	}
	item, tier, err := h.tierOf(ctx, sub.Items.Data)
	if err != nil {
		return "", fmt.Errorf("subscription %s: %w", sub.ID, err)
	}
	pe := entitlement.ProviderEvent{
		EventID: ev.ID, Created: time.Unix(ev.Created, 0).UTC(), UserID: user,
		SubscriptionID: sub.ID, Customer: sub.Customer.ID, Tier: tier,
		Status: entitlement.ProviderStatus(sub.Status), CancelAtPeriodEnd: sub.CancelAtPeriodEnd,
	}
	if item.CurrentPeriodStart != 0 {
		pe.CurrentPeriodStart = time.Unix(item.CurrentPeriodStart, 0).UTC()
	}
	if item.CurrentPeriodEnd != 0 {
		pe.CurrentPeriodEnd = time.Unix(item.CurrentPeriodEnd, 0).UTC()
	}
	if pe, err = pe.Normalize(); err != nil {
		return "", fmt.Errorf("%w: %s %s of subscription %s: %w", errMalformed, ev.Type, ev.ID, sub.ID, err)
	}
	applied, err := h.cfg.Accounts.ApplyProviderEvent(ctx, pe)
	if err != nil {
		return "", fmt.Errorf("%s %s of subscription %s: %w", ev.Type, ev.ID, sub.ID, err)
	}
	if !applied {
		return "superseded", nil
	}
	return outcomeApplied, nil
}

// userOf maps a customer to its user through the host.
func (h *WebhookHandler) userOf(ctx context.Context, customer string) (string, error) {
	user, err := h.cfg.Users.UserOfCustomer(ctx, customer)
	if err != nil {
		return "", fmt.Errorf("user of customer %s: %w", customer, err)
	}
	if err := entitlement.CheckAccountID(user); err != nil {
		return "", fmt.Errorf("%w: user of customer %s: %w", errMalformed, customer, err)
	}
	return user, nil
}

// tierOf returns the item whose price maps to the highest tier, or an
// error wrapping ErrUnmapped when no price maps to one.
func (h *WebhookHandler) tierOf(ctx context.Context, items []*stripe.SubscriptionItem) (*stripe.SubscriptionItem, entitlement.Tier, error) {
	var (
		best     *stripe.SubscriptionItem
		bestTier entitlement.Tier
	)
	for _, it := range items {
		if it == nil || it.Price == nil {
			continue
		}
		t, err := h.priceTier(ctx, it.Price.ID, priceProduct(it.Price))
		if errors.Is(err, ErrUnmapped) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if best == nil || t.Rank() > bestTier.Rank() {
			best, bestTier = it, t
		}
	}
	if best == nil {
		return nil, "", fmt.Errorf("%w: no item's price is a tier", ErrUnmapped)
	}
	return best, bestTier, nil
}

// priceTier asks the host for a price's tier and checks the answer.
func (h *WebhookHandler) priceTier(ctx context.Context, price, product string) (entitlement.Tier, error) {
	t, err := h.cfg.Tiers.TierOfPrice(ctx, price, product)
	if err != nil {
		return "", fmt.Errorf("tier of price %s: %w", price, err)
	}
	parsed, err := entitlement.ParseTier(string(t))
	if err != nil {
		return "", fmt.Errorf("%w: tier of price %s: %w", errMalformed, price, err)
	}
	return parsed, nil
}

// priceProduct is the ID of the product a price belongs to, "" when absent.
func priceProduct(p *stripe.Price) string {
	if p.Product == nil {
		return ""
	}
	return p.Product.ID
}

// invoicePaid handles invoice.paid: the monthly credit grant of the
// period a subscription's first or renewal invoice pays.
func (h *WebhookHandler) invoicePaid(ctx context.Context, ev *stripe.Event) (string, error) {
	if h.cfg.Accounts == nil {
		return outcomeIgnored, nil
	}
	var inv stripe.Invoice
	if err := decodeEventObject(ev, &inv); err != nil {
		return "", err
	}
	if inv.Parent == nil || inv.Parent.Type != stripe.InvoiceParentTypeSubscriptionDetails {
		return outcomeIgnored, nil // a one-off invoice
	}
	if inv.BillingReason != stripe.InvoiceBillingReasonSubscriptionCreate && inv.BillingReason != stripe.InvoiceBillingReasonSubscriptionCycle {
		return outcomeIgnored, nil // prorations and manual invoices pay no new period
	}
	if inv.Customer == nil || inv.Customer.ID == "" {
		return "", fmt.Errorf("%w: invoice %s without customer", errMalformed, inv.ID)
	}
	line, tier, err := h.paidLine(ctx, &inv)
	if err != nil {
		return "", fmt.Errorf("invoice %s: %w", inv.ID, err)
	}
	user, err := h.userOf(ctx, inv.Customer.ID)
	if err != nil {
		return "", fmt.Errorf("invoice %s: %w", inv.ID, err)
	}
	// The grant's period is the paid line's period start, written as the
	// library writes instants in whole seconds.
	period, err := timefmt.Seconds(time.Unix(line.Period.Start, 0))
	if err != nil {
		return "", fmt.Errorf("%w: invoice %s: period start: %w", errMalformed, inv.ID, err)
	}
	res, err := h.cfg.Accounts.MonthlyGrant(ctx, user, tier, period, ev.ID)
	if err != nil {
		return "", fmt.Errorf("monthly grant of invoice %s to user %s for %s: %w", inv.ID, user, period, err)
	}
	return changeOutcome(res.Applied), nil
}

// paidLine returns the invoice's subscription line (not a proration) whose
// price maps to the highest tier.
func (h *WebhookHandler) paidLine(ctx context.Context, inv *stripe.Invoice) (*stripe.InvoiceLineItem, entitlement.Tier, error) {
	if inv.Lines == nil {
		return nil, "", fmt.Errorf("%w: no lines", errMalformed)
	}
	var (
		best     *stripe.InvoiceLineItem
		bestTier entitlement.Tier
	)
	for _, l := range inv.Lines.Data {
		if l == nil || l.Parent == nil || l.Parent.Type != stripe.InvoiceLineItemParentTypeSubscriptionItemDetails ||
			l.Parent.SubscriptionItemDetails == nil || l.Parent.SubscriptionItemDetails.Proration ||
			l.Pricing == nil || l.Pricing.PriceDetails == nil || l.Pricing.PriceDetails.Price == nil || l.Period == nil || l.Period.Start == 0 {
			continue
		}
		t, err := h.priceTier(ctx, l.Pricing.PriceDetails.Price.ID, l.Pricing.PriceDetails.Product)
		if errors.Is(err, ErrUnmapped) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if best == nil || t.Rank() > bestTier.Rank() {
			best, bestTier = l, t
		}
	}
	if best == nil {
		return nil, "", fmt.Errorf("%w: no subscription line's price is a tier", ErrUnmapped)
	}
	return best, bestTier, nil
}

// outcomeNothingOwed answers a payment-method event of a user who owes
// nothing.
const outcomeNothingOwed = "applied, nothing owed"

// paymentMethodUpdated handles customer.updated whose default payment
// method changed and payment_method.automatically_updated: the owed
// periods of the customer's user are charged at once, keyed by the
// event.
func (h *WebhookHandler) paymentMethodUpdated(ctx context.Context, ev *stripe.Event) (string, error) {
	updater, ok := h.cfg.Collector.(PaymentMethodUpdater)
	if !ok || h.cfg.Users == nil {
		return outcomeIgnored, nil
	}
	var customer string
	switch ev.Type {
	case stripe.EventTypeCustomerUpdated:
		var c stripe.Customer
		if err := decodeEventObject(ev, &c); err != nil {
			return "", err
		}
		if !defaultMethodChanged(ev) || c.InvoiceSettings == nil || c.InvoiceSettings.DefaultPaymentMethod == nil ||
			c.InvoiceSettings.DefaultPaymentMethod.ID == "" {
			return outcomeIgnored, nil // another change, or the default removed
		}
		if c.ID == "" {
			return "", fmt.Errorf("%w: %s %s: customer without an ID", errMalformed, ev.Type, ev.ID)
		}
		customer = c.ID
	default: // payment_method.automatically_updated
		var pm stripe.PaymentMethod
		if err := decodeEventObject(ev, &pm); err != nil {
			return "", err
		}
		if pm.Customer == nil || pm.Customer.ID == "" {
			return outcomeIgnored, nil // a method of no customer charges nobody
		}
		customer = pm.Customer.ID
	}
	user, err := h.userOf(ctx, customer)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", ev.Type, ev.ID, err)
	}
	up, err := updater.PaymentMethodUpdated(ctx, billing.UserRequest{UserID: user, RequestKey: "stripe:" + ev.ID})
	if err != nil {
		return "", fmt.Errorf("%s %s of customer %s: %w", ev.Type, ev.ID, customer, err)
	}
	switch {
	case len(up.Periods) == 0:
		return outcomeNothingOwed, nil
	case up.Repeated:
		return outcomeReplay, nil
	}
	return outcomeApplied, nil
}

// defaultMethodChanged reports whether ev, a customer.updated, changed
// the customer's invoice_settings.default_payment_method: Stripe names
// the fields an update changed, with their earlier values, in
// previous_attributes.
func defaultMethodChanged(ev *stripe.Event) bool {
	if ev.Data == nil {
		return false
	}
	prev, ok := ev.Data.PreviousAttributes["invoice_settings"].(map[string]any)
	if !ok {
		return false
	}
	_, changed := prev["default_payment_method"]
	return changed
}
