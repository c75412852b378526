package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

func TestRunCursorKeysFromEnv(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:run-cursor-AbCdEf"
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 48)
	b64 := base64.StdEncoding.EncodeToString
	for _, tc := range []struct {
		name, plain, ref, secret string
		want                     [][]byte
		wantErr                  string
	}{
		{name: "neither"},
		{name: "one", plain: b64(k1), want: [][]byte{k1}},
		{name: "new and old", plain: b64(k2) + ", " + b64(k1), want: [][]byte{k2, k1}},
		{name: "from Secrets Manager", ref: arn, secret: b64(k1) + "," + b64(k2) + "\n", want: [][]byte{k1, k2}},
		{name: "short", plain: b64(k1) + "," + b64(k1[:31]), wantErr: "key 2 is 31 bytes, want at least 32"},
		{name: "not base64", plain: "not base64!", wantErr: "key 1 is not standard base64"},
		{name: "empty entry", plain: b64(k1) + ",", wantErr: "key 2 is 0 bytes"},
		{name: "both", plain: b64(k1), ref: arn, wantErr: "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("RUN_CURSOR_KEYS", tc.plain)
			t.Setenv("RUN_CURSOR_KEYS_ARN", tc.ref)
			sm := &secrets{arn: arn, value: tc.secret}
			got, err := runCursorKeys(context.Background(), func() secretGetter { return sm })
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.NotContains(t, err.Error(), b64(k1), "the key is never in an error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// Two collector functions' containers, each with its own Collector made
// from the same RUN_CURSOR_KEYS, continue one run through the queue in
// turn: every due record is charged once. A container with another key
// refuses the continuation and enqueues nothing.
func TestCollectorHandlerSignedContinuationAcrossContainers(t *testing.T) {
	ctx := t.Context()
	clock := billingtest.NewClock(time.Date(2024, 2, 1, 12, 0, 0, 0, time.UTC))
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 1})
	for i := range 5 {
		d := time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC)
		s := billing.Period{UserID: fmt.Sprintf("u%d", i), SubscriptionID: fmt.Sprintf("s%d", i), BillingDate: d,
			Amount: billing.MustParseAmount("4.99"), Status: billing.StatusScheduled, Term: billing.TermMonthly, LastRunDate: d.AddDate(0, -1, 0)}
		require.NoError(t, store.Repository().Add(ctx, &s))
	}
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	sent := &sentBodies{}
	container := func(env string) *collectorHandler {
		t.Setenv("RUN_CURSOR_KEYS", env)
		t.Setenv("RUN_CURSOR_KEYS_ARN", "")
		keys, err := runCursorKeys(ctx, nil)
		require.NoError(t, err)
		c, err := billing.NewCollector(billing.Config{Repository: store.Repository(), Locker: billingtest.NewLocker(clock, time.Minute),
			Provider: pay, Clock: clock, PagesPerInvocation: 2, RunCursorKeys: keys})
		require.NoError(t, err)
		return &collectorHandler{collector: c, continuations: sent, logger: slog.New(slog.DiscardHandler)}
	}
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("k"), 32))
	containers := []*collectorHandler{container(key), container(key)}
	stranger := container(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 32)))

	cw, err := json.Marshal(events.CloudWatchEvent{Detail: json.RawMessage(`{"kind":"scheduled"}`)})
	require.NoError(t, err)
	_, err = containers[0].Handle(ctx, cw)
	require.NoError(t, err)
	invocations := 1
	for len(sent.bodies) > 0 {
		body := sent.bodies[0]
		sent.bodies = sent.bodies[1:]
		ev, err := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{Body: body}}})
		require.NoError(t, err)
		if invocations == 1 {
			_, err := stranger.Handle(ctx, ev)
			require.ErrorIs(t, err, billing.ErrInvalidCursor, "a container with another key")
			require.Empty(t, sent.bodies, "a refused continuation enqueues nothing")
		}
		_, err = containers[invocations%2].Handle(ctx, ev)
		require.NoError(t, err, "continuation %d", invocations)
		invocations++
		require.Less(t, invocations, 20)
	}
	assert.Greater(t, invocations, 2, "the run went on in both containers")
	assert.Equal(t, 5, pay.CallCount(), "every due record once, across containers")
	billingtest.RequireNoDoubleCharge(t, pay)
}
