package billing

import (
	"context"
	"time"
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
	// EventBillingDateMoved: a record moved to another billing date
	// ([Periods.Move]).
	EventBillingDateMoved EventType = "subscription_billing_date_moved"
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
