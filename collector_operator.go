package billing

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// This file holds the calls an operator (a console, a support tool) makes
// on one period of a user: retry it now, waive it. Like the calls that
// take a user ([Collector.Cancel] and its siblings) they take a
// request key, so a form sent twice (a double click, the back button and a
// second submit) is one request: the repeat answers what the first call
// did, marked Repeated, and changes nothing more. [Periods.Repay]
// and [Periods.WaiveByID] stay for hosts that key requests themselves.

// PeriodRequest names one period of a user and the request of an
// operator's call on it ([Periods.Retry], [Periods.Waive]).
type PeriodRequest struct {
	// UserRequest is the user, the request key, and who asks and why
	// (Operator and Reason, recorded on the history row of the change).
	UserRequest
	// PeriodID is the period: a [Period.SubscriptionID] of the user.
	// A period of another user is not found. Required.
	PeriodID string
}

// RetryOutcome is what a retry of a period came to.
type RetryOutcome string

// The outcomes of [Periods.Retry].
const (
	// RetryCollected: the processor took the payment; the period is
	// COMPLETED.
	RetryCollected RetryOutcome = "collected"
	// RetryDeclined: the processor declined; the period is ERROR, with the
	// reason in PaymentError.
	RetryDeclined RetryOutcome = "declined"
	// RetryPending: an ACH debit awaits its settlement (ACHSENT).
	RetryPending RetryOutcome = "pending"
	// RetryRateLimited: the processor refused the call before acting on
	// it; nothing was charged and the period is as it was.
	RetryRateLimited RetryOutcome = "rate-limited"
	// RetryStale: the period was older than the stale threshold and was
	// given up on (STALE) instead of charged.
	RetryStale RetryOutcome = "stale"
	// RetryNotCharged: nothing was presented to the processor (a period
	// of zero completed without it).
	RetryNotCharged RetryOutcome = "not charged"
)

// RetryResult is what [Periods.Retry] did.
type RetryResult struct {
	// Outcome is what the retry came to.
	Outcome RetryOutcome
	// Period is the period after the retry; on a repeat, as the history
	// row of the first call recorded it.
	Period Period
	// Repeated reports that the request key had been answered before for
	// this same request: nothing was presented to the processor, and
	// Outcome and Period are the first call's.
	Repeated bool
	// Report counts the call's work, as [Periods.Repay]'s
	// report does; empty on a repeat.
	Report *Report
}

// Retry charges the user's period req.PeriodID now, whatever the
// retry policy says, as [Periods.Repay] does (process
// MANUAL_REPAYMENT, the legacy value of a charge asked for outside the
// runs): an ERROR period, or a SCHEDULED one that is due. It is an
// operator's call, keyed: the history row of the outcome records the
// request (with its Operator and Reason), and a repeat of the key with the
// same parameters answers the first call's outcome, Repeated set, without
// presenting anything to the processor, whatever that outcome was
// (collected, declined, pending). Operator and Reason are not compared: a
// repeat with a reason typed anew is the same request, and the row keeps
// the first. The key given again for another period, or first used for
// another call, is a [*RequestKeyError].
//
// A period whose attempt is in flight is not charged again: its attempt
// is resolved (its request replayed with the same idempotency key, or
// looked up), and the outcome is this call's, recorded with its request.
// So a form sent again while the first call's attempt is unresolved
// resolves that same attempt and never starts another; when it stays
// unknown the error is an [*InFlightError]. A call the processor refused
// before acting on it (rate limited) records nothing: its repeat tries
// again, as nothing was charged.
//
// It needs [Config.History] to read the requests back
// ([ErrInvalidRequest] without it). A period that is not ERROR or a due
// SCHEDULED one is refused with an error wrapping [ErrNotCollectible].
func (p *Periods) Retry(ctx context.Context, req PeriodRequest) (RetryResult, error) {
	c := p.c
	fail := func(err error) (RetryResult, error) {
		return RetryResult{}, fmt.Errorf("retry period %s of user %s: %w", req.PeriodID, req.UserID, err)
	}
	kr := newKeyedRequest("retry now", req.RequestKey).field("Period", req.PeriodID)
	if err := c.checkPeriodRequest(req); err != nil {
		return fail(err)
	}
	kr = withActor(kr, req.UserRequest)
	var out RetryResult
	rep, err := c.single(ctx, "retry now", req.UserID, req.PeriodID, func(ctx context.Context, rep *Report) error {
		first, ok, err := c.repeatOf(ctx, req, kr)
		if err != nil {
			return err
		}
		if ok {
			out = RetryResult{Outcome: retryOutcomeOf(&first), Period: first, Repeated: true}
			return nil
		}
		found, err := c.periodOf(ctx, req)
		if err != nil {
			return err
		}
		cur, err := c.reread(ctx, &found)
		if err != nil {
			return err
		}
		now := c.cfg.Clock.Now()
		if ok, why := c.eligible(ProcessManualRepayment, &cur, now); !ok && !c.staleable(ProcessManualRepayment, &cur, now) && !cur.InFlight() {
			return fmt.Errorf("%w: %s is %s: %s", ErrNotCollectible, req.PeriodID, cur.Status, why)
		}
		// Every row this attempt writes (its outcome, or a resolved
		// attempt's) records the request.
		actx := context.WithValue(ctx, attemptRequestKey{}, kr.encode())
		if err := c.attempt(actx, ProcessManualRepayment, &cur, rep); err != nil {
			return err
		}
		after, err := c.reread(ctx, &cur)
		if err != nil {
			return err
		}
		out = RetryResult{Outcome: retryOutcomeOfReport(rep, &after), Period: after}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if !out.Repeated {
		out.Report = rep
	}
	return out, nil
}

// Waive forgives the user's period req.PeriodID without payment
// (WAIVED), as [Periods.WaiveByID] does: a SCHEDULED or ERROR period; one
// never attempted opens the next period. It is an operator's call, keyed
// as the calls that take a user are (see [Collector.ChangePlan] for what
// they share): its history row records the request with its Operator and
// Reason, a repeat of the key with the same parameters answers the first
// call's change (Repeated set) and writes nothing, and the key given again
// with other parameters is a [*RequestKeyError]. An attempt in flight on
// any period of the user is resolved first, or the waive is refused
// ([*InFlightError]); a period the processor collected meanwhile refuses
// it ([ErrNotCollectible]).
func (p *Periods) Waive(ctx context.Context, req PeriodRequest) (UserChange, error) {
	c := p.c
	if err := c.checkPeriodRequest(req); err != nil {
		return UserChange{}, fmt.Errorf("waive period %s of user %s: %w", req.PeriodID, req.UserID, err)
	}
	kr := newKeyedRequest("waive", req.RequestKey).field("Period", req.PeriodID)
	return c.byUser(ctx, req.UserRequest, kr, opWaive, func(recs []Period, kr keyedRequest, _ time.Time) ([]Period, keyedRequest, error) {
		for _, r := range recs {
			if r.SubscriptionID == req.PeriodID {
				return []Period{r}, kr, nil // its status is checked by the call
			}
		}
		return nil, kr, fmt.Errorf("%w: user %s has no period %s", ErrNotFound, req.UserID, req.PeriodID)
	}, func(ctx context.Context, id string) (Change, error) { return c.Periods().WaiveByID(ctx, id) })
}

// checkPeriodRequest checks what needs no record: the identity, the
// actor, the period ID, and a history to read requests back from.
func (c *Collector) checkPeriodRequest(req PeriodRequest) error {
	if err := checkIdentity(SubscribeRequest{UserID: req.UserID, RequestKey: req.RequestKey}); err != nil {
		return err
	}
	if err := checkActor(req.UserRequest); err != nil {
		return err
	}
	if req.PeriodID == "" || len(req.PeriodID) > maxUserID || !utf8.ValidString(req.PeriodID) ||
		strings.ContainsFunc(req.PeriodID, unicode.IsControl) {
		return requestField("PeriodID", req.PeriodID, "1 to %d bytes of UTF-8 without control characters required", maxUserID)
	}
	if c.cfg.History == nil {
		return fmt.Errorf("%w: an operator's call reads its request back from the history: Config.History is required", ErrInvalidRequest)
	}
	return nil
}

// periodOf reads the period req names and checks that it is the user's:
// a period of another user is not found, as an unknown ID is.
func (c *Collector) periodOf(ctx context.Context, req PeriodRequest) (Period, error) {
	s, err := c.cfg.Repository.GetByID(ctx, req.PeriodID)
	if err != nil {
		return Period{}, err
	}
	if s.UserID != req.UserID {
		return Period{}, fmt.Errorf("%w: user %s has no period %s", ErrNotFound, req.UserID, req.PeriodID)
	}
	return s, nil
}

// repeatOf answers whether req's key was answered before: the period as
// the latest history row recording the key left it. The key recorded for
// a request with other parameters (another call among them) is a
// [*RequestKeyError].
func (c *Collector) repeatOf(ctx context.Context, req PeriodRequest, kr keyedRequest) (Period, bool, error) {
	rows, err := c.cfg.History.ListByUser(ctx, req.UserID)
	if err != nil {
		return Period{}, false, fmt.Errorf("read the history: %w", err)
	}
	first, done := firstRequest(rows, req.RequestKey)
	if first == nil {
		return Period{}, false, nil
	}
	if err := kr.reused(req.UserID, *first); err != nil {
		return Period{}, false, err
	}
	var last *Period
	for i := range done {
		if done[i].After.SubscriptionID == req.PeriodID {
			last = &done[i].After
		}
	}
	if last == nil {
		return Period{}, false, nil
	}
	return *last, true, nil
}

// retryOutcomeOf is the outcome a history row of a retry records.
func retryOutcomeOf(s *Period) RetryOutcome {
	switch s.Status {
	case StatusCompleted:
		if s.Attempt == 0 {
			return RetryNotCharged
		}
		return RetryCollected
	case StatusError:
		return RetryDeclined
	case StatusACHSent:
		return RetryPending
	case StatusStale:
		return RetryStale
	}
	return RetryNotCharged
}

// retryOutcomeOfReport is the outcome of a retry that made rep and left
// the period after.
func retryOutcomeOfReport(rep *Report, after *Period) RetryOutcome {
	switch {
	case rep.Collected > 0:
		return RetryCollected
	case rep.Declined > 0:
		return RetryDeclined
	case rep.Pending > 0:
		return RetryPending
	case rep.Stale > 0:
		return RetryStale
	case rep.RateLimited > 0:
		return RetryRateLimited
	}
	return retryOutcomeOf(after)
}

// checkActor checks a request's Operator and Reason.
func checkActor(ur UserRequest) error {
	for _, f := range []struct {
		name, value string
		breaks      bool
	}{{"Operator", ur.Operator, false}, {"Reason", ur.Reason, true}} {
		bad := func(r rune) bool { return unicode.IsControl(r) && !(f.breaks && (r == '\n' || r == '\r' || r == '\t')) }
		if len(f.value) > MaxActorLen || !utf8.ValidString(f.value) || strings.ContainsFunc(f.value, bad) {
			return requestField(f.name, f.value, "at most %d bytes of UTF-8 without control characters", MaxActorLen)
		}
	}
	return nil
}

// withActor records who asks and why with the request. They are not among
// its fields (a repeat is not compared on them): the same form sent again
// with its reason typed anew is the same request, and the rows keep the
// first call's.
func withActor(kr keyedRequest, ur UserRequest) keyedRequest {
	if ur.Operator != "" {
		kr = kr.set("operator", ur.Operator)
	}
	if ur.Reason != "" {
		kr = kr.set("reason", ur.Reason)
	}
	return kr
}

// stampRequest sets on next, a version to write, the request its history
// row records (text, as keyedRequest encodes it; "" for none) and who made
// it and why.
func stampRequest(next *Period, text string) {
	next.Request = text
	if kr, ok := parseKeyedRequest(text); ok {
		next.Operator, next.Reason = kr.get("operator"), kr.get("reason")
	}
}

// attemptRequestKey carries in the context of an operator's retry the
// request the rows of its attempt record ([Periods.Retry]).
type attemptRequestKey struct{}

// stampAttemptRequest sets the request of an operator's retry, when ctx
// carries one, on next, a version the retry writes.
func stampAttemptRequest(ctx context.Context, next *Period) {
	if text, ok := ctx.Value(attemptRequestKey{}).(string); ok {
		stampRequest(next, text)
	}
}

// Periods holds the calls an operator makes on one billing period by its
// ID: collect or retry it now, waive it, cancel it, move its date, pause or
// resume it, change its tier. A host acting for its users calls the
// by-user methods of [Collector] instead ([Periods.Cancel],
// [Periods.Pause], ...); these are for a support console or a script
// that has looked the period up. [Collector.Periods] returns it.
type Periods struct{ c *Collector }

// Periods returns the operator's calls on single periods.
func (c *Collector) Periods() *Periods { return &Periods{c: c} }
