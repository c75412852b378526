package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
)

// secretGetter is the Secrets Manager call this binary makes;
// *secretsmanager.Client implements it.
type secretGetter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// secretFromEnv reads a secret from the variable plain, or from the
// Secrets Manager secret whose ARN is in the variable arn (its
// SecretString, whole). Setting both is an error; setting neither returns
// "". The value is never logged.
func secretFromEnv(ctx context.Context, sm func() secretGetter, plain, arn string) (string, error) {
	v, ref := os.Getenv(plain), os.Getenv(arn)
	switch {
	case v != "" && ref != "":
		return "", fmt.Errorf("set %s or %s, not both", plain, arn)
	case v != "":
		return v, nil
	case ref == "":
		return "", nil
	}
	out, err := sm().GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(ref)})
	if err != nil {
		return "", fmt.Errorf("%s: read secret %s: %w", arn, ref, err)
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("%s: secret %s has no SecretString", arn, ref)
	}
	return strings.TrimSpace(*out.SecretString), nil
}

// stripeClient returns the Stripe client of STRIPE_SECRET_KEY or
// STRIPE_SECRET_ARN, or nil when neither is set.
func stripeClient(ctx context.Context, sm func() secretGetter) (*stripe.Client, error) {
	key, err := secretFromEnv(ctx, sm, "STRIPE_SECRET_KEY", "STRIPE_SECRET_ARN")
	if err != nil || key == "" {
		return nil, err
	}
	return stripe.NewClient(key), nil
}

// paymentProvider is the collector's processor: Stripe when a secret key
// is configured, otherwise fallback (the logging stub).
func paymentProvider(ctx context.Context, sm func() secretGetter, fallback billing.PaymentProvider, logger *slog.Logger) (billing.PaymentProvider, *stripe.Client, error) {
	client, err := stripeClient(ctx, sm)
	if err != nil || client == nil {
		return fallback, nil, err
	}
	p, err := billingstripe.New(billingstripe.Config{Client: client, Customers: stripeCustomers{client}, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	logger.InfoContext(ctx, "collector charges through Stripe")
	return p, client, nil
}

// webhookConfig is the Stripe webhook handler's configuration from the
// environment, all but its Collector.
func webhookConfig(ctx context.Context, sm func() secretGetter, client *stripe.Client, ddb dynamostore.API, logger *slog.Logger) (billingstripe.WebhookConfig, error) {
	secret, err := secretFromEnv(ctx, sm, "STRIPE_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET_ARN")
	if err != nil {
		return billingstripe.WebhookConfig{}, err
	}
	if secret == "" {
		return billingstripe.WebhookConfig{}, errors.New("STRIPE_WEBHOOK_SECRET or STRIPE_WEBHOOK_SECRET_ARN is required")
	}
	cfg := billingstripe.WebhookConfig{Secret: secret, Intents: billingstripe.NewIntentMetadata(client), Logger: logger}
	for _, gone := range []string{"ACCOUNTS_TABLE", "ACCOUNTS_PREFIX"} {
		if os.Getenv(gone) != "" {
			return billingstripe.WebhookConfig{}, fmt.Errorf("%s is no longer read: the accounts are on the single table that "+
				"SINGLE_TABLE, ACCOUNT_PREFIX and SINGLE_TABLE_TTL name; set those and STRIPE_PRICE_TIERS, and unset %s", gone, gone)
		}
	}
	priceTiersEnv := os.Getenv("STRIPE_PRICE_TIERS")
	if priceTiersEnv == "" {
		return cfg, nil
	}
	tiers, err := parsePriceTiers(priceTiersEnv)
	if err != nil {
		return billingstripe.WebhookConfig{}, err
	}
	// The accounts' markers expire by the table's TTL attribute, so the
	// table, its prefix and that attribute are read in one place.
	acc, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: ddb, Table: singleTableFromEnv()})
	if err != nil {
		return billingstripe.WebhookConfig{}, err
	}
	users := customerUsers{client}
	cfg.Accounts, cfg.Users, cfg.Tiers, cfg.Passes = acc, users, tiers, founderPasses{users}
	return cfg, nil
}

// The host ports below are examples, each the host's to replace with its
// own user directory and catalogue. They keep the user's ID on the Stripe
// customer (metadata "user_id", set when the host creates the customer),
// the tier of each price in STRIPE_PRICE_TIERS, and the pass a one-off
// payment buys in the intent's metadata "founder_pass" (with Checkout:
// payment_intent_data.metadata).

// stripeCustomers finds a user's customer by its metadata and charges
// the customer's default payment method. Customer search is eventually
// consistent (up to a minute behind), which suits customers created well
// before their first billing date; a host usually keeps the customer ID in
// its own user record instead.
type stripeCustomers struct{ client *stripe.Client }

func (s stripeCustomers) StripeCustomer(ctx context.Context, userID string) (billingstripe.Customer, error) {
	params := &stripe.CustomerSearchParams{SearchParams: stripe.SearchParams{Query: fmt.Sprintf("metadata['user_id']:'%s'", strings.ReplaceAll(userID, "'", `\'`))}}
	var found []*stripe.Customer
	for c, err := range s.client.V1Customers.Search(ctx, params).All(ctx) {
		if err != nil {
			return billingstripe.Customer{}, fmt.Errorf("stripe customer of user %s: %w", userID, err)
		}
		found = append(found, c)
	}
	if len(found) != 1 {
		return billingstripe.Customer{}, fmt.Errorf("stripe customer of user %s: %d customers carry metadata user_id", userID, len(found))
	}
	c := found[0]
	if c.InvoiceSettings == nil || c.InvoiceSettings.DefaultPaymentMethod == nil || c.InvoiceSettings.DefaultPaymentMethod.ID == "" {
		return billingstripe.Customer{}, fmt.Errorf("stripe customer %s of user %s has no default payment method", c.ID, userID)
	}
	return billingstripe.Customer{ID: c.ID, PaymentMethod: c.InvoiceSettings.DefaultPaymentMethod.ID}, nil
}

// customerUsers reads the user of a customer from its metadata "user_id".
type customerUsers struct{ client *stripe.Client }

func (s customerUsers) UserOfCustomer(ctx context.Context, customerID string) (string, error) {
	c, err := s.client.V1Customers.Retrieve(ctx, customerID, nil)
	if err != nil {
		return "", fmt.Errorf("retrieve customer %s: %w", customerID, err)
	}
	if c.Deleted || c.Metadata["user_id"] == "" {
		return "", fmt.Errorf("customer %s has no metadata user_id: %w", customerID, billingstripe.ErrUnmapped)
	}
	return c.Metadata["user_id"], nil
}

// priceTiers is STRIPE_PRICE_TIERS: "price_A=SAGE,price_B=GUILDMASTER".
type priceTiers map[string]entitlement.Tier

func parsePriceTiers(s string) (priceTiers, error) {
	out := priceTiers{}
	for pair := range strings.SplitSeq(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		price, tier, ok := strings.Cut(pair, "=")
		t, err := entitlement.ParseTier(tier)
		if !ok || strings.TrimSpace(price) == "" || err != nil {
			return nil, fmt.Errorf("STRIPE_PRICE_TIERS: want price=TIER pairs separated by commas, got %q", pair)
		}
		out[strings.TrimSpace(price)] = t
	}
	if len(out) == 0 {
		return nil, errors.New("STRIPE_PRICE_TIERS has no price=TIER pair (e.g. price_123=SAGE,price_456=GUILDMASTER)")
	}
	return out, nil
}

func (p priceTiers) TierOfPrice(_ context.Context, priceID, _ string) (entitlement.Tier, error) {
	if t, ok := p[priceID]; ok {
		return t, nil
	}
	return "", fmt.Errorf("price %s is not in STRIPE_PRICE_TIERS: %w", priceID, billingstripe.ErrUnmapped)
}

// founderPasses reads the pass a payment bought from its metadata
// "founder_pass" and the user from the customer's.
type founderPasses struct{ users billingstripe.CustomerUsers }

func (f founderPasses) FounderPassOf(ctx context.Context, pi *stripe.PaymentIntent) (string, entitlement.PassType, bool, error) {
	pass := pi.Metadata["founder_pass"]
	if pass == "" {
		return "", "", false, nil
	}
	if pi.Customer == nil || pi.Customer.ID == "" {
		return "", "", false, fmt.Errorf("founder pass payment %s has no customer", pi.ID)
	}
	user, err := f.users.UserOfCustomer(ctx, pi.Customer.ID)
	if err != nil {
		return "", "", false, err
	}
	return user, entitlement.PassType(pass), true, nil
}
