package notice

import (
	"context"

	"github.com/dynabill/billing"
	itel "github.com/dynabill/billing/internal/telemetry"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// telemetry holds the notifier's instruments and tracer, built once when
// the scheduler or worker is. The names (dynabill.notifier.*) are the
// root package's: one instrumentation scope for the whole module.
type telemetry struct {
	tracer   trace.Tracer
	messages metric.Int64Counter
	enqueued metric.Int64Counter
}

// newTelemetry builds the instruments on mp and tp; nil means the global
// provider (a no-op unless the host installed one).
func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) *telemetry {
	m, tracer := itel.Providers(mp, tp)
	return &telemetry{
		tracer:   tracer,
		messages: itel.Counter(m, itel.MetricNotifierMessages, "{message}", "Notifier worker messages handled, by outcome."),
		enqueued: itel.Counter(m, itel.MetricNotifierEnqueued, "{message}", "Messages the notifier scheduler enqueued."),
	}
}

// startSchedule starts the span of a scheduler run.
func (t *telemetry) startSchedule(ctx context.Context, ev Event) (context.Context, trace.Span) {
	status := ev.Status
	if status == "" {
		status = billing.StatusScheduled
	}
	return t.tracer.Start(ctx, itel.SpanNotifierSchedule, trace.WithAttributes(attribute.String("dynabill.notifier.status", string(status))))
}

// endSchedule counts what a scheduler run enqueued and ends its span.
func (t *telemetry) endSchedule(ctx context.Context, span trace.Span, res Result, err error) {
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
		itel.FailSpan(span, err)
	}
	span.End()
}

// The notifier outcomes the worker sets itself: messageFailed for a
// message that goes back to the queue, messageDroppedInvalid for one whose
// body cannot be parsed or decoded (acknowledged, never redelivered).
const (
	messageFailed         = "failed"
	messageDroppedInvalid = "dropped_invalid"
)

// countMessage counts a worker message by outcome.
func (t *telemetry) countMessage(ctx context.Context, outcome string) {
	t.messages.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// startMessage starts the span of a worker message.
func (t *telemetry) startMessage(ctx context.Context, m *Message) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, itel.SpanNotifierMessage, trace.WithAttributes(
		attribute.String("dynabill.user_id", m.UserID),
		attribute.String("dynabill.subscription_id", m.SubscriptionID),
	))
}

// endMessage counts a handled message and ends its span.
func (t *telemetry) endMessage(ctx context.Context, span trace.Span, out Outcome, err error) {
	outcome := string(out)
	if err != nil {
		outcome = messageFailed
		itel.FailSpan(span, err)
	}
	t.countMessage(ctx, outcome)
	span.SetAttributes(attribute.String("dynabill.outcome", outcome))
	span.End()
}
