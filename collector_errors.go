package billing

import (
	"errors"
	"fmt"
	"time"
)

// InFlightError reports an operation refused, or a record left alone,
// because the record's attempt [Period.LastAttempt] is in flight and
// its outcome could not be resolved. It wraps [ErrAttemptInFlight] and the
// reason the outcome is unknown.
type InFlightError struct {
	// SubscriptionID and Key identify the record and the attempt's
	// idempotency key; Amount is the amount it asked for.
	SubscriptionID string
	Key            string
	Amount         Amount
	// Started is when the attempt was recorded.
	Started time.Time
	// Err says why the outcome is unknown (the provider's error, or that
	// the processor's replay window has passed and it offers no lookup).
	Err error
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("%s: %s key %s (%s, started %s): %v", ErrAttemptInFlight, e.SubscriptionID, e.Key, e.Amount,
		e.Started.UTC().Format(time.RFC3339), e.Err)
}

// Unwrap returns [ErrAttemptInFlight] and the reason.
func (e *InFlightError) Unwrap() []error { return []error{ErrAttemptInFlight, e.Err} }

// refusal is a change refused for the status of the subscription or of
// one of its periods: nothing was written. It matches the change's own
// sentinel ([ErrPauseRefused], ...) and [ErrNotCollectible], and its
// message says what to do first.
type refusal struct {
	sentinel error
	msg      string
}

func (e *refusal) Error() string { return e.sentinel.Error() + ": " + e.msg }

// Unwrap returns the change's sentinel and [ErrNotCollectible].
func (e *refusal) Unwrap() []error {
	if e.sentinel == ErrNotCollectible {
		return []error{ErrNotCollectible}
	}
	return []error{e.sentinel, ErrNotCollectible}
}

// refusedSentinel is the sentinel of op's refusals: its own for a plan
// change, a pause and a resume, [ErrNotCollectible] for the others.
func refusedSentinel(op opName) error {
	switch op {
	case opChangeTier:
		return ErrPlanChangeRefused
	case opPause:
		return ErrPauseRefused
	case opResume:
		return ErrResumeRefused
	}
	return ErrNotCollectible
}

// refused returns op's refusal, the message formatted from format and args.
func refused(op opName, format string, args ...any) error {
	return &refusal{sentinel: refusedSentinel(op), msg: fmt.Sprintf(format, args...)}
}

// inFlightRefused adds op's own sentinel to err, an attempt in flight
// refusing op, with what to do: try again once the outcome is known.
// Any other error, and the error of an op without a sentinel of its own,
// is returned as it is.
func inFlightRefused(op opName, err error) error {
	s := refusedSentinel(op)
	if s == ErrNotCollectible || !errors.Is(err, ErrAttemptInFlight) {
		return err
	}
	return fmt.Errorf("%w: a payment of the subscription has no known outcome yet: try again once the processor "+
		"answers (the call resolves the payment first, as the next run does): %w", s, err)
}

// statusFix says what to do before op may act on a period in status st,
// a status op does not take: "" when nothing helps.
func statusFix(op opName, st Status) string {
	switch {
	case op == opResume && st != StatusPaused:
		return "it is not paused: nothing to resume"
	case st == StatusError:
		return "its charge was declined and is owed: collect it (Periods.Repay) or waive it (Periods.Waive) first"
	case st == StatusACHSent:
		return "its bank debit awaits settlement: try again once it settles"
	case st == StatusPaused:
		return "it is paused: resume it first (Collector.Resume, or Periods.Resume for this period)"
	case st.IsTerminal():
		return "it is closed: act on the subscription's open period (Collector.Subscription lists it)"
	}
	return ""
}
