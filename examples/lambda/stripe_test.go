package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"
	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/memory"
)

const testWebhookSecret = "whsec_lambda_test"

// achSent is a collector over the memory store with one record whose ACH
// debit was submitted, and the transaction (PaymentIntent) ID of that
// debit.
func achSent(t *testing.T) (*billing.Collector, billing.Repository, string) {
	t.Helper()
	date := time.Date(2025, 1, 31, 0, 0, 0, 0, time.UTC)
	clock := billingtest.NewClock(date.Add(time.Hour))
	store := billingtest.NewMemoryStore(t, memory.Options{})
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	pay.SetDefault(billingtest.Always(billingtest.Pending()))
	c, err := billing.NewCollector(billing.Config{Repository: store.Repository(), History: store.History(),
		Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay, Clock: clock})
	require.NoError(t, err)
	sub := billing.Period{UserID: "u1", SubscriptionID: "sub-u1", BillingDate: date, Amount: billing.MustParseAmount("4.99"),
		Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(date), Term: billing.TermMonthly, AnchorDay: 31,
		ReceiptTierName: "Plus:v2", CreatedDate: date.AddDate(0, -1, 0), LastRunDate: date.AddDate(0, -1, 0)}
	require.NoError(t, store.Repository().Add(context.Background(), &sub))
	_, err = c.Run(context.Background(), billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	cur, err := store.Repository().GetByID(context.Background(), "sub-u1")
	require.NoError(t, err)
	require.Equal(t, billing.StatusACHSent, cur.Status)
	return c, store.Repository(), cur.TransactionID
}

func settledEvent(t *testing.T, pi string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": "evt_1", "object": "event", "api_version": stripe.APIVersion, "created": 1738288800,
		"type": "payment_intent.succeeded", "data": map[string]any{"object": map[string]any{
			"id": pi, "object": "payment_intent", "status": "succeeded", "amount": 499, "currency": "usd",
			"metadata": map[string]string{billingstripe.MetadataSubscriptionID: "sub-u1"}}}})
	require.NoError(t, err)
	return b
}

func TestStripeWebhookBehindLambda(t *testing.T) {
	c, repo, pi := achSent(t)
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testWebhookSecret, Collector: c})
	require.NoError(t, err)
	handle := httpHandler(h)
	body := settledEvent(t, pi)
	sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: testWebhookSecret}).Header
	urlEvent := func(body []byte, b64 bool, sig string) json.RawMessage {
		ev := events.LambdaFunctionURLRequest{RawPath: "/", Headers: map[string]string{"stripe-signature": sig, "content-type": "application/json"},
			Body: string(body), IsBase64Encoded: b64}
		if b64 {
			ev.Body = base64.StdEncoding.EncodeToString(body)
		}
		ev.RequestContext.HTTP.Method = http.MethodPost
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		return raw
	}
	restEvent := func(body []byte, sig string) json.RawMessage {
		raw, err := json.Marshal(events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Path: "/stripe",
			Headers: map[string]string{"Stripe-Signature": sig}, Body: string(body)})
		require.NoError(t, err)
		return raw
	}
	for _, tc := range []struct {
		name   string
		event  json.RawMessage
		status int
		body   string
		rest   bool
		want   billing.Status
	}{
		{name: "function URL, bad signature", event: urlEvent(body, false, "t=1,v1=00"), status: 400, body: "invalid event or signature\n", want: billing.StatusACHSent},
		{name: "function URL, base64 body", event: urlEvent(body, true, sig), status: 200, body: "applied\n", want: billing.StatusCompleted},
		{name: "function URL, redelivered", event: urlEvent(body, false, sig), status: 200, body: "replay\n", want: billing.StatusCompleted},
		{name: "API Gateway proxy, redelivered", event: restEvent(body, sig), status: 200, body: "replay\n", rest: true, want: billing.StatusCompleted},
		{name: "API Gateway proxy, no signature", event: restEvent(body, ""), status: 400, body: "invalid event or signature\n", rest: true, want: billing.StatusCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := handle(context.Background(), tc.event)
			require.NoError(t, err)
			if tc.rest {
				resp, ok := out.(events.APIGatewayProxyResponse)
				require.True(t, ok, "response %T", out)
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.Equal(t, tc.body, resp.Body)
			} else {
				resp, ok := out.(events.LambdaFunctionURLResponse)
				require.True(t, ok, "response %T", out)
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.Equal(t, tc.body, resp.Body)
				assert.Equal(t, "text/plain; charset=utf-8", resp.Headers["Content-Type"])
			}
			cur, err := repo.GetByID(context.Background(), "sub-u1")
			require.NoError(t, err)
			assert.Equal(t, tc.want, cur.Status)
		})
	}
	_, err = handle(context.Background(), json.RawMessage(`{"body": "x", "isBase64Encoded": true, "requestContext": {"http": {"method": "POST"}}}`))
	assert.ErrorContains(t, err, "base64")
}

// secrets is a Secrets Manager with one secret.
type secrets struct {
	arn, value string
	calls      int
}

func (s *secrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	s.calls++
	if aws.ToString(in.SecretId) != s.arn {
		return nil, errors.New("ResourceNotFoundException")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(s.value)}, nil
}

func TestSecretFromEnv(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:stripe-AbCdEf"
	for _, tc := range []struct {
		name, plain, ref string
		want, wantErr    string
		calls            int
	}{
		{name: "neither"},
		{name: "plain", plain: "sk_test_1", want: "sk_test_1"},
		{name: "from Secrets Manager", ref: arn, want: "sk_test_2", calls: 1},
		{name: "unknown secret", ref: arn + "x", wantErr: "ResourceNotFoundException", calls: 1},
		{name: "both", plain: "sk_test_1", ref: arn, wantErr: "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("STRIPE_SECRET_KEY", tc.plain)
			t.Setenv("STRIPE_SECRET_ARN", tc.ref)
			sm := &secrets{arn: arn, value: "sk_test_2\n"}
			got, err := secretFromEnv(context.Background(), func() secretGetter { return sm }, "STRIPE_SECRET_KEY", "STRIPE_SECRET_ARN")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.calls, sm.calls)
		})
	}
}

func TestPaymentProviderStaysTheStubWithoutAKey(t *testing.T) {
	t.Setenv("STRIPE_SECRET_KEY", "")
	t.Setenv("STRIPE_SECRET_ARN", "")
	stub := stubProvider{}
	p, client, err := paymentProvider(context.Background(), nil, stub, nil)
	require.NoError(t, err)
	assert.Equal(t, stub, p)
	assert.Nil(t, client)
}

func TestParsePriceTiers(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    priceTiers
		wantErr string
	}{
		{in: "price_A=SAGE, price_B=guildmaster", want: priceTiers{"price_A": entitlement.TierSage, "price_B": entitlement.TierGuildmaster}},
		{in: " , ", wantErr: "no price=TIER pair"},
		{in: "price_A", wantErr: "price=TIER"},
		{in: "price_A=PLATINUM", wantErr: "price=TIER"},
		{in: "=SAGE", wantErr: "price=TIER"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parsePriceTiers(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			tier, err := got.TierOfPrice(context.Background(), "price_A", "prod_1")
			require.NoError(t, err)
			assert.Equal(t, entitlement.TierSage, tier)
			_, err = got.TierOfPrice(context.Background(), "price_other", "prod_1")
			assert.ErrorIs(t, err, billingstripe.ErrUnmapped)
		})
	}
}

// recordingDynamo is a DynamoDB client that records the transactions it
// is given and fails them, so a test sees what a store would write.
type recordingDynamo struct {
	dynamostore.API
	tx []*dynamodb.TransactWriteItemsInput
}

func (r *recordingDynamo) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	r.tx = append(r.tx, in)
	return nil, errors.New("recorded, not written")
}

// TestWebhookAccountsAreOnTheSingleTable checks that the webhook's
// accounts store is the single table the environment names once
// (SINGLE_TABLE, ACCOUNT_PREFIX, SINGLE_TABLE_TTL): its grant markers
// carry the table's TTL attribute, so they expire, and the variables it
// used to read instead stop the function rather than pick another table.
func TestWebhookAccountsAreOnTheSingleTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		// wantAccounts is whether the webhook applies account events.
		wantAccounts bool
		wantErr      string
	}{
		{name: "single table variables", wantAccounts: true,
			env: map[string]string{"SINGLE_TABLE": "recurring", "ACCOUNT_PREFIX": "ACC#", "SINGLE_TABLE_TTL": "ttl", "STRIPE_PRICE_TIERS": "price_1=SAGE"}},
		{name: "no price tiers: settlements only",
			env: map[string]string{"SINGLE_TABLE": "recurring", "ACCOUNT_PREFIX": "ACC#", "SINGLE_TABLE_TTL": "ttl"}},
		{name: "the old table variable", wantErr: "ACCOUNTS_TABLE is no longer read",
			env: map[string]string{"ACCOUNTS_TABLE": "accounts", "STRIPE_PRICE_TIERS": "price_1=SAGE"}},
		{name: "the old prefix variable", wantErr: "ACCOUNTS_PREFIX is no longer read",
			env: map[string]string{"SINGLE_TABLE": "recurring", "ACCOUNTS_PREFIX": "ACC#", "STRIPE_PRICE_TIERS": "price_1=SAGE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"SINGLE_TABLE", "ACCOUNT_PREFIX", "SINGLE_TABLE_TTL", "STRIPE_PRICE_TIERS", "ACCOUNTS_TABLE", "ACCOUNTS_PREFIX", "STRIPE_WEBHOOK_SECRET_ARN"} {
				t.Setenv(k, tc.env[k])
			}
			t.Setenv("STRIPE_WEBHOOK_SECRET", testWebhookSecret)
			ddb := &recordingDynamo{}
			cfg, err := webhookConfig(t.Context(), nil, stripe.NewClient("sk_test_x"), ddb, slog.New(slog.DiscardHandler))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.ErrorContains(t, err, "SINGLE_TABLE, ACCOUNT_PREFIX and SINGLE_TABLE_TTL")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, testWebhookSecret, cfg.Secret)
			if !tc.wantAccounts {
				assert.Nil(t, cfg.Accounts)
				return
			}
			require.NotNil(t, cfg.Accounts)
			require.NotNil(t, cfg.Users)
			tier, err := cfg.Tiers.TierOfPrice(t.Context(), "price_1", "")
			require.NoError(t, err)
			assert.Equal(t, entitlement.Tier("SAGE"), tier)

			_, err = cfg.Accounts.MonthlyGrant(t.Context(), "u1", entitlement.Tier("SAGE"), "2026-03-01T00:00:00Z", "evt_1")
			require.ErrorContains(t, err, "recorded, not written")
			require.NotEmpty(t, ddb.tx)
			put := ddb.tx[0].TransactItems[0].Put
			require.NotNil(t, put, "the grant's marker")
			assert.Equal(t, "recurring", aws.ToString(put.TableName))
			pk, ok := put.Item["PK"].(*types.AttributeValueMemberS)
			require.True(t, ok, "marker PK %#v", put.Item["PK"])
			assert.Equal(t, "ACC#u1", pk.Value)
			ttl, ok := put.Item["ttl"].(*types.AttributeValueMemberN)
			require.True(t, ok, "the marker's expiry is in the table's TTL attribute: %v", put.Item)
			assert.NotEmpty(t, ttl.Value)
			assert.NotContains(t, put.Item, "expiresAt")
		})
	}
}
