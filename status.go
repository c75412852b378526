package billing

import (
	"fmt"
	"slices"

	"github.com/dynabill/billing/internal/enum"
)

// Status is the billing_status of a record: where one billing period stands
// in its collection lifecycle.
//
// # Transition table
//
// Every state change the library writes is checked against this table
// ([CheckTransition]); a change the table does not allow is an
// [ErrIllegalTransition] and is never written. Rows are the current status,
// the second column lists every status it may move to. A status moving to
// itself is only allowed where listed (an ERROR record that fails again stays
// ERROR; an admin edit of a SCHEDULED or PAUSED record keeps its status).
//
//	from            to
//	--------------  ----------------------------------------------------------------
//	SCHEDULED       SCHEDULED ACHSENT COMPLETED ERROR WAIVED CANCELLED PAUSED STALE
//	ACHSENT         COMPLETED ERROR STALE
//	ERROR           ERROR ACHSENT COMPLETED WAIVED CANCELLED STALE
//	PAUSED          PAUSED PAUSED_SKIPPED SCHEDULED CANCELLED
//	COMPLETED       REFUNDED
//	WAIVED          (none)
//	CANCELLED       (none)
//	PAUSED_SKIPPED  (none)
//	REFUNDED        (none)
//	STALE           COMPLETED
//	INACTIVE        (none; never stored)
//
// Why these rows:
//   - SCHEDULED is where every period starts. A collection attempt moves it to
//     ACHSENT (an ACH debit awaiting settlement), COMPLETED (the processor
//     settled at once) or ERROR (declined). An operator may waive, cancel or
//     pause it; the collector marks it STALE when it is older than the
//     stale threshold.
//   - ACHSENT only waits for settlement: COMPLETED, or ERROR on an ACH
//     return. Anything else would lose track of money in flight, except
//     STALE when no settlement came within the collector's
//     ACHSettlementDeadline (updated_event ach-overdue; see
//     [Config.ACHSettlementDeadline]).
//   - STALE is terminal for collection, but the settlement of an overdue
//     ACH debit that arrives late still completes it (COMPLETED), so the
//     money it moved is recorded.
//   - ERROR is retried (ERROR again, ACHSENT, COMPLETED), forgiven
//     (WAIVED), cancelled, or given up on (STALE).
//   - PAUSED is advanced by the pause run (PAUSED_SKIPPED), resumed
//     (SCHEDULED), edited (PAUSED) or cancelled.
//   - COMPLETED is terminal for collection; only a refund may follow it.
//   - INACTIVE is a sentinel meaning "no active subscription": it is never
//     stored, so it has no transitions at all.
//
// # Coming back
//
// One change of a stored record is not in the table, because it depends on
// the record and not only on its status: a CANCELLED record that was never
// attempted ([Period.Attempted] false: nothing was charged, asked
// for or declined on it) may become SCHEDULED or PAUSED again. That is
// how a user who cancelled at period end and comes back on the day the
// paid period ends ([Collector.Reactivate], [Collector.Subscribe]) goes
// on without a gap: the renewal that was never charged is the period
// billed, under its key, instead of a second record the key could not
// hold. Such a reopening may also give the record a new subscription_id
// (the first period of a new subscription request). [CheckTransition]
// is the whole rule, table included; stores check every update with it.
type Status string

// The statuses of the legacy billing-activity table.
const (
	StatusScheduled     Status = "SCHEDULED"
	StatusACHSent       Status = "ACHSENT"
	StatusCompleted     Status = "COMPLETED"
	StatusError         Status = "ERROR"
	StatusWaived        Status = "WAIVED"
	StatusCancelled     Status = "CANCELLED"
	StatusPaused        Status = "PAUSED"
	StatusPausedSkipped Status = "PAUSED_SKIPPED"
	StatusRefunded      Status = "REFUNDED"
	StatusStale         Status = "STALE"

	// StatusInactive represents the absence of an active subscription. It is
	// never stored: encoding a record with it is an error.
	StatusInactive Status = "INACTIVE"
)

// statuses is every status in the order statusValues lists them.
var statuses = enum.New(
	StatusScheduled, StatusACHSent, StatusCompleted, StatusError,
	StatusWaived, StatusCancelled, StatusPaused, StatusPausedSkipped,
	StatusRefunded, StatusStale, StatusInactive,
)

// statusValues lists every status, the INACTIVE sentinel last.
func statusValues() []Status { return statuses.Values() }

// transitions is the table documented on [Status].
var transitions = map[Status][]Status{
	StatusScheduled: {StatusScheduled, StatusACHSent, StatusCompleted, StatusError, StatusWaived, StatusCancelled, StatusPaused, StatusStale},
	StatusACHSent:   {StatusCompleted, StatusError, StatusStale},
	StatusError:     {StatusError, StatusACHSent, StatusCompleted, StatusWaived, StatusCancelled, StatusStale},
	StatusPaused:    {StatusPaused, StatusPausedSkipped, StatusScheduled, StatusCancelled},
	StatusCompleted: {StatusRefunded},
	StatusStale:     {StatusCompleted},
}

// ParseStatus parses a stored billing_status value. Values are
// case-sensitive, as stored. An unknown value is an error wrapping
// [ErrInvalidStatus] and naming the value.
func ParseStatus(s string) (Status, error) {
	return statuses.Parse(s, nil, invalidField("billing_status", ErrInvalidStatus))
}

// Valid reports whether s is one of the statuses (INACTIVE included).
func (s Status) Valid() bool { return statuses.Valid(s) }

// Storable reports whether s may be written to a table: every valid status
// except the INACTIVE sentinel.
func (s Status) Storable() bool {
	return s.Valid() && s != StatusInactive
}

// IsTerminal reports whether no further collection happens for a record in
// this status: COMPLETED, WAIVED, CANCELLED, PAUSED_SKIPPED, REFUNDED, STALE
// and the INACTIVE sentinel. COMPLETED is terminal for collection although a
// refund may still follow it (see the table on [Status]).
func (s Status) IsTerminal() bool {
	switch s {
	case StatusCompleted, StatusWaived, StatusCancelled, StatusPausedSkipped,
		StatusRefunded, StatusStale, StatusInactive:
		return true
	}
	return false
}

// IsCollectible reports whether a collection attempt may be made on a record
// in this status: SCHEDULED or ERROR.
func (s Status) IsCollectible() bool {
	return s == StatusScheduled || s == StatusError
}

// String returns the stored form.
func (s Status) String() string { return string(s) }

// canTransition reports whether the table on [Status] allows a record in
// status from to be written with status to.
func canTransition(from, to Status) bool {
	return slices.Contains(transitions[from], to)
}

// checkTransition returns nil when the transition table (see [Status]) allows the change and a
// [*TransitionError] wrapping [ErrIllegalTransition] otherwise.
func checkTransition(from, to Status) error {
	if canTransition(from, to) {
		return nil
	}
	return &TransitionError{From: from, To: to}
}

// CheckTransition returns nil when prev may be written as next by
// an update: a change the transition table on [Status] allows, or a CANCELLED record never
// attempted reopened as SCHEDULED or PAUSED (see "Coming back" on
// [Status]). Otherwise the error is a [*TransitionError] wrapping
// [ErrIllegalTransition].
func CheckTransition(prev, next *Period) error {
	if canTransition(prev.Status, next.Status) {
		return nil
	}
	if !reopens(prev, next) {
		return &TransitionError{From: prev.Status, To: next.Status}
	}
	if prev.Attempted() {
		return &TransitionError{From: prev.Status, To: next.Status,
			Reason: "only a cancelled period that was never attempted is reopened"}
	}
	return nil
}

// reopens reports whether writing prev as next reopens a cancelled period:
// prev is CANCELLED and next SCHEDULED or PAUSED. [CheckTransition]
// allows it only for a period never attempted.
func reopens(prev, next *Period) bool {
	return prev.Status == StatusCancelled && (next.Status == StatusScheduled || next.Status == StatusPaused)
}

// Attempted reports whether a collection attempt was ever made on the
// period, or may have been: it has an initial run date, a transaction ID,
// an attempt recorded or one made durable before the processor was
// called.
func (s *Period) Attempted() bool {
	return !s.InitialRunDate.IsZero() || s.TransactionID != "" || s.Attempt != 0 || s.LastAttempt.Number != 0
}

// TransitionError reports a status change the transition table forbids.
// It wraps [ErrIllegalTransition].
type TransitionError struct {
	From, To Status
	// Reason says why a change the table does not list was refused for
	// this record in particular ("" when the table alone refuses it).
	Reason string
}

// Error implements error.
func (e *TransitionError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%s: %s -> %s: %s", ErrIllegalTransition, e.From, e.To, e.Reason)
	}
	return fmt.Sprintf("%s: %s -> %s", ErrIllegalTransition, e.From, e.To)
}

// Unwrap returns [ErrIllegalTransition].
func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }
