// Package telemetry holds the OpenTelemetry names and instrument helpers
// the engines and the DynamoDB stores share. Hosts configure telemetry
// through the MeterProvider and TracerProvider fields of the engines' and
// stores' configs; the names are documented in the root package.
package telemetry

import (
	"go.opentelemetry.io/otel"
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

// DurationBuckets are the histogram bounds in seconds.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// Providers returns the meter and tracer of the library's instrumentation
// scope on mp and tp; nil means the global provider (a no-op unless the
// host installed one).
func Providers(mp metric.MeterProvider, tp trace.TracerProvider) (metric.Meter, trace.Tracer) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return mp.Meter(InstrumentationName), tp.Tracer(InstrumentationName)
}

// Counter and Histogram make an instrument; a provider that refuses one (it
// cannot for these names and options) gets a no-op instead.
func Counter(m metric.Meter, name, unit, desc string) metric.Int64Counter {
	c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	if err != nil || c == nil {
		return metricnoop.Int64Counter{}
	}
	return c
}

func Histogram(m metric.Meter, name, desc string) metric.Float64Histogram {
	h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	if err != nil || h == nil {
		return metricnoop.Float64Histogram{}
	}
	return h
}

// FailSpan gives span an error status and err as an event.
func FailSpan(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
