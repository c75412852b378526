package billing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file is one record's path through a collection, top to bottom: the
// record (re-read under the user's lock) is resolved when an attempt is in
// flight, else checked, made durable as an attempt, presented to the
// processor, and its answer recorded with the next period's record.

// attempt collects cur (re-read under the user's lock) by proc for a single
// collection, observed as a record of its own (a run observes each record
// around its lock and calls attemptRecord).
func (c *Collector) attempt(ctx context.Context, proc Process, cur *Period, rep *Report) error {
	ctx, obs := c.tel.startRecord(ctx, singleRun(proc), proc, cur.UserID, cur.SubscriptionID)
	obs.err = c.attemptRecord(ctx, proc, cur, obs.rep)
	obs.end(ctx, rep)
	return obs.err
}

// attemptRecord collects cur (re-read under the user's lock) by proc. A
// record in flight is first resolved (see [Collector.resolve]); when its
// outcome stays unknown it is left alone, even past the stale threshold,
// and reported.
func (c *Collector) attemptRecord(ctx context.Context, proc Process, cur *Period, rep *Report) error {
	if cur.InFlight() {
		res, err := c.resolve(ctx, cur, rep)
		var unresolved *InFlightError
		if errors.As(err, &unresolved) {
			e := eventFor(EventAttemptUnresolved, cur, c.cfg.Clock.Now())
			e.Amount, e.Reason = unresolved.Amount, unresolved.Error()
			c.emit(ctx, e)
		}
		if err == nil {
			// A zero period attempted before the free path: resolved, it
			// is completed now rather than presented again.
			err = c.completeResolvedFree(ctx, proc, &res, rep)
		}
		// Resolved: the outcome is recorded; a declined one is retried by
		// the retry policy like any other.
		return err
	}
	now := c.cfg.Clock.Now()
	if c.staleable(proc, cur, now) {
		// Too old to collect, whatever the retry policy says.
		return c.markStale(ctx, proc, cur, now, rep)
	}
	if ok, why := c.eligible(proc, cur, now); !ok {
		rep.count(&rep.NotEligible)
		c.cfg.Logger.DebugContext(ctx, "billing: not eligible", "subscription_id", cur.SubscriptionID, "status", cur.Status, "why", why)
		return nil
	}
	if cur.InitialRunDate.IsZero() {
		// The outcome of a period's first attempt is written with its next
		// period: refuse before charging when that cannot be opened.
		if err := c.checkSuccessor(ctx, cur); err != nil {
			return fmt.Errorf("collect %s: %w", cur.SubscriptionID, err)
		}
	}
	if c.freeable(cur) {
		return c.completeFree(ctx, proc, cur, rep)
	}
	for try := 0; ; try++ {
		marked, err := c.charge(ctx, rep, func() (*Period, error) {
			return c.startAttempt(ctx, proc, cur, c.cfg.Clock.Now())
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrAttemptInFlight):
			rep.count(&rep.Unknown)
			return err
		case !errors.Is(err, ErrRateLimited):
			return err
		}
		// The processor refused the call before acting on it: withdraw the
		// attempt, so the record is as it was and nothing waits on a key
		// the processor never saw. Should that write fail, the attempt
		// stays in flight and its replay makes it.
		if werr := c.withdraw(ctx, marked, cur); werr != nil {
			return fmt.Errorf("%w; withdraw the attempt: %w", err, werr)
		}
		if try >= c.cfg.ProcessorBudget.RateLimitRetries {
			c.cfg.Logger.InfoContext(ctx, "billing: processor rate limit, record left for a later run",
				"subscription_id", cur.SubscriptionID, "tries", try+1)
			return nil
		}
	}
}

// withdraw writes cur back over marked, the record with the attempt the
// processor refused. marked is a copy: the caller's stays off the heap.
func (c *Collector) withdraw(ctx context.Context, marked Period, cur *Period) error {
	return c.cfg.Repository.SetAttempt(ctx, &marked, cur)
}

// resolve settles the attempt in flight on cur (re-read under the user's
// lock) before anything else may change the record: it replays the
// recorded request while the processor still knows its key, asks the
// processor through [PaymentLookup] when it offers that, and records the
// answer. It returns the record as stored afterwards, or an
// [*InFlightError] when the outcome stays unknown (nothing but the
// replay's time is written then). A record not in flight is returned as
// it is.
//
// A lookup that finds nothing counts the attempt as never made only once
// no request with its key can still be running: every presentation of
// the key is recorded before it is sent ([Attempt.LastPresented]), and
// the processor's [RequestTimeout] must have passed since the latest.
// Before that (a holder that lost its lease mid-call, a replay answered
// [ErrKeyInUse]) the attempt stays in flight.
func (c *Collector) resolve(ctx context.Context, cur *Period, rep *Report) (Period, error) {
	if !cur.InFlight() {
		return *cur, nil
	}
	// unknown leaves the attempt in flight; cause, the last answer, is
	// counted as unknown unless the processor only rate-limited it.
	unknown := func(cause, err error) error {
		if !errors.Is(cause, ErrRateLimited) {
			rep.count(&rep.Unknown)
		}
		return inFlightErr(cur, err)
	}
	lookup, canLookup := c.cfg.Provider.(PaymentLookup)
	var why error
	if w, ok := c.cfg.Provider.(ReplayWindow); ok && w.ReplayWindow() > 0 && c.cfg.Clock.Now().Sub(cur.LastAttempt.Started) > w.ReplayWindow() {
		why = fmt.Errorf("the processor's replay window (%v) has passed", w.ReplayWindow())
	} else {
		presented, err := c.charge(ctx, rep, func() (*Period, error) { // the replay
			s, err := c.represent(ctx, cur)
			return &s, err
		})
		var unresolved *InFlightError
		switch {
		case errors.Is(err, ErrRateLimited):
			why = err // the replay was refused: the first call's fate is still open
		case !errors.As(err, &unresolved):
			return presented, err
		default:
			why = unresolved.Err
		}
		if presented.InFlight() {
			cur = &presented // the record as stored, with the replay's time
		}
	}
	if errors.Is(why, ErrRateLimited) {
		// A lookup now would be refused too: ask again in a later run.
		return Period{}, unknown(why, why)
	}
	if !canLookup {
		return Period{}, unknown(why, fmt.Errorf("%w; the provider offers no lookup", why))
	}
	if err := checkLease(ctx); err != nil {
		return Period{}, err
	}
	a := cur.LastAttempt
	res, found, err := c.lookup(ctx, lookup, a.Request(cur), rep)
	if err != nil {
		return Period{}, unknown(err, fmt.Errorf("%w; lookup: %w", why, err))
	}
	if !found {
		timeout := c.requestTimeout()
		if since := c.cfg.Clock.Now().Sub(a.LastPresented()); since <= timeout {
			return Period{}, unknown(nil, fmt.Errorf("%w; the processor has no payment for the key yet, but the request sent %v ago may still be running (request timeout %v)",
				why, since.Round(time.Second), timeout))
		}
		// The processor has nothing for the key and no request for it can
		// still be running: the attempt is counted as made, and the next
		// one takes a fresh key.
		settled := cur.Clone()
		settled.Attempt = a.Number
		if err := c.cfg.Repository.SetAttempt(ctx, cur, &settled); err != nil {
			return Period{}, fmt.Errorf("settle attempt %d of %s (not found by the processor): %w", a.Number, cur.SubscriptionID, err)
		}
		c.cfg.Logger.InfoContext(ctx, "billing: attempt not found by the processor, settled", "subscription_id", cur.SubscriptionID, "key", a.Key)
		return settled, nil
	}
	return c.recordOutcome(ctx, cur, res, rep)
}

// requestTimeout is how long a request may run at the processor (see
// [RequestTimeout]).
func (c *Collector) requestTimeout() time.Duration {
	if rt, ok := c.cfg.Provider.(RequestTimeout); ok && rt.RequestTimeout() > 0 {
		return rt.RequestTimeout()
	}
	return DefaultRequestTimeout
}

// startAttempt makes attempt n of cur durable (the in-flight marker) and
// returns the record as stored with it. An amount the collector may not
// charge (see [Collector.chargeable]) is refused first: nothing is
// written, so nothing is presented to the processor.
func (c *Collector) startAttempt(ctx context.Context, proc Process, cur *Period, now time.Time) (*Period, error) {
	n := cur.Attempt + 1
	if err := c.chargeable(cur); err != nil {
		return nil, fmt.Errorf("attempt %d of %s not made: %w", n, cur.SubscriptionID, err)
	}
	marked := cur.Clone()
	marked.LastAttempt = Attempt{
		Number: n, Key: IdempotencyKey(cur.SubscriptionID, n), Amount: cur.Amount,
		Tier: cur.ReceiptTierName, Process: proc, Started: now.UTC(),
	}
	if err := c.cfg.Repository.SetAttempt(ctx, cur, &marked); err != nil {
		return nil, fmt.Errorf("record attempt %d of %s before the charge: %w", n, cur.SubscriptionID, err)
	}
	return &marked, nil
}

// chargeable checks the amount of cur against the collector's limits
// before an attempt to charge it is made: more than zero and at most
// [Config.MaxCharge] (a zero period is completed by the engine without a
// charge when [Config.AllowFreeTiers] is set, see [Collector.completeFree]). The record may
// have been written by anything (a batch, a reactivation copying the last
// amount, another program), so the limits checked when a price is set are
// checked again here. A refusal is a [*FieldError] on billing_amount
// naming the record's key, wrapping [ErrInvalidAmount].
func (c *Collector) chargeable(cur *Period) error {
	why := c.outOfLimits(cur.Amount)
	switch {
	case cur.Amount == 0:
		why = "zero is never presented to the processor (a free period is completed without it)"
	case cur.IsTrial():
		why = "a trial period is never charged (its first paid period is)"
	}
	if why != "" {
		return &FieldError{Field: "billing_amount", Value: cur.Amount.String(), Key: cur.Key(),
			Err: fmt.Errorf("%w: %s", ErrInvalidAmount, why)}
	}
	return nil
}

// represent records that the attempt in flight on cur is presented again
// (a replay) and returns the record as stored with the replay's time.
func (c *Collector) represent(ctx context.Context, cur *Period) (Period, error) {
	now := c.cfg.Clock.Now().UTC()
	if !now.After(cur.LastAttempt.Presented) {
		return *cur, nil // recorded at this instant already
	}
	replay := cur.Clone()
	replay.LastAttempt.Presented = now
	if err := c.cfg.Repository.SetAttempt(ctx, cur, &replay); err != nil {
		return Period{}, fmt.Errorf("record the replay of key %s before it: %w", cur.LastAttempt.Key, err)
	}
	return replay, nil
}

// charge presents an attempt to the processor and records its answer.
// Once the processor budget lets the call go and the lease is checked,
// mark makes the presentation durable (the attempt itself, or a replay's
// time) and returns the record as stored with it; the call follows at
// once, so no request with the key starts later than the time mark
// recorded. The lease is checked again before the call and before the
// outcome is written; a lost lease stops the collection and leaves the
// attempt in flight for the next holder to replay. With a shared budget
// ([ProcessorBudget.Shared]) the call is sent only if its token's
// one-second window is still open once mark has run; otherwise nothing is
// sent and the error wraps [ErrRateLimited].
//
// charge returns the record as last stored: the outcome recorded, or on
// an error the record as mark stored it (zero when mark did not run). A
// provider error is an [*InFlightError]: the outcome is unknown. A
// rate-limited answer is an error wrapping [ErrRateLimited]: the
// processor did nothing with the attempt.
func (c *Collector) charge(ctx context.Context, rep *Report, mark func() (*Period, error)) (Period, error) {
	done, end, err := c.pace.acquireCall(ctx)
	if err != nil {
		return Period{}, fmt.Errorf("waiting for the processor budget: %w", err)
	}
	if err := checkLease(ctx); err != nil {
		done()
		return Period{}, err
	}
	cur, err := mark() // a record of its own, not shared with the caller
	if err != nil {
		done()
		return Period{}, err
	}
	if c.pace.windowClosed(end) {
		done()
		rep.count(&rep.RateLimited)
		a := cur.LastAttempt
		return *cur, fmt.Errorf("attempt %d of %s (key %s) not made: %w", a.Number, cur.SubscriptionID, a.Key, errWindowClosed)
	}
	res, err := c.call(ctx, cur, rep)
	done()
	if err != nil {
		switch {
		case errors.Is(err, ErrRateLimited):
			a := cur.LastAttempt
			err = fmt.Errorf("attempt %d of %s (key %s) not made: %w", a.Number, cur.SubscriptionID, a.Key, err)
		case !errors.Is(err, ErrLeaseLost):
			err = inFlightErr(cur, err)
		}
		return *cur, err
	}
	if err := checkLease(ctx); err != nil {
		return *cur, fmt.Errorf("%s outcome of key %s not recorded: %w", res.Outcome, cur.LastAttempt.Key, err)
	}
	return c.recordOutcome(ctx, cur, res, rep)
}

// call presents the attempt recorded on cur to the provider once the lease
// is checked; the caller holds a turn of the processor budget. An error
// other than a lost lease or a rate-limited answer is the provider's: the
// outcome is unknown.
func (c *Collector) call(ctx context.Context, cur *Period, rep *Report) (PaymentResult, error) {
	if err := checkLease(ctx); err != nil {
		return PaymentResult{}, err
	}
	a := cur.LastAttempt
	rep.count(&rep.Attempted)
	start := time.Now()
	res, err := c.cfg.Provider.Collect(ctx, a.Request(cur))
	c.tel.providerCalled(ctx, a.Number, time.Since(start), res, err)
	c.paced(ctx, err, rep)
	return res, err
}

// paced tells the budget how the processor answered a call.
func (c *Collector) paced(ctx context.Context, err error, rep *Report) {
	var busy interface{ ProcessorThrottled() time.Duration }
	switch {
	case errors.Is(err, ErrRateLimited):
		rep.count(&rep.RateLimited)
		c.pace.slowShared(ctx, c.pace.limited(retryAfter(err)))
	case errors.As(err, &busy):
		// Rate-limited with the outcome unknown (see [PaymentProvider]).
		rep.count(&rep.RateLimited)
		c.pace.slowShared(ctx, c.pace.limited(busy.ProcessorThrottled()))
	case err == nil:
		c.pace.answered()
	}
}

// lookup asks the processor what became of req when the budget allows.
func (c *Collector) lookup(ctx context.Context, l PaymentLookup, req PaymentRequest, rep *Report) (PaymentResult, bool, error) {
	done, err := c.pace.acquire(ctx)
	if err != nil {
		return PaymentResult{}, false, fmt.Errorf("waiting for the processor budget: %w", err)
	}
	defer done()
	res, found, err := l.LookupPayment(ctx, req)
	c.paced(ctx, err, rep)
	return res, found, err
}

func inFlightErr(cur *Period, why error) error {
	a := cur.LastAttempt
	return &InFlightError{SubscriptionID: cur.SubscriptionID, Key: a.Key, Amount: a.Amount, Started: a.Started, Err: why}
}

// recordOutcome writes the provider's answer to the attempt in flight on
// cur, with the next period's record when this was the period's first
// attempt, in one transaction conditional on cur, and returns the record
// as written.
func (c *Collector) recordOutcome(ctx context.Context, cur *Period, res PaymentResult, rep *Report) (Period, error) {
	a := cur.LastAttempt
	now := c.cfg.Clock.Now()
	var create []*Period
	if cur.InitialRunDate.IsZero() {
		following, err := c.nextPeriod(ctx, a.Process, cur, now, rep)
		if err != nil {
			return Period{}, err
		}
		if following != nil {
			create = append(create, following)
		}
	}
	next, ev, err := outcome(cur, res, a.Process, a.Number, runTime(cur, now))
	if err != nil {
		return Period{}, err
	}
	next.Amount = a.Amount // what was asked for is what the answer is about
	for _, f := range create {
		f.LastRunDate = next.LastRunDate.Add(time.Nanosecond)
		f.CreatedDate = f.LastRunDate
	}
	err = c.write(ctx, ev, cur, &next, create)
	if errors.Is(err, ErrAlreadyExists) && len(create) > 0 {
		// The next period appeared meanwhile: record the outcome alone.
		err = c.write(ctx, ev, cur, &next, nil)
	}
	if err != nil {
		if IsConflict(err) {
			// Only a writer that ignored the attempt could have changed the
			// record; the answer stays with the processor, under its key.
			e := eventFor(EventUnrecorded, &next, next.LastRunDate)
			e.Reason = fmt.Sprintf("%s outcome of key %s not recorded: %v", res.Outcome, a.Key, err)
			c.emit(ctx, e)
		}
		return Period{}, fmt.Errorf("record %s outcome of %s: %w", res.Outcome, cur.SubscriptionID, err)
	}
	switch res.Outcome {
	case OutcomeSucceeded:
		rep.count(&rep.Collected)
	case OutcomePending:
		rep.count(&rep.Pending)
	case OutcomeDeclined:
		rep.count(&rep.Declined)
	}
	c.emit(ctx, eventFor(ev, &next, next.LastRunDate))
	return next, nil
}

// outcome applies a provider result to cur.
func outcome(cur *Period, res PaymentResult, proc Process, attempt int, at time.Time) (Period, EventType, error) {
	next := cur.Clone()
	next.Process = proc
	next.Attempt = attempt
	next.LastRunDate = at
	if next.InitialRunDate.IsZero() {
		next.InitialRunDate = at
	}
	if res.TransactionID != "" {
		next.TransactionID = res.TransactionID
	}
	if res.AccountMask != "" {
		next.ReceiptAccountMask = res.AccountMask
	}
	if res.PaymentType != "" {
		next.ReceiptPaymentType = res.PaymentType
	}
	var ev EventType
	switch res.Outcome {
	case OutcomeSucceeded:
		next.Status, next.CompletionDate, next.PaymentError, next.NoRetry = StatusCompleted, at, "", false
		ev = EventPaymentSucceeded
	case OutcomePending:
		next.Status, next.NoRetry = StatusACHSent, false
		ev = EventPaymentPending
	case OutcomeDeclined:
		next.Status, next.PaymentError, next.NoRetry = StatusError, res.DeclineReason, !res.Retryable
		if next.PaymentError == "" {
			next.PaymentError = "declined"
		}
		ev = EventPaymentDeclined
	default:
		return Period{}, "", fmt.Errorf("provider returned unknown outcome %v for %s", res.Outcome, cur.SubscriptionID)
	}
	return next, ev, nil
}

// historyKeyRetries bounds the rewrites of a write whose only failed
// condition was a taken history key.
const historyKeyRetries = 3

// write stores next (replacing cur) and the records in create. When only a
// history key was taken (another row of the user has that last_run_date:
// two writes of one user in the same instant), the record's condition held,
// so the write is repeated with later last_run_dates.
//
// next's history row records change ([Period.Change]), and each
// created record's its own change, or [EventPeriodOpened]. The changes
// are set for the write only: the records written, like those read back
// from the billing table, carry none.
func (c *Collector) write(ctx context.Context, change EventType, cur, next *Period, create []*Period) error {
	stampAttemptRequest(ctx, next) // an operator's retry ([Collector.RetryNow])
	next.Change = change
	for _, f := range create {
		if f.Change == "" {
			f.Change = EventPeriodOpened
		}
	}
	// One deferred reset for all: a defer in the loop would be allocated
	// per record.
	defer func() {
		next.Change = ""
		for _, f := range create {
			f.Change = ""
		}
	}()
	for i := 0; ; i++ {
		var err error
		if !next.BillingDate.Truncate(time.Second).Equal(cur.BillingDate.Truncate(time.Second)) {
			err = c.cfg.Repository.AdminUpdate(ctx, cur, next)
		} else {
			err = c.cfg.Repository.Update(ctx, cur, next, create...)
		}
		if !isHistoryKeyConflict(err) || i == historyKeyRetries {
			return err
		}
		next.LastRunDate = next.LastRunDate.Add(time.Duration(i+1) * time.Millisecond)
		for j, f := range create {
			f.LastRunDate = next.LastRunDate.Add(time.Duration(j+1) * time.Nanosecond)
			f.CreatedDate = f.LastRunDate
		}
	}
}

// runTime returns the last_run_date of a write after cur: now, or just
// after cur's when the clock is behind it (history rows need distinct,
// increasing keys). Records created in the same write take this time plus
// a few nanoseconds, so the next write of either record cannot collide.
func runTime(cur *Period, now time.Time) time.Time {
	if now.After(cur.LastRunDate) {
		return now.UTC()
	}
	return cur.LastRunDate.Add(time.Microsecond).UTC()
}
