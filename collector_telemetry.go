package billing

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	itel "github.com/dynabill/billing/internal/telemetry"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Collection outcomes: the outcome attribute of dynabill.collection.attempts
// and dynabill.outcome of an attempt span.
const (
	outcomeCollected     = "collected"
	outcomePending       = "pending"
	outcomeDeclined      = "declined"
	outcomeUnknown       = "unknown"
	outcomeRateLimited   = "rate_limited"
	outcomeStale         = "stale"
	outcomeAdvanced      = "advanced"
	outcomeFree          = "free"
	outcomeSkippedLocked = "skipped_locked"
	outcomeNotEligible   = "not_eligible"
	outcomeConflict      = "conflict"
	outcomeFailed        = "failed"
)

// telemetry holds one component's instruments and tracer, built once when
// the component is.
type telemetry struct {
	tracer           trace.Tracer
	idle             itel.IdleGlobal // a record's span is skipped while inert
	attempts         metric.Int64Counter
	providerDuration metric.Float64Histogram

	// sets holds the attribute sets of the collection metrics, built once
	// per combination instead of once per record.
	setsMu sync.RWMutex
	sets   map[attrKey]attrSet
}

// attrSet is one cached attribute option, held in the option slices the
// instruments take, so that passing them allocates no variadic slice.
type attrSet struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// attrKey names one combination of metric attributes: the attempts
// counter's outcome, process and run, or the provider duration's outcome
// and error (as "true" or "false").
type attrKey struct {
	metric, outcome, process, run string
}

// maxAttrSets bounds the cached attribute sets; further combinations are
// built on every use.
const maxAttrSets = 1024

// measurement returns the attribute option of k, built by build the first
// time.
func (t *telemetry) measurement(k attrKey, build func() metric.MeasurementOption) attrSet {
	t.setsMu.RLock()
	o, ok := t.sets[k]
	t.setsMu.RUnlock()
	if ok {
		return o
	}
	m := build()
	o = attrSet{add: []metric.AddOption{m}, rec: []metric.RecordOption{m}}
	t.setsMu.Lock()
	if t.sets == nil {
		t.sets = map[attrKey]attrSet{}
	}
	if len(t.sets) < maxAttrSets {
		t.sets[k] = o
	}
	t.setsMu.Unlock()
	return o
}

// newTelemetry builds the instruments on mp and tp; nil means the global
// provider (a no-op unless the host installed one).
func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) *telemetry {
	m, tracer := itel.Providers(mp, tp)
	return &telemetry{
		tracer:           tracer,
		idle:             itel.NewIdleGlobal(tp),
		attempts:         itel.Counter(m, itel.MetricCollectionAttempts, "{record}", "Records handled by the collector, by outcome."),
		providerDuration: itel.Histogram(m, itel.MetricProviderDuration, "Duration of PaymentProvider.Collect calls."),
	}
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
	return t.tracer.Start(ctx, itel.SpanCollectionRun, trace.WithAttributes(attribute.String("dynabill.run.kind", string(kind))))
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
			attribute.Int("dynabill.run.rate_limited", rep.RateLimited),
			attribute.Int("dynabill.run.advanced", rep.Advanced),
			attribute.Int("dynabill.run.free", rep.Free),
			attribute.Int("dynabill.run.stale", rep.Stale),
			attribute.Int("dynabill.run.skipped_locked", rep.SkippedLocked),
			attribute.Int("dynabill.run.not_eligible", rep.NotEligible),
			attribute.Int("dynabill.run.conflicts", rep.Conflicts),
			attribute.Int("dynabill.run.failed", len(rep.Failed)),
			attribute.Bool("dynabill.run.continues", rep.Next != ""),
		)
	}
	if err != nil {
		itel.FailSpan(span, err)
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
	// own is what rep points to, allocated with the observation.
	own Report
}

// startRecord starts observing the record of userID and subID, handled
// by proc in run.
func (t *telemetry) startRecord(ctx context.Context, run string, proc Process, userID, subID string) (context.Context, *recordObs) {
	if t.idle.Inert(ctx) {
		// The global provider, with none installed and no trace to carry
		// on, would make a span that records nothing and an invalid span
		// context: skip building it (and its attributes).
		o := &recordObs{tel: t, span: itel.InertSpan, run: run, proc: proc}
		o.rep = &o.own
		return ctx, o
	}
	ctx, span := t.tracer.Start(ctx, itel.SpanCollectionAttempt, trace.WithAttributes(
		attribute.String("dynabill.user_id", userID),
		attribute.String("dynabill.subscription_id", subID),
		attribute.String("dynabill.process", string(proc)),
		attribute.String("dynabill.run.kind", run),
	))
	o := &recordObs{tel: t, span: span, run: run, proc: proc}
	o.rep = &o.own
	return ctx, o
}

// end adds the record's counts to into, counts its outcome and ends its
// span.
func (o *recordObs) end(ctx context.Context, into *Report) {
	into.add(o.rep)
	out := o.outcome()
	o.tel.attempts.Add(ctx, 1, o.tel.measurement(attrKey{itel.MetricCollectionAttempts, out, string(o.proc), o.run}, func() metric.MeasurementOption {
		return metric.WithAttributes(
			attribute.String("outcome", out),
			attribute.String("process", string(o.proc)),
			attribute.String("run", o.run),
		)
	}).add...)
	if o.span.IsRecording() { // a span that does not record drops attributes
		o.span.SetAttributes(attribute.String("dynabill.outcome", out))
	}
	switch {
	case o.err != nil:
		itel.FailSpan(o.span, o.err)
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
	case r.RateLimited > 0:
		return outcomeRateLimited
	case r.Stale > 0, r.ACHOverdue > 0:
		return outcomeStale
	case r.Advanced > 0:
		return outcomeAdvanced
	case r.Free > 0:
		return outcomeFree
	case r.SkippedLocked > 0:
		return outcomeSkippedLocked
	}
	return outcomeNotEligible // nothing was done to it
}

// add adds the counts and failures of o, a record's or a shard's part of
// the run, to r. Kind, times and cursor are left alone.
func (r *Report) add(o *Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Pages += o.Pages
	r.Scanned += o.Scanned
	r.Invalid += o.Invalid
	r.Attempted += o.Attempted
	r.Collected += o.Collected
	r.Pending += o.Pending
	r.Declined += o.Declined
	r.Unknown += o.Unknown
	r.RateLimited += o.RateLimited
	r.Advanced += o.Advanced
	r.Free += o.Free
	r.Stale += o.Stale
	r.ACHOverdue += o.ACHOverdue
	r.SkippedLocked += o.SkippedLocked
	r.NotEligible += o.NotEligible
	r.Conflicts += o.Conflicts
	r.Unexpected += o.Unexpected
	r.Failed = append(r.Failed, o.Failed...)
}

// providerCalled records a PaymentProvider.Collect call of attempt n that
// took d.
func (t *telemetry) providerCalled(ctx context.Context, n int, d time.Duration, res PaymentResult, err error) {
	out := res.Outcome.String()
	switch {
	case errors.Is(err, ErrRateLimited):
		out = outcomeRateLimited
	case err != nil:
		out = outcomeUnknown
	}
	failed := err != nil
	t.providerDuration.Record(ctx, d.Seconds(), t.measurement(attrKey{itel.MetricProviderDuration, out, strconv.FormatBool(failed), ""}, func() metric.MeasurementOption {
		return metric.WithAttributes(
			attribute.String("outcome", out),
			attribute.Bool("error", failed),
		)
	}).rec...)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.Int("dynabill.attempt", n))
	}
}
