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

// EventType names what happened to a record.
type EventType string

// The events the collector emits.
const (
	// EventPaymentSucceeded: a collection completed (COMPLETED).
	EventPaymentSucceeded EventType = "payment_succeeded"
	// EventFreePeriodCompleted: a period of zero (a free tier) was
	// completed by the engine itself (COMPLETED), with no attempt, key or
	// processor call (see [Config.AllowFreeTiers]). Its history row carries
	// this change; the next period is opened as after a payment.
	EventFreePeriodCompleted EventType = "subscription_free_period_completed"
	// EventTrialEnded: a trial period ended and was completed by the
	// engine without a charge (COMPLETED); its history row carries this
	// change.
	EventTrialEnded EventType = "subscription_trial_ended"
	// EventTrialConverted: the first paid period after a trial was opened
	// (SCHEDULED on the trial's end, at the plan's price); the history row
	// of that period carries this change.
	EventTrialConverted EventType = "subscription_trial_converted"
	// EventPaymentPending: an ACH debit was submitted (ACHSENT).
	EventPaymentPending EventType = "payment_pending"
	// EventPaymentDeclined: a collection was declined (ERROR).
	EventPaymentDeclined EventType = "payment_declined"
	// EventPaymentReturned: a submitted ACH debit came back (ACHSENT →
	// ERROR). The legacy service sends user_subscription_payment_failed to
	// the user on it.
	EventPaymentReturned EventType = "user_subscription_payment_failed"
	// EventPaymentRefunded: a completed payment was refunded (REFUNDED).
	EventPaymentRefunded EventType = "payment_refunded"
	// EventStale: a record was too old to collect (STALE).
	EventStale EventType = "subscription_stale"
	// EventUnrecorded: the provider answered but the outcome could not be
	// recorded because the record changed meanwhile (e.g. an operator
	// cancelled it during the charge). Money may have moved for a record
	// that no longer expects it: the host should reconcile.
	EventUnrecorded EventType = "payment_unrecorded"
	// EventAttemptUnresolved: a run found a record whose attempt is in
	// flight and could not resolve it (the processor neither replayed nor
	// answered a lookup). The record is left as it is, even past the stale
	// threshold; an operator should look the key (in Reason) up with the
	// processor.
	EventAttemptUnresolved EventType = "payment_attempt_unresolved"
	// EventPaymentACHOverdue: an ACH debit was not settled or returned
	// within [Config.ACHSettlementDeadline], and the processor could not
	// tell what became of it. The record is moved to STALE with
	// updated_event ach-overdue; a late settlement still completes it. An
	// operator should find out from the processor.
	EventPaymentACHOverdue EventType = "payment_ach_overdue"
	// EventUnexpectedRecord: while opening a subscription's next period,
	// the collector found a later open record of the user that is neither
	// the period it handles nor that period's successor (a second plan
	// written by another service, say). It does not take that record for
	// the next period: the subscription's next period is opened as usual,
	// and the record is reported (Reason names it) for an operator to
	// reconcile.
	EventUnexpectedRecord EventType = "subscription_unexpected_record"
	// EventDuplicatePayment: the processor reports a payment (a settled
	// event, [Collector.ApplySettlement]) for a period that another
	// transaction has paid already, or that was waived or cancelled after
	// a charge was attempted. Nothing is written; TransactionID is
	// the duplicate payment, for the host to refund, and Reason names the
	// transaction the record holds. A redelivered event reports it again.
	EventDuplicatePayment EventType = "payment_duplicate"
	// EventPeriodsOverlap: a payment recorded for a period that had been
	// declined or given up on (ERROR or STALE → COMPLETED, see
	// [Collector.ApplySettlement]) pays a period that a later period of
	// the user overlaps: it starts before the paid one ends (a
	// reactivation after an ACH debit was given up on, say). SubscriptionID
	// is the paid period, RelatedSubscriptionID the later one; one event
	// per later period. Both stay as they are: the host refunds, waives or
	// moves one of them.
	EventPeriodsOverlap EventType = "subscription_periods_overlap"
	// EventInvalidRecord: a stored item of the user does not decode (an
	// amount such as "4,99" written by another program, say). It was
	// skipped: the user's other records were collected, listed or changed
	// as usual. Reason carries the decoding error, which names the
	// attribute and the item's key; the item needs an operator's repair.
	EventInvalidRecord EventType = "subscription_invalid_record"

	// The changes of a subscription's life that are not collection outcomes.
	// Each is the [Period.Change] of the history row its write adds, so
	// the history table's stream carries them; the in-process [EventSink] is
	// told only the collection outcomes above.

	// EventSubscriptionCreated: the host subscribed a user ([Collector.Subscribe]);
	// the row is the first period.
	EventSubscriptionCreated EventType = "subscription_created"
	// EventTrialStarted: the host subscribed a user with a trial
	// ([SubscribeRequest.TrialDays]); the row is the trial period.
	EventTrialStarted EventType = "subscription_trial_started"
	// EventTrialChanged: an operator ended a trial early or extended it
	// ([Collector.EndTrial], [Collector.ExtendTrial]).
	EventTrialChanged EventType = "subscription_trial_changed"
	// EventSubscriptionReactivated: an operator reactivated a user
	// ([Collector.Reactivate]); the row is the new period.
	EventSubscriptionReactivated EventType = "subscription_reactivated"
	// EventPeriodOpened: the next period of a subscription was opened
	// (SCHEDULED, or PAUSED while a pause lasts), by a collection, a waive,
	// a stale marking or the pause run.
	EventPeriodOpened EventType = "subscription_period_opened"
	// EventPaused: a record was paused, or the months of a pause changed
	// ([Periods.Pause]).
	EventPaused EventType = "subscription_paused"
	// EventPauseMonthSkipped: the pause run skipped a paused month
	// (PAUSED_SKIPPED).
	EventPauseMonthSkipped EventType = "subscription_pause_skipped"
	// EventResumed: a pause was ended early ([Periods.Resume]).
	EventResumed EventType = "subscription_resumed"
	// EventCancelled: a record was cancelled ([Periods.Cancel]); the
	// subscription ends.
	EventCancelled EventType = "subscription_cancelled"
	// EventWaived: a period was forgiven without payment ([Periods.WaiveByID]).
	EventWaived EventType = "payment_waived"
	// EventTierChanged: a record's tier and amount changed, or a downgrade
	// was set pending ([Periods.ChangeTier]).
	EventTierChanged EventType = "subscription_tier_changed"
	// EventCouponApplied: a coupon was applied to the subscription's next
	// charge ([Collector.ApplyCoupon]), and counted as redeemed.
	EventCouponApplied EventType = "subscription_coupon_applied"
	// EventBillingDateMoved: a record moved to another billing date
	// ([Periods.Move]).
	EventBillingDateMoved EventType = "subscription_billing_date_moved"
	// EventInvoiceFinalized: an invoice the collector issued before a
	// charge was numbered ([Config.Invoices]).
	EventInvoiceFinalized EventType = "invoice_finalized"
	// EventInvoicePaid: the charge paid the invoice.
	EventInvoicePaid EventType = "invoice_paid"
	// EventInvoiceVoided: the period was waived or cancelled unpaid, or
	// its charge was decided again (another amount or dates).
	EventInvoiceVoided EventType = "invoice_voided"
	// EventInvoiceUncollectible: the period went stale unpaid.
	EventInvoiceUncollectible EventType = "invoice_uncollectible"
	// EventCreditNoteIssued: a refund of a paid period was credited.
	EventCreditNoteIssued EventType = "credit_note_issued"
	// EventBalanceChanged: the customer's balance changed when a period's
	// charge opened the next period ([Period.Balance]): a credit larger
	// than the charge added to it, or the charge used some. Amount is the
	// balance after, on the period that carries it (SubscriptionID).
	EventBalanceChanged EventType = "customer_balance_changed"
	// EventChanged: a change a history row written without
	// [Period.Change] does not tell apart (a tier change or a date
	// move by an earlier version or another program).
	EventChanged EventType = "subscription_changed"
)

// Event is what the collector tells the host's [EventSink], and what the
// history table's stream decoder (package dynamostore) makes of each row.
type Event struct {
	// ID identifies an event read from the history table's stream: derived
	// from the row's key, the same on every delivery of the row, for a
	// consumer to drop repeats. Empty for the collector's in-process
	// events, which are delivered at most once.
	ID             string    `json:"id,omitempty"`
	Type           EventType `json:"type"`
	At             time.Time `json:"at"`
	UserID         string    `json:"user_id"`
	SubscriptionID string    `json:"subscription_id"`
	BillingDate    time.Time `json:"billing_date"`
	Amount         Amount    `json:"amount"`
	Process        Process   `json:"process,omitempty"`
	TransactionID  string    `json:"transaction_id,omitempty"`
	// Reason is the decline or return reason, or what went wrong.
	Reason string `json:"reason,omitempty"`
	// RelatedSubscriptionID is another period the event is about: the
	// later period of an [EventPeriodsOverlap]; empty otherwise.
	RelatedSubscriptionID string `json:"related_subscription_id,omitempty"`
	// InvoiceID and InvoiceNumber name the invoice of an invoice event
	// (and the credit note's number, of [EventCreditNoteIssued]).
	InvoiceID     string `json:"invoice_id,omitempty"`
	InvoiceNumber string `json:"invoice_number,omitempty"`
}

// EventSink receives events after the change they describe is stored. It
// is best effort: an error is logged and counted, never undoes the change,
// and a crash between the write and Emit loses the event. The collector
// tells it the collection outcomes and its warnings, not the lifecycle
// changes.
//
// A host that must not miss an event reads the history table's stream
// instead (dynamostore.StreamDecoder): every history row is one event,
// delivered at least once with a stable [Event.ID], for every status
// change including the lifecycle ones. The same EventSink can receive
// those.
type EventSink interface {
	Emit(ctx context.Context, e Event) error
}

// eventSinkFunc adapts a function to [EventSink].
type eventSinkFunc func(ctx context.Context, e Event) error

// Emit calls f.
func (f eventSinkFunc) Emit(ctx context.Context, e Event) error { return f(ctx, e) }

// reportInvalid returns ctx set to count, log and report (as an
// [EventInvalidRecord]) each item the per-user reads of the collection
// skip because it does not decode (see [WithInvalidItems]).
func (c *Collector) reportInvalid(ctx context.Context, kind, userID string, rep *Report) context.Context {
	return &invalidCountCtx{Context: ctx, c: c, kind: kind, userID: userID, rep: rep}
}

// invalidCountCtx is the context of [Collector.reportInvalid]: its
// parent, with itself as the reporter of invalid items (in place of the
// parent's, as [WithInvalidItems] would).
type invalidCountCtx struct {
	context.Context
	c            *Collector
	kind, userID string
	rep          *Report
}

// Value returns x itself for invalidItemsKey, else the parent's value.
func (x *invalidCountCtx) Value(key any) any {
	if key == any(invalidItemsKey{}) {
		return invalidReporter(x)
	}
	return x.Context.Value(key)
}

func (x *invalidCountCtx) reportInvalidItem(ctx context.Context, err error) {
	x.rep.count(&x.rep.Invalid)
	x.c.invalidRecord(ctx, x.kind, x.userID, err)
}

// invalidRecord logs and reports one undecodable item of userID ("" when
// a status page found it and the item does not say).
func (c *Collector) invalidRecord(ctx context.Context, kind, userID string, err error) {
	c.cfg.Logger.WarnContext(ctx, "billing: skipping undecodable record", "run", kind, "user_id", userID, "error", err)
	c.emit(ctx, Event{Type: EventInvalidRecord, At: c.cfg.Clock.Now(), UserID: userID, Reason: err.Error()})
}

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
