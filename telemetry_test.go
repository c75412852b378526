package billing_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	itel "github.com/dynabill/billing/internal/telemetry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// otelEnv is an OpenTelemetry SDK recording in memory: metrics through a
// manual reader, ended spans through a span recorder.
type otelEnv struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newOtelEnv(t *testing.T) *otelEnv {
	t.Helper()
	o := &otelEnv{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	o.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	t.Cleanup(func() {
		_ = o.mp.Shutdown(context.Background())
		_ = o.tp.Shutdown(context.Background())
	})
	return o
}

// metric returns the named metric of the library's scope, failing t when
// it was not recorded.
func (o *otelEnv) metric(t *testing.T, name string) metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, o.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, itel.InstrumentationName, sm.Scope.Name, "scope %q, want %q", sm.Scope.Name, itel.InstrumentationName)
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("metric %s not recorded", name)
	return metricdata.Metrics{}
}

// attrKey renders an attribute set as "k=v,k=v" (sorted by key).
func attrKey(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	return strings.Join(parts, ",")
}

// counts returns a counter's values by attribute set.
func (o *otelEnv) counts(t *testing.T, name string) map[string]int64 {
	t.Helper()
	m := o.metric(t, name)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is %T, want an int64 sum", name, m.Data)
	assert.True(t, sum.IsMonotonic, "%s is not monotonic", name)
	out := map[string]int64{}
	for _, dp := range sum.DataPoints {
		out[attrKey(dp.Attributes)] = dp.Value
	}
	return out
}

// histCounts returns a histogram's sample counts by attribute set.
func (o *otelEnv) histCounts(t *testing.T, name string) map[string]uint64 {
	t.Helper()
	m := o.metric(t, name)
	assert.Equal(t, "s", m.Unit, "%s unit %q, want s", name, m.Unit)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is %T, want a float64 histogram", name, m.Data)
	out := map[string]uint64{}
	for _, dp := range h.DataPoints {
		out[attrKey(dp.Attributes)] = dp.Count
		assert.GreaterOrEqual(t, dp.Sum, 0.0, "%s %s: negative sum", name, attrKey(dp.Attributes))
	}
	return out
}

// ended returns the ended spans with the name.
func (o *otelEnv) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range o.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// spanAttrs returns a span's attributes as strings.
func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// The acceptance test: one scheduled run over records whose users are
// scripted to succeed, decline, pend, time out, be locked and be stale.
func TestTelemetryScheduledRun(t *testing.T) {
	o := newOtelEnv(t)
	e := newCollectorEnv(t, func(c *billing.Config) { c.MeterProvider, c.TracerProvider = o.mp, o.tp })
	ctx := context.Background()
	want := map[string]string{ // user → outcome
		"u-ok":    "collected",
		"u-decl":  "declined",
		"u-pend":  "pending",
		"u-unk":   "unknown",
		"u-lock":  "skipped_locked",
		"u-stale": "stale",
	}
	for user := range want {
		date := jan31
		if user == "u-stale" {
			date = jan31.AddDate(0, 0, -40)
		}
		e.add(user, date, billing.StatusScheduled)
	}
	e.add("u-later", jan31.AddDate(0, 0, 5), billing.StatusScheduled) // not due: not read
	e.pay.SetUser("u-decl", billingtest.Declined("R01: insufficient funds", true))
	e.pay.SetUser("u-pend", billingtest.Pending())
	e.pay.SetUser("u-unk", billingtest.UnknownBeforeCharge(nil))
	lease, err := e.locker.Lock(ctx, "u-lock")
	require.NoError(t, err)
	defer lease.Release(ctx)

	rep, err := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	require.Empty(t, rep.Next, "report = %+v", rep)
	require.Equal(t, 4, rep.Attempted, "report = %+v", rep)
	require.Equal(t, 1, rep.Collected, "report = %+v", rep)
	require.Equal(t, 1, rep.Declined, "report = %+v", rep)
	require.Equal(t, 1, rep.Pending, "report = %+v", rep)
	require.Equal(t, 1, rep.Unknown, "report = %+v", rep)
	require.Equal(t, 1, rep.SkippedLocked, "report = %+v", rep)
	require.Equal(t, 1, rep.Stale, "report = %+v", rep)
	require.Len(t, rep.Failed, 1, "report = %+v", rep)
	require.Equal(t, "u-unk", rep.Failed[0].UserID, "report = %+v", rep)

	// Counters: one per record, by outcome; no user IDs in metric attributes.
	wantCounts := map[string]int64{}
	for _, out := range want {
		wantCounts["outcome="+out+",process=INITIAL,run=scheduled"] = 1
	}
	assert.Equal(t, wantCounts, o.counts(t, itel.MetricCollectionAttempts), itel.MetricCollectionAttempts)
	assert.Equal(t, map[string]uint64{
		"error=false,outcome=succeeded": 1,
		"error=false,outcome=declined":  1,
		"error=false,outcome=pending":   1,
		"error=true,outcome=unknown":    1,
	}, o.histCounts(t, itel.MetricProviderDuration), itel.MetricProviderDuration)

	// Spans: the run, and one attempt per record read, its children.
	runs := o.ended(itel.SpanCollectionRun)
	require.Len(t, runs, 1, "%d run spans, want 1", len(runs))
	run := runs[0]
	assert.Equal(t, map[string]string{
		"dynabill.run.kind": "scheduled", "dynabill.run.pages": fmt.Sprint(rep.Pages), "dynabill.run.scanned": fmt.Sprint(rep.Scanned),
		"dynabill.run.invalid": "0", "dynabill.run.attempted": "4", "dynabill.run.collected": "1", "dynabill.run.pending": "1",
		"dynabill.run.declined": "1", "dynabill.run.unknown": "1", "dynabill.run.rate_limited": "0", "dynabill.run.advanced": "0", "dynabill.run.free": "0", "dynabill.run.stale": "1",
		"dynabill.run.skipped_locked": "1", "dynabill.run.not_eligible": "0", "dynabill.run.conflicts": "0",
		"dynabill.run.failed": "1", "dynabill.run.continues": "false",
	}, spanAttrs(run), "run span attributes")
	assert.Equal(t, codes.Unset, run.Status().Code, "run span status %v, parent %v", run.Status(), run.Parent())
	assert.False(t, run.Parent().IsValid(), "run span status %v, parent %v", run.Status(), run.Parent())
	attempts := o.ended(itel.SpanCollectionAttempt)
	require.Len(t, attempts, len(want), "%d attempt spans, want %d", len(attempts), len(want))
	seen := map[string]bool{}
	for _, s := range attempts {
		a := spanAttrs(s)
		user := a["dynabill.user_id"]
		assert.False(t, seen[user], "two attempt spans for %s", user)
		seen[user] = true
		assert.Equal(t, run.SpanContext().SpanID(), s.Parent().SpanID(), "%s: attempt span is not a child of the run span", user)
		assert.Equal(t, run.SpanContext().TraceID(), s.SpanContext().TraceID(), "%s: attempt span is not a child of the run span", user)
		sub := user + "-" + jan31.Format("20060102")
		if user == "u-stale" {
			sub = user + "-" + jan31.AddDate(0, 0, -40).Format("20060102")
		}
		wantAttrs := map[string]string{
			"dynabill.user_id": user, "dynabill.subscription_id": sub, "dynabill.process": "INITIAL",
			"dynabill.run.kind": "scheduled", "dynabill.outcome": want[user],
		}
		if user != "u-lock" && user != "u-stale" { // the provider was called
			wantAttrs["dynabill.attempt"] = "1"
		}
		assert.Equal(t, wantAttrs, a, user+" attempt span attributes")
		wantCode := codes.Unset
		if user == "u-unk" {
			wantCode = codes.Error
			if evs := s.Events(); assert.Len(t, evs, 1, "u-unk span events = %v, want the error", evs) {
				assert.Equal(t, "exception", evs[0].Name, "u-unk span events = %v, want the error", evs)
			}
		}
		assert.Equal(t, wantCode, s.Status().Code, "%s: span status %v, want %v", user, s.Status(), wantCode)
	}
}

func TestTelemetrySingleCollection(t *testing.T) {
	o := newOtelEnv(t)
	e := newCollectorEnv(t, func(c *billing.Config) { c.MeterProvider, c.TracerProvider = o.mp, o.tp })
	s := e.add("u1", jan31, billing.StatusScheduled)
	_, err := e.c.Periods().Collect(context.Background(), s.SubscriptionID)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"outcome=collected,process=BATCH,run=batch": 1}, o.counts(t, itel.MetricCollectionAttempts), itel.MetricCollectionAttempts)
	spans := o.ended(itel.SpanCollectionAttempt)
	require.Len(t, spans, 1, "%d attempt spans, want 1", len(spans))
	assert.Equal(t, map[string]string{
		"dynabill.user_id": "u1", "dynabill.subscription_id": s.SubscriptionID, "dynabill.process": "BATCH",
		"dynabill.run.kind": "batch", "dynabill.outcome": "collected", "dynabill.attempt": "1",
	}, spanAttrs(spans[0]), "attempt span attributes")

	// Refusals before an attempt are counted too: a collected record is
	// not collectible any more, and a held lock skips.
	_, err = e.c.Periods().Collect(context.Background(), s.SubscriptionID)
	require.ErrorIs(t, err, billing.ErrNotCollectible, "second collection")
	lease, err := e.locker.Lock(context.Background(), "u1")
	require.NoError(t, err)
	defer lease.Release(context.Background())
	_, err = e.c.Periods().Repay(context.Background(), s.SubscriptionID)
	require.ErrorIs(t, err, billing.ErrAlreadyLocked, "locked repayment")
	assert.Equal(t, map[string]int64{
		"outcome=collected,process=BATCH,run=batch":                  1,
		"outcome=not_eligible,process=BATCH,run=batch":               1,
		"outcome=skipped_locked,process=MANUAL_REPAYMENT,run=manual": 1,
	}, o.counts(t, itel.MetricCollectionAttempts), itel.MetricCollectionAttempts)
	require.Len(t, o.ended(itel.SpanCollectionAttempt), 3, "attempt spans")
}

func TestTelemetryNotifier(t *testing.T) {
	o := newOtelEnv(t)
	ctx := context.Background()
	store := billingtest.NewMemoryStore(t, memory.Options{})
	day := time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		bd := day.Add(time.Duration(10+i) * time.Hour)
		sub := billing.Period{UserID: fmt.Sprintf("u%d", i), SubscriptionID: fmt.Sprintf("s%d", i), BillingDate: bd,
			Status: billing.StatusScheduled, Amount: billing.Cents(499), Term: billing.TermMonthly,
			BillingPeriod: billing.BillingPeriod(bd), CreatedDate: bd.AddDate(0, -1, 0), LastRunDate: bd.AddDate(0, -1, 0)}
		require.NoError(t, store.Repository().Add(ctx, &sub))
	}
	q := &billingtest.RecordingEnqueuer{}
	s, err := notice.NewScheduler(notice.SchedulerConfig{Repository: store.Repository(), Enqueuer: q,
		Clock: billingtest.NewClock(day.AddDate(0, 0, -4)), MeterProvider: o.mp, TracerProvider: o.tp})
	require.NoError(t, err)
	res, err := s.Run(ctx, notice.Event{})
	require.NoError(t, err, "scheduler run = %+v", res)
	require.Equal(t, 3, res.Enqueued, "scheduler run = %+v", res)
	assert.Equal(t, map[string]int64{"": 3}, o.counts(t, itel.MetricNotifierEnqueued), itel.MetricNotifierEnqueued)
	if spans := o.ended(itel.SpanNotifierSchedule); assert.Len(t, spans, 1, "scheduler spans = %v", spans) {
		assert.Equal(t, "3", spanAttrs(spans[0])["dynabill.notifier.enqueued"], "scheduler spans = %v", spans)
	}

	bodies := q.Bodies()
	w, err := notice.NewWorker(notice.WorkerConfig{
		Users: billingtest.NewUserDirectory(
			billing.User{ID: "u0", Email: "a@example.com", Status: billing.UserStatusActive},
			billing.User{ID: "u1", Email: "b@example.com", Status: "SUSPENDED"},
		),
		Notifier:      &billingtest.RecordingNotifier{},
		MeterProvider: o.mp, TracerProvider: o.tp,
	})
	require.NoError(t, err)
	failed := w.HandleBatch(ctx, []notice.QueueMessage{
		{ID: "m0", Body: bodies[0]}, // u0: sent
		{ID: "m1", Body: bodies[1]}, // u1: inactive
		{ID: "m2", Body: bodies[2]}, // u2: unknown user, fails
		{ID: "m3", Body: "{"},       // unparseable: dropped, not redelivered
	})
	require.Equal(t, []string{"m2"}, failed, "failed")
	assert.Equal(t, map[string]int64{
		"outcome=sent": 1, "outcome=skipped_inactive_user": 1, "outcome=failed": 1, "outcome=dropped_invalid": 1,
	}, o.counts(t, itel.MetricNotifierMessages), itel.MetricNotifierMessages)
	outcomes := map[string]string{}
	for _, sp := range o.ended(itel.SpanNotifierMessage) {
		a := spanAttrs(sp)
		outcomes[a["dynabill.user_id"]] = a["dynabill.outcome"]
		assert.Equal(t, a["dynabill.outcome"] == "failed", sp.Status().Code == codes.Error, "%s: status %v", a["dynabill.user_id"], sp.Status())
	}
	assert.Equal(t, map[string]string{"u0": "sent", "u1": "skipped_inactive_user", "u2": "failed"}, outcomes, "message span outcomes")
}

// fakeDynamo answers GetItem and Query with nothing and fails
// TransactWriteItems; other methods panic (the embedded interface is nil).
type fakeDynamo struct {
	dynamostore.API
	calls []string
}

func (f *fakeDynamo) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.calls = append(f.calls, "GetItem")
	return &dynamodb.GetItemOutput{}, nil
}

func (f *fakeDynamo) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.calls = append(f.calls, "Query")
	return &dynamodb.QueryOutput{}, nil
}

var errFakeDynamo = errors.New("fake: service unavailable")

func (f *fakeDynamo) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.calls = append(f.calls, "TransactWriteItems")
	return nil, errFakeDynamo
}

func TestTelemetryDynamoDB(t *testing.T) {
	o := newOtelEnv(t)
	ctx := context.Background()
	fake := &fakeDynamo{}
	repo, hist := storetest.NewDynamoStores(t, dynamostore.Config{Client: fake, MeterProvider: o.mp, TracerProvider: o.tp})
	require.Same(t, fake, dynamostore.ClientOf(repo), "DynamoClientOf does not return the configured client")
	require.Same(t, fake, dynamostore.ClientOf(hist), "DynamoClientOf does not return the configured client")
	_, err := repo.Get(ctx, "u1", jan31)
	require.ErrorIs(t, err, billing.ErrNotFound, "Get")
	_, err = repo.ListByUser(ctx, "u1")
	require.NoError(t, err)
	_, err = hist.ListByUser(ctx, "u1")
	require.NoError(t, err)
	sub := billing.Period{UserID: "u1", SubscriptionID: "s1", BillingDate: jan31, Status: billing.StatusScheduled,
		Amount: billing.Cents(499), Term: billing.TermMonthly, BillingPeriod: billing.BillingPeriod(jan31),
		CreatedDate: jan31, LastRunDate: jan31}
	// Add of a SCHEDULED record reads the user's records (one open
	// subscription a user), then writes.
	require.ErrorIs(t, repo.Add(ctx, &sub), errFakeDynamo, "Add")
	require.Equal(t, []string{"GetItem", "Query", "Query", "Query", "TransactWriteItems"}, fake.calls, "client calls")
	assert.Equal(t, map[string]uint64{
		"error=false,operation=GetItem":           1,
		"error=false,operation=Query":             3,
		"error=true,operation=TransactWriteItems": 1,
	}, o.histCounts(t, itel.MetricDynamoDBDuration), itel.MetricDynamoDBDuration)
	var names []string
	for _, s := range o.spans.Ended() {
		names = append(names, s.Name())
		wantCode := codes.Unset
		if s.Name() == itel.SpanDynamoDBPrefix+"TransactWriteItems" {
			wantCode = codes.Error
		}
		assert.Equal(t, wantCode, s.Status().Code, "span %s: status %v, kind %v, attributes %v", s.Name(), s.Status(), s.SpanKind(), spanAttrs(s))
		assert.Equal(t, "client", s.SpanKind().String(), "span %s: status %v, kind %v, attributes %v", s.Name(), s.Status(), s.SpanKind(), spanAttrs(s))
		assert.Equal(t, strings.TrimPrefix(s.Name(), itel.SpanDynamoDBPrefix), spanAttrs(s)["rpc.method"], "span %s: status %v, kind %v, attributes %v", s.Name(), s.Status(), s.SpanKind(), spanAttrs(s))
	}
	assert.Equal(t, []string{"dynabill.dynamodb.GetItem", "dynabill.dynamodb.Query", "dynabill.dynamodb.Query",
		"dynabill.dynamodb.Query", "dynabill.dynamodb.TransactWriteItems"}, names, "spans")
}

// With no providers configured every component uses the global ones (no-ops
// here) and works as before.
func TestTelemetryNilProviders(t *testing.T) {
	ctx := context.Background()
	e := newCollectorEnv(t)
	e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.UnknownBeforeCharge(nil), billingtest.Succeeded())
	rep, err := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err, "run = %+v", rep)
	require.Equal(t, 1, rep.Unknown, "run = %+v", rep)
	urep, err := e.c.CollectUser(ctx, "u1", billing.ProcessWebhook)
	require.NoError(t, err, "CollectUser = %+v", urep)
	require.Equal(t, 1, urep.Collected, "CollectUser = %+v", urep)

	s, err := notice.NewScheduler(notice.SchedulerConfig{Repository: e.repo, Enqueuer: &billingtest.RecordingEnqueuer{},
		Clock: e.clock})
	require.NoError(t, err)
	_, err = s.Run(ctx, notice.Event{})
	require.NoError(t, err)
	w, err := notice.NewWorker(notice.WorkerConfig{Users: billingtest.NewUserDirectory(),
		Notifier: &billingtest.RecordingNotifier{}})
	require.NoError(t, err)
	failed := w.HandleBatch(ctx, []notice.QueueMessage{{ID: "m", Body: "{"}})
	require.Empty(t, failed, "unparseable messages are dropped, not redelivered")

	fake := &fakeDynamo{}
	repo, err := dynamostore.NewRepository(dynamostore.Config{Client: fake})
	require.NoError(t, err)
	_, err = repo.ListByUser(ctx, "u1")
	require.NoError(t, err, "ListByUser: calls %v", fake.calls)
	require.Len(t, fake.calls, 1, "ListByUser: calls %v", fake.calls)
}

// TestTelemetryGlobalProviderInstalledLater checks that a collector built
// with no TracerProvider, while the global one is the default no-op,
// makes no attempt span then, and records them once the host installs a
// global provider after the collector was built (the collector skips the
// inert spans of the default global, but asks again for every record).
func TestTelemetryGlobalProviderInstalledLater(t *testing.T) {
	ctx := context.Background()
	e := newCollectorEnv(t)
	before := e.add("u-global-before", jan31, billing.StatusScheduled)
	after := e.add("u-global-after", jan31, billing.StatusScheduled)
	_, err := e.c.Periods().Collect(ctx, before.SubscriptionID)
	require.NoError(t, err)

	o := newOtelEnv(t)
	otel.SetTracerProvider(o.tp)
	t.Cleanup(func() { otel.SetTracerProvider(tracenoop.NewTracerProvider()) })
	rep, err := e.c.Periods().Collect(ctx, after.SubscriptionID)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Collected, "report = %+v", rep)

	users := map[string]int{}
	for _, s := range o.ended(itel.SpanCollectionAttempt) {
		users[spanAttrs(s)["dynabill.user_id"]]++
	}
	assert.Equal(t, map[string]int{"u-global-after": 1}, users, "attempt spans by user")
}
