// Package telemetry holds the OpenTelemetry names and instrument helpers
// the engines and the DynamoDB stores share. Hosts configure telemetry
// through the MeterProvider and TracerProvider fields of the engines' and
// stores' configs; the names are documented in the root package.
package telemetry

import (
	"context"
	"reflect"

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

// The metric and span names. What each records, and its attributes, is
// documented for hosts in the root package's doc (Observability).
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

// globalPkg is the package of the global TracerProvider otel hands out
// before a host installs its own: it delegates to the first provider the
// host installs, and until then makes spans that record nothing.
const globalPkg = "go.opentelemetry.io/otel/internal/global"

// IdleGlobal is a check, made per span, of whether a span started on the
// global TracerProvider would be inert: no provider installed, and no
// span context to carry on. Such a span only costs allocations, so a hot
// path may skip it (see [IdleGlobal.Inert]).
type IdleGlobal struct {
	tp trace.TracerProvider // the delegating default; nil when not in use
}

// NewIdleGlobal returns the check for a component configured with tp: it
// never holds when tp is set, or when a host provider was already
// installed.
func NewIdleGlobal(tp trace.TracerProvider) IdleGlobal {
	if tp != nil {
		return IdleGlobal{}
	}
	g := otel.GetTracerProvider()
	if t := reflect.TypeOf(g); t == nil || t.Kind() != reflect.Pointer || t.Elem().PkgPath() != globalPkg {
		return IdleGlobal{}
	}
	return IdleGlobal{tp: g}
}

// Inert reports whether a span started now on the global provider under
// ctx would record nothing and carry no span context: the global provider
// is still the default one (asked each time, so a host installing one
// later is seen at once), and ctx carries no valid span context (which
// the span would have copied). A caller that skips the span then uses
// [InertSpan] and leaves ctx as it is.
func (g IdleGlobal) Inert(ctx context.Context) bool {
	return g.tp != nil && otel.GetTracerProvider() == g.tp && !trace.SpanContextFromContext(ctx).IsValid()
}

// InertSpan is a span that records nothing, for a caller that skipped
// starting one (see [IdleGlobal.Inert]); shared, so it costs no
// allocation.
var InertSpan = trace.SpanFromContext(context.Background())
