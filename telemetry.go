package billing

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName is the name of the OpenTelemetry meter and tracer
// the library records with (the instrumentation scope), for hosts that
// select its instruments in views.
const InstrumentationName = "github.com/dynabill/billing"

// OpenTelemetry names. The [Collector], the notifier's [Scheduler] and
// [Worker], and the DynamoDB [Repository] and [History] record through the
// OpenTelemetry API with the MeterProvider and TracerProvider of their
// configs. Nil providers mean otel.GetMeterProvider() and
// otel.GetTracerProvider(), the global ones: no-ops unless the host
// installs providers (with otel.SetMeterProvider and
// otel.SetTracerProvider, before or after the components are built).
//
// Metrics (durations in seconds, with explicit buckets from 5ms to 10s):
//
//	name                          instrument          attributes
//	dynabill.collection.attempts  Int64Counter        outcome, process, run
//	dynabill.provider.duration    Float64Histogram    outcome, error
//	dynabill.dynamodb.duration    Float64Histogram    operation, error
//	dynabill.notifier.messages    Int64Counter        outcome
//	dynabill.notifier.enqueued    Int64Counter        (none)
//
// dynabill.collection.attempts counts the records the collector handled,
// once per record, by what came of it. Its outcome is one of collected,
// pending (an ACH debit submitted), declined, unknown (the provider
// returned an error: outcome unknown, retried later with the same key),
// stale, advanced (a PAUSED record moved on), skipped_locked, not_eligible,
// conflict (a write lost to a concurrent writer) and failed (any other
// error). process is the record's process (INITIAL, RETRY, PAUSE, WEBHOOK,
// WEBHOOK_BALANCE, BATCH, MANUAL_REPAYMENT) and run the run kind or
// single-collection entry point (scheduled, retry, pause, webhook, batch,
// manual). A run counts every record of its pages; a single collection
// ([Collector.CollectUser], [Collector.CollectByID],
// [Collector.ManualRepayment]) counts the records it attempts, not those it
// finds locked or ineligible (it returns those as errors).
//
// dynabill.provider.duration times each [PaymentProvider] Collect call;
// outcome is succeeded, pending, declined or, when Collect returned an
// error, unknown, and error is true exactly then.
//
// dynabill.dynamodb.duration times each call of a [DynamoDBAPI] client made
// by the DynamoDB Repository and History (their batch writes included);
// operation is the API name (GetItem, Query, TransactWriteItems,
// BatchWriteItem, ...) and error whether the call returned an error
// (conditional-check failures and throttling included).
//
// dynabill.notifier.messages counts the worker messages handled, by
// outcome: sent, skipped_pending_cancellation, skipped_inactive_user,
// skipped_test_environment, or failed (the message goes back to the queue:
// unparseable, not tried before the deadline, or [Worker.Handle] returned
// an error). dynabill.notifier.enqueued counts the messages the scheduler's
// [Enqueuer] accepted.
//
// Spans (user and subscription IDs are span attributes only, never metric
// attributes):
//
//	name                          attributes
//	dynabill.collection.run       dynabill.run.kind; when it ends dynabill.run.pages, .scanned,
//	                              .invalid, .attempted, .collected, .pending, .declined, .unknown,
//	                              .advanced, .stale, .skipped_locked, .not_eligible, .conflicts,
//	                              .failed and .continues (Report.Next is set)
//	dynabill.collection.attempt   dynabill.user_id, dynabill.subscription_id, dynabill.process,
//	                              dynabill.run.kind, dynabill.attempt (the attempt number, when
//	                              the provider is called), dynabill.outcome
//	dynabill.notifier.schedule    dynabill.notifier.status; when it ends dynabill.notifier.pages,
//	                              .scanned, .enqueued, .skipped and .continues
//	dynabill.notifier.message     dynabill.user_id, dynabill.subscription_id, dynabill.outcome
//	dynabill.dynamodb.OPERATION   (client) rpc.system "aws-api", rpc.service "DynamoDB",
//	                              rpc.method OPERATION
//
// A run's attempt spans are children of its run span; a DynamoDB span is a
// child of whatever span the context carries. Spans of failures (outcomes
// unknown, conflict and failed; worker messages that failed; DynamoDB
// errors) have an error status and the error as an event.
const (
	MetricCollectionAttempts = "dynabill.collection.attempts"
	MetricProviderDuration   = "dynabill.provider.duration"
	MetricDynamoDBDuration   = "dynabill.dynamodb.duration"
	MetricNotifierMessages   = "dynabill.notifier.messages"
	MetricNotifierEnqueued   = "dynabill.notifier.enqueued"

	SpanCollectionRun     = "dynabill.collection.run"
	SpanCollectionAttempt = "dynabill.collection.attempt"
	SpanNotifierSchedule  = "dynabill.notifier.schedule"
	SpanNotifierMessage   = "dynabill.notifier.message"
	// SpanDynamoDBPrefix is followed by the operation, e.g.
	// "dynabill.dynamodb.GetItem".
	SpanDynamoDBPrefix = "dynabill.dynamodb."
)

// Collection outcomes: the outcome attribute of dynabill.collection.attempts
// and dynabill.outcome of an attempt span.
const (
	outcomeCollected     = "collected"
	outcomePending       = "pending"
	outcomeDeclined      = "declined"
	outcomeUnknown       = "unknown"
	outcomeStale         = "stale"
	outcomeAdvanced      = "advanced"
	outcomeSkippedLocked = "skipped_locked"
	outcomeNotEligible   = "not_eligible"
	outcomeConflict      = "conflict"
	outcomeFailed        = "failed"
)

// durationBuckets are the histogram bounds in seconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// telemetry holds one component's instruments and tracer, built once when
// the component is.
type telemetry struct {
	tracer           trace.Tracer
	attempts         metric.Int64Counter
	providerDuration metric.Float64Histogram
	dynamoDuration   metric.Float64Histogram
	messages         metric.Int64Counter
	enqueued         metric.Int64Counter
}

// newTelemetry builds the instruments on mp and tp; nil means the global
// provider (a no-op unless the host installed one).
func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) *telemetry {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(InstrumentationName)
	return &telemetry{
		tracer:           tp.Tracer(InstrumentationName),
		attempts:         counter(m, MetricCollectionAttempts, "{record}", "Records handled by the collector, by outcome."),
		providerDuration: histogram(m, MetricProviderDuration, "Duration of PaymentProvider.Collect calls."),
		dynamoDuration:   histogram(m, MetricDynamoDBDuration, "Duration of DynamoDB calls."),
		messages:         counter(m, MetricNotifierMessages, "{message}", "Notifier worker messages handled, by outcome."),
		enqueued:         counter(m, MetricNotifierEnqueued, "{message}", "Messages the notifier scheduler enqueued."),
	}
}

// counter and histogram make an instrument; a provider that refuses one (it
// cannot for these names and options) gets a no-op instead.
func counter(m metric.Meter, name, unit, desc string) metric.Int64Counter {
	c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	if err != nil || c == nil {
		return metricnoop.Int64Counter{}
	}
	return c
}

func histogram(m metric.Meter, name, desc string) metric.Float64Histogram {
	h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil || h == nil {
		return metricnoop.Float64Histogram{}
	}
	return h
}

// failSpan gives span an error status and err as an event.
func failSpan(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// process returns the process a run of kind collects with.
func (k RunKind) process() Process {
	switch k {
	case RunRetry:
		return ProcessRetry
	case RunPause:
		return ProcessPause
	}
	return ProcessInitial
}

// singleRun names the single-collection entry point of proc for the run
// attribute.
func singleRun(proc Process) string {
	switch proc {
	case ProcessWebhook, ProcessWebhookBalance:
		return "webhook"
	case ProcessBatch:
		return "batch"
	case ProcessManualRepayment:
		return "manual"
	}
	return strings.ToLower(string(proc))
}

// startRun starts the span of a run.
func (t *telemetry) startRun(ctx context.Context, kind RunKind) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, SpanCollectionRun, trace.WithAttributes(attribute.String("dynabill.run.kind", string(kind))))
}

// endRun records rep on the run's span and ends it.
func (t *telemetry) endRun(span trace.Span, rep *Report, err error) {
	if rep != nil {
		span.SetAttributes(
			attribute.Int("dynabill.run.pages", rep.Pages),
			attribute.Int("dynabill.run.scanned", rep.Scanned),
			attribute.Int("dynabill.run.invalid", rep.Invalid),
			attribute.Int("dynabill.run.attempted", rep.Attempted),
			attribute.Int("dynabill.run.collected", rep.Collected),
			attribute.Int("dynabill.run.pending", rep.Pending),
			attribute.Int("dynabill.run.declined", rep.Declined),
			attribute.Int("dynabill.run.unknown", rep.Unknown),
			attribute.Int("dynabill.run.advanced", rep.Advanced),
			attribute.Int("dynabill.run.stale", rep.Stale),
			attribute.Int("dynabill.run.skipped_locked", rep.SkippedLocked),
			attribute.Int("dynabill.run.not_eligible", rep.NotEligible),
			attribute.Int("dynabill.run.conflicts", rep.Conflicts),
			attribute.Int("dynabill.run.failed", len(rep.Failed)),
			attribute.Bool("dynabill.run.continues", rep.Next != ""),
		)
	}
	if err != nil {
		failSpan(span, err)
	}
	span.End()
}

// recordObs observes the handling of one record: its span, and a report of
// its own whose counts tell the outcome; end adds them to the caller's.
type recordObs struct {
	tel  *telemetry
	span trace.Span
	rep  *Report
	run  string
	proc Process
	// err is what handling the record returned, if the caller saw it.
	err error
}

// startRecord starts observing the record of userID and subID, handled
// by proc in run.
func (t *telemetry) startRecord(ctx context.Context, run string, proc Process, userID, subID string) (context.Context, *recordObs) {
	ctx, span := t.tracer.Start(ctx, SpanCollectionAttempt, trace.WithAttributes(
		attribute.String("dynabill.user_id", userID),
		attribute.String("dynabill.subscription_id", subID),
		attribute.String("dynabill.process", string(proc)),
		attribute.String("dynabill.run.kind", run),
	))
	return ctx, &recordObs{tel: t, span: span, rep: &Report{}, run: run, proc: proc}
}

// end adds the record's counts to into, counts its outcome and ends its
// span.
func (o *recordObs) end(ctx context.Context, into *Report) {
	into.add(o.rep)
	out := o.outcome()
	o.tel.attempts.Add(ctx, 1, metric.WithAttributes(
		attribute.String("outcome", out),
		attribute.String("process", string(o.proc)),
		attribute.String("run", o.run),
	))
	o.span.SetAttributes(attribute.String("dynabill.outcome", out))
	switch {
	case o.err != nil:
		failSpan(o.span, o.err)
	case len(o.rep.Failed) > 0: // the lock could not be taken
		o.span.SetStatus(codes.Error, o.rep.Failed[0].Reason)
	}
	o.span.End()
}

// outcome tells what came of the record from its counts and error.
func (o *recordObs) outcome() string {
	r := o.rep
	switch {
	case r.Unknown > 0:
		return outcomeUnknown
	case r.Conflicts > 0 || IsConflict(o.err):
		return outcomeConflict
	case o.err != nil || len(r.Failed) > 0:
		return outcomeFailed
	case r.Collected > 0:
		return outcomeCollected
	case r.Pending > 0:
		return outcomePending
	case r.Declined > 0:
		return outcomeDeclined
	case r.Stale > 0, r.ACHOverdue > 0:
		return outcomeStale
	case r.Advanced > 0:
		return outcomeAdvanced
	case r.SkippedLocked > 0:
		return outcomeSkippedLocked
	}
	return outcomeNotEligible // nothing was done to it
}

// add adds the counts and failures of o to r. Run-level fields (kind,
// times, pages, cursor) are left alone.
func (r *Report) add(o *Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Invalid += o.Invalid
	r.Attempted += o.Attempted
	r.Collected += o.Collected
	r.Pending += o.Pending
	r.Declined += o.Declined
	r.Unknown += o.Unknown
	r.Advanced += o.Advanced
	r.Stale += o.Stale
	r.ACHOverdue += o.ACHOverdue
	r.SkippedLocked += o.SkippedLocked
	r.NotEligible += o.NotEligible
	r.Conflicts += o.Conflicts
	r.Failed = append(r.Failed, o.Failed...)
}

// providerCalled records a PaymentProvider.Collect call of attempt n that
// took d.
func (t *telemetry) providerCalled(ctx context.Context, n int, d time.Duration, res PaymentResult, err error) {
	out := res.Outcome.String()
	if err != nil {
		out = outcomeUnknown
	}
	t.providerDuration.Record(ctx, d.Seconds(), metric.WithAttributes(
		attribute.String("outcome", out),
		attribute.Bool("error", err != nil),
	))
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("dynabill.attempt", n))
}

// startSchedule starts the span of a scheduler run.
func (t *telemetry) startSchedule(ctx context.Context, ev SchedulerEvent) (context.Context, trace.Span) {
	status := ev.Status
	if status == "" {
		status = StatusScheduled
	}
	return t.tracer.Start(ctx, SpanNotifierSchedule, trace.WithAttributes(attribute.String("dynabill.notifier.status", string(status))))
}

// endSchedule counts what a scheduler run enqueued and ends its span.
func (t *telemetry) endSchedule(ctx context.Context, span trace.Span, res SchedulerResult, err error) {
	if res.Enqueued > 0 {
		t.enqueued.Add(ctx, int64(res.Enqueued))
	}
	span.SetAttributes(
		attribute.Int("dynabill.notifier.pages", res.Pages),
		attribute.Int("dynabill.notifier.scanned", res.Scanned),
		attribute.Int("dynabill.notifier.enqueued", res.Enqueued),
		attribute.Int("dynabill.notifier.skipped", res.Skipped),
		attribute.Bool("dynabill.notifier.continues", res.Continuation != nil),
	)
	if err != nil {
		failSpan(span, err)
	}
	span.End()
}

// messageFailed is the notifier outcome of a message that goes back to
// the queue.
const messageFailed = "failed"

// countMessage counts a worker message by outcome.
func (t *telemetry) countMessage(ctx context.Context, outcome string) {
	t.messages.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// startMessage starts the span of a worker message.
func (t *telemetry) startMessage(ctx context.Context, m *NotificationMessage) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, SpanNotifierMessage, trace.WithAttributes(
		attribute.String("dynabill.user_id", m.UserID),
		attribute.String("dynabill.subscription_id", m.SubscriptionID),
	))
}

// endMessage counts a handled message and ends its span.
func (t *telemetry) endMessage(ctx context.Context, span trace.Span, out NotificationOutcome, err error) {
	outcome := string(out)
	if err != nil {
		outcome = messageFailed
		failSpan(span, err)
	}
	t.countMessage(ctx, outcome)
	span.SetAttributes(attribute.String("dynabill.outcome", outcome))
	span.End()
}
