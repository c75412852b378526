package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/dynamostore"
)

// newStripeWebhook builds the stripe-webhook function: the Stripe webhook
// handler behind a Lambda function URL (or an API Gateway proxy
// integration). Settlements go to a collector over BILLING_LAYOUT's
// tables, charging (when it must resolve an attempt) and looking up
// through Stripe; with STRIPE_PRICE_TIERS, subscription events, founder
// passes and monthly grants go to the accounts on the single table.
func newStripeWebhook(ctx context.Context, awsCfg aws.Config, logger *slog.Logger) (any, error) {
	sm := func() secretGetter { return secretsmanager.NewFromConfig(awsCfg) }
	repo, err := newRepository(awsCfg, logger)
	if err != nil {
		return nil, err
	}
	cfg, err := collectorConfig(repo, logger)
	if err != nil {
		return nil, err
	}
	provider, client, err := paymentProvider(ctx, sm, nil, logger)
	if err != nil {
		return nil, err
	}
	if client == nil {
		// The collector resolves an attempt still in flight through the
		// processor, and refunds are tied to their intents through it.
		return nil, errors.New("the stripe-webhook function needs STRIPE_SECRET_KEY or STRIPE_SECRET_ARN")
	}
	cfg.Provider = provider
	ddb := dynamostore.ClientOf(repo)
	cfg.Locker, err = dynamostore.NewLocker(ddb, dynamostore.WithLockTable(os.Getenv("LOCK_TABLE")), dynamostore.WithLockLogger(logger))
	if err != nil {
		return nil, err
	}
	c, err := billing.NewCollector(cfg)
	if err != nil {
		return nil, err
	}
	wcfg, err := webhookConfig(ctx, sm, client, ddb, logger)
	if err != nil {
		return nil, err
	}
	wcfg.Collector = c
	h, err := billingstripe.NewWebhookHandler(wcfg)
	if err != nil {
		return nil, err
	}
	return httpHandler(h), nil
}

// httpHandler serves h to Lambda: a function URL event (the same shape as
// an API Gateway HTTP API payload 2.0) or an API Gateway REST proxy event
// (payload 1.0), told apart by the latter's httpMethod. The response has
// the shape of the request's integration.
func httpHandler(h http.Handler) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			HTTPMethod string `json:"httpMethod"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("http: unrecognised event: %w", err)
		}
		if probe.HTTPMethod != "" {
			var ev events.APIGatewayProxyRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("http: API Gateway event: %w", err)
			}
			status, header, body, err := serve(ctx, h, ev.HTTPMethod, ev.Path, ev.Headers, ev.Body, ev.IsBase64Encoded)
			if err != nil {
				return nil, err
			}
			return events.APIGatewayProxyResponse{StatusCode: status, Headers: header, Body: body}, nil
		}
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("http: function URL event: %w", err)
		}
		status, header, body, err := serve(ctx, h, ev.RequestContext.HTTP.Method, ev.RawPath, ev.Headers, ev.Body, ev.IsBase64Encoded)
		if err != nil {
			return nil, err
		}
		return events.LambdaFunctionURLResponse{StatusCode: status, Headers: header, Body: body}, nil
	}
}

// serve runs one request through h. The body is decoded from base64 when
// the integration says so: a signature covers the exact bytes Stripe sent.
func serve(ctx context.Context, h http.Handler, method, path string, headers map[string]string, body string, b64 bool) (int, map[string]string, string, error) {
	payload := []byte(body)
	if b64 {
		var err error
		if payload, err = base64.StdEncoding.DecodeString(body); err != nil {
			return 0, nil, "", fmt.Errorf("http: base64 body: %w", err)
		}
	}
	if path == "" {
		path = "/"
	}
	req, err := http.NewRequestWithContext(ctx, method, (&url.URL{Path: path}).String(), bytes.NewReader(payload))
	if err != nil {
		return 0, nil, "", fmt.Errorf("http: request: %w", err)
	}
	for k, v := range headers {
		req.Header.Set(k, v) // canonicalises the lower-case names of function URLs
	}
	w := &responseWriter{header: http.Header{}}
	h.ServeHTTP(w, req)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	out := make(map[string]string, len(w.header))
	for k := range w.header {
		out[k] = w.header.Get(k)
	}
	return w.status, out, w.body.String(), nil
}

// responseWriter collects a handler's response for Lambda.
type responseWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}
