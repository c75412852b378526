package telemetry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TestIdleGlobalSeesAProviderInstalledLater checks that skipping inert
// spans stops the moment a host installs a global TracerProvider, for a
// component built before it, and that a span context to carry on, or a
// configured provider, is never skipped.
func TestIdleGlobalSeesAProviderInstalledLater(t *testing.T) {
	ctx := context.Background()
	assert.False(t, NewIdleGlobal(noop.NewTracerProvider()).Inert(ctx), "a configured provider is never skipped")

	idle := NewIdleGlobal(nil)
	require.True(t, idle.Inert(ctx), "default global, no span context: inert")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	assert.False(t, idle.Inert(trace.ContextWithSpanContext(ctx, sc)), "a span context to carry on is not inert")
	assert.False(t, InertSpan.IsRecording())
	assert.False(t, InertSpan.SpanContext().IsValid())

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	assert.False(t, idle.Inert(ctx), "a provider installed after the check was built is seen")
	assert.False(t, NewIdleGlobal(nil).Inert(ctx), "a provider installed before it too")
}
