package billingstripe_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/entitlement"
)

// users maps customers "cus_<user>" to their user; others are unmapped.
type users struct{}

func (users) UserOfCustomer(_ context.Context, customer string) (string, error) {
	if u, ok := strings.CutPrefix(customer, "cus_"); ok && u != "stranger" {
		return u, nil
	}
	return "", fmt.Errorf("customer %s: %w", customer, billingstripe.ErrUnmapped)
}

// tiers maps prices "price_<tier>" of product prod_plan to the tier;
// others are unmapped.
type tiers struct{}

func (tiers) TierOfPrice(_ context.Context, price, product string) (entitlement.Tier, error) {
	if t, ok := strings.CutPrefix(price, "price_"); ok && product == "prod_plan" {
		return entitlement.Tier(t), nil
	}
	return "", fmt.Errorf("price %s: %w", price, billingstripe.ErrUnmapped)
}

// passes reads the pass a payment bought from its metadata "founder_pass".
type passes struct{}

func (passes) FounderPassOf(ctx context.Context, pi *stripe.PaymentIntent) (string, entitlement.PassType, bool, error) {
	pass := pi.Metadata["founder_pass"]
	if pass == "" || pi.Customer == nil {
		return "", "", false, nil
	}
	user, err := users{}.UserOfCustomer(ctx, pi.Customer.ID)
	return user, entitlement.PassType(pass), err == nil, err
}

// failingAccounts fails every write as a store outage would.
type failingAccounts struct{ *billingtest.Accounts }

func (failingAccounts) ApplyProviderEvent(context.Context, entitlement.ProviderEvent) (bool, error) {
	return false, errors.New("dynamodb: throughput exceeded")
}

func (failingAccounts) MonthlyGrant(context.Context, string, entitlement.Tier, string, string) (entitlement.MonthlyGrantResult, error) {
	return entitlement.MonthlyGrantResult{}, errors.New("dynamodb: throughput exceeded")
}

func newAccountsHandler(t *testing.T) (*billingtest.Accounts, *billingstripe.WebhookHandler) {
	t.Helper()
	acc, err := billingtest.NewAccounts(billingtest.AccountsOptions{Clock: billingtest.NewClock(jan31)})
	require.NoError(t, err)
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Accounts: acc, Users: users{}, Tiers: tiers{}, Passes: passes{}})
	require.NoError(t, err)
	return acc, h
}

// subObj is a subscription of customer cus_u1 to price, with its period
// on its item as the API versions since 2025 put it.
func subObj(status, price string, cancelAtPeriodEnd bool) map[string]any {
	return map[string]any{"id": "sub_1", "object": "subscription", "customer": "cus_u1", "status": status,
		"cancel_at_period_end": cancelAtPeriodEnd, "items": map[string]any{"object": "list", "data": []map[string]any{
			{"id": "si_addon", "object": "subscription_item", "price": map[string]any{"id": "price_addon", "object": "price", "product": "prod_addon"},
				"current_period_start": jan31.Unix(), "current_period_end": jan31.AddDate(0, 1, 0).Unix()},
			{"id": "si_1", "object": "subscription_item", "price": map[string]any{"id": price, "object": "price", "product": "prod_plan"},
				"current_period_start": jan31.Unix(), "current_period_end": jan31.AddDate(0, 1, 0).Unix()},
		}}}
}

type delivery struct {
	id      string
	typ     stripe.EventType
	created time.Time
	obj     map[string]any
}

func TestWebhookSubscriptionEvents(t *testing.T) {
	t0 := jan31
	created := delivery{"evt_c", stripe.EventTypeCustomerSubscriptionCreated, t0, subObj("active", "price_SAGE", false)}
	upgraded := delivery{"evt_u", stripe.EventTypeCustomerSubscriptionUpdated, t0.Add(time.Hour), subObj("active", "price_GUILDMASTER", false)}
	cancelling := delivery{"evt_p", stripe.EventTypeCustomerSubscriptionUpdated, t0.Add(2 * time.Hour), subObj("active", "price_GUILDMASTER", true)}
	deleted := delivery{"evt_d", stripe.EventTypeCustomerSubscriptionDeleted, t0.Add(2 * time.Hour), subObj("canceled", "price_GUILDMASTER", true)}
	for _, tc := range []struct {
		name       string
		deliveries []delivery
		// outcomes are the answers' bodies, each delivery answering 200.
		outcomes   []string
		wantStatus entitlement.ProviderStatus
		wantTier   entitlement.Tier
		wantCancel bool
		wantEvent  string
	}{
		{name: "in order", deliveries: []delivery{created, upgraded, cancelling},
			outcomes: []string{"applied", "applied", "applied"}, wantStatus: entitlement.ProviderActive, wantTier: entitlement.TierGuildmaster, wantCancel: true, wantEvent: "evt_p"},
		{name: "replayed", deliveries: []delivery{created, created, upgraded, upgraded, created},
			outcomes: []string{"applied", "superseded", "applied", "superseded", "superseded"}, wantStatus: entitlement.ProviderActive, wantTier: entitlement.TierGuildmaster, wantEvent: "evt_u"},
		{name: "deleted before the update it follows", deliveries: []delivery{created, deleted, upgraded},
			outcomes: []string{"applied", "applied", "superseded"}, wantStatus: entitlement.ProviderCanceled, wantTier: entitlement.TierGuildmaster, wantCancel: true, wantEvent: "evt_d"},
		{name: "deletion and update of the same instant, deletion first", deliveries: []delivery{deleted, cancelling, created},
			outcomes: []string{"applied", "superseded", "superseded"}, wantStatus: entitlement.ProviderCanceled, wantTier: entitlement.TierGuildmaster, wantCancel: true, wantEvent: "evt_d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc, h := newAccountsHandler(t)
			for i, d := range tc.deliveries {
				rec := deliver(h, eventJSON(t, d.id, d.typ, d.created.Unix(), d.obj))
				require.Equal(t, http.StatusOK, rec.Code, "delivery %d: %s", i, rec.Body.String())
				assert.Equal(t, tc.outcomes[i]+"\n", rec.Body.String(), "delivery %d (%s)", i, d.id)
			}
			got, err := acc.GetProviderSubscription(context.Background(), "u1", "sub_1")
			require.NoError(t, err)
			assert.Equal(t, tc.wantStatus, got.Status)
			assert.Equal(t, tc.wantTier, got.Tier)
			assert.Equal(t, tc.wantCancel, got.CancelAtPeriodEnd)
			assert.Equal(t, tc.wantEvent, got.LastEventID)
			assert.Equal(t, "cus_u1", got.CustomerID)
			assert.True(t, got.CurrentPeriodStart.Equal(jan31), "period start %v", got.CurrentPeriodStart)
			assert.True(t, got.CurrentPeriodEnd.Equal(jan31.AddDate(0, 1, 0)), "period end %v", got.CurrentPeriodEnd)
		})
	}
}

func TestWebhookSubscriptionRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		obj      map[string]any
		status   int
		outcome  string
		failing  bool
		wantSubs int
	}{
		{name: "customer of no user", obj: func() map[string]any {
			o := subObj("active", "price_SAGE", false)
			o["customer"] = "cus_stranger"
			return o
		}(),
			status: http.StatusOK, outcome: "ignored"},
		{name: "no price is a tier", obj: subObj("active", "price2_SAGE", false), status: http.StatusOK, outcome: "ignored"},
		{name: "status the library does not know", obj: subObj("paused", "price_SAGE", false), status: http.StatusBadRequest, outcome: "malformed"},
		{name: "price of a tier that is none", obj: subObj("active", "price_PLATINUM", false), status: http.StatusBadRequest, outcome: "malformed"},
		{name: "no items", obj: map[string]any{"id": "sub_1", "object": "subscription", "customer": "cus_u1", "status": "active"},
			status: http.StatusBadRequest, outcome: "malformed"},
		{name: "store failure", obj: subObj("active", "price_SAGE", false), failing: true, status: http.StatusInternalServerError, outcome: "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc, h := newAccountsHandler(t)
			if tc.failing {
				var err error
				h, err = billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Accounts: failingAccounts{acc}, Users: users{}, Tiers: tiers{}})
				require.NoError(t, err)
			}
			rec := deliver(h, eventJSON(t, "evt_1", stripe.EventTypeCustomerSubscriptionUpdated, jan31.Unix(), tc.obj))
			assert.Equal(t, tc.status, rec.Code, rec.Body.String())
			assert.Equal(t, tc.outcome+"\n", rec.Body.String())
			subs, err := acc.ListProviderSubscriptions(context.Background(), "u1")
			require.NoError(t, err)
			assert.Empty(t, subs, "a refused event wrote")
		})
	}
}

func TestWebhookFounderPass(t *testing.T) {
	acc, h := newAccountsHandler(t)
	purchase := func(id, pass string) []byte {
		return eventJSON(t, "evt_"+id, stripe.EventTypePaymentIntentSucceeded, jan31.Unix(), map[string]any{
			"id": id, "object": "payment_intent", "status": "succeeded", "customer": "cus_u1", "created": jan31.Unix(),
			"amount": 19900, "currency": "usd", "metadata": map[string]string{"founder_pass": pass}})
	}
	for i, tc := range []struct {
		body    []byte
		status  int
		outcome string
	}{
		{purchase("pi_pass", "FOUNDING_MEMBER"), http.StatusOK, "applied"},
		{purchase("pi_pass", "FOUNDING_MEMBER"), http.StatusOK, "replay"},  // redelivered
		{purchase("pi_pass2", "founding_member"), http.StatusOK, "replay"}, // a second purchase of a held pass
		{purchase("pi_bad", "DIAMOND"), http.StatusBadRequest, "malformed"},
		{purchase("pi_shop", ""), http.StatusOK, "ignored"},
	} {
		rec := deliver(h, tc.body)
		assert.Equal(t, tc.status, rec.Code, "delivery %d: %s", i, rec.Body.String())
		assert.Equal(t, tc.outcome+"\n", rec.Body.String(), "delivery %d", i)
	}
	got, err := acc.FounderPasses(context.Background(), "u1")
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, entitlement.PassFoundingMember, got[0].PassType)
	assert.Equal(t, "pi_pass", got[0].PaymentIntentID)
	assert.True(t, got[0].PurchasedAt.Equal(jan31))
	access, err := acc.ResolveAccess(context.Background(), "u1")
	require.NoError(t, err)
	assert.Equal(t, entitlement.TierSage, access.Tier)
}

// invoiceObj is a paid invoice of customer cus_u1 for subscription sub_1,
// with a proration line and the line of the period it pays.
func invoiceObj(id, reason string, periodStart time.Time, price string) map[string]any {
	line := func(lineID string, proration bool, start time.Time) map[string]any {
		return map[string]any{"id": lineID, "object": "line_item", "amount": 1500,
			"parent": map[string]any{"type": "subscription_item_details", "subscription_item_details": map[string]any{
				"subscription": "sub_1", "subscription_item": "si_1", "proration": proration}},
			"pricing":  map[string]any{"type": "price_details", "price_details": map[string]any{"price": price, "product": "prod_plan"}},
			"period":   map[string]any{"start": start.Unix(), "end": periodStart.AddDate(0, 1, 0).Unix()},
			"quantity": 1}
	}
	return map[string]any{"id": id, "object": "invoice", "customer": "cus_u1", "status": "paid", "amount_paid": 1500,
		"billing_reason": reason, "period_start": periodStart.AddDate(0, -1, 0).Unix(), "period_end": periodStart.Unix(),
		"parent": map[string]any{"type": "subscription_details", "subscription_details": map[string]any{"subscription": "sub_1"}},
		"lines": map[string]any{"object": "list", "data": []map[string]any{
			line("il_pro", true, periodStart.Add(-72*time.Hour)), line("il_1", false, periodStart)}}}
}

func TestWebhookMonthlyGrant(t *testing.T) {
	feb := jan31.AddDate(0, 0, 1)
	mar := feb.AddDate(0, 1, 0)
	for _, tc := range []struct {
		name     string
		invoices []map[string]any
		outcomes []string
		balance  int64
		period   string
	}{
		{name: "first invoice", invoices: []map[string]any{invoiceObj("in_1", "subscription_create", feb, "price_SAGE")},
			outcomes: []string{"applied"}, balance: 15, period: "2025-02-01T00:00:00Z"},
		{name: "redelivered", invoices: []map[string]any{invoiceObj("in_1", "subscription_create", feb, "price_SAGE"), invoiceObj("in_1", "subscription_create", feb, "price_SAGE")},
			outcomes: []string{"applied", "replay"}, balance: 15, period: "2025-02-01T00:00:00Z"},
		{name: "renewals out of order", invoices: []map[string]any{invoiceObj("in_2", "subscription_cycle", mar, "price_INITIATE"), invoiceObj("in_1", "subscription_create", feb, "price_INITIATE")},
			outcomes: []string{"applied", "applied"}, balance: 4, period: "2025-02-01T00:00:00Z"},
		{name: "proration invoice", invoices: []map[string]any{invoiceObj("in_3", "subscription_update", feb, "price_SAGE")},
			outcomes: []string{"ignored"}},
		{name: "one-off invoice", invoices: []map[string]any{func() map[string]any {
			o := invoiceObj("in_4", "manual", feb, "price_SAGE")
			delete(o, "parent")
			return o
		}()}, outcomes: []string{"ignored"}},
		{name: "price of no tier", invoices: []map[string]any{invoiceObj("in_5", "subscription_cycle", feb, "other")},
			outcomes: []string{"ignored"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc, h := newAccountsHandler(t)
			for i, inv := range tc.invoices {
				rec := deliver(h, eventJSON(t, fmt.Sprintf("evt_%s", inv["id"]), stripe.EventTypeInvoicePaid, jan31.Unix()+int64(i), inv))
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				assert.Equal(t, tc.outcomes[i]+"\n", rec.Body.String(), "delivery %d", i)
			}
			c, err := acc.Balance(context.Background(), "u1")
			require.NoError(t, err)
			assert.Equal(t, tc.balance, c.Balance)
			assert.Equal(t, tc.period, c.LastGrantPeriod)
		})
	}
}

func TestWebhookMonthlyGrantStoreFailure(t *testing.T) {
	acc, err := billingtest.NewAccounts(billingtest.AccountsOptions{})
	require.NoError(t, err)
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Accounts: failingAccounts{acc}, Users: users{}, Tiers: tiers{}})
	require.NoError(t, err)
	rec := deliver(h, eventJSON(t, "evt_1", stripe.EventTypeInvoicePaid, jan31.Unix(), invoiceObj("in_1", "subscription_cycle", jan31, "price_SAGE")))
	assert.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
	c, err := acc.Balance(context.Background(), "u1")
	require.NoError(t, err)
	assert.Zero(t, c.Balance)
}
