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
	if obs.rep.Declined > 0 {
		c.afterDecline(ctx, cur)
	}
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
	if c.cfg.Dunning != nil && heldProcess(proc) {
		owed, err := c.owedBefore(ctx, cur)
		if err != nil {
			return fmt.Errorf("collect %s: read the user's earlier periods: %w", cur.SubscriptionID, err)
		}
		if owed != nil {
			rep.count(&rep.NotEligible)
			c.cfg.Logger.DebugContext(ctx, "billing: held while an earlier period is owed", "subscription_id", cur.SubscriptionID,
				"owed_subscription_id", owed.SubscriptionID)
			return nil
		}
	}
	if cur.InitialRunDate.IsZero() {
		// The outcome of a period's first attempt is written with its next
		// period: refuse before charging when that cannot be opened.
		if err := c.checkSuccessor(ctx, cur); err != nil {
			return fmt.Errorf("collect %s: %w", cur.SubscriptionID, err)
		}
	}
	// The tax is fixed before anything else is decided (a copy of cur with
	// it, written with the attempt or the completion): the balance pays
	// the taxed total, and the invoice is numbered with it.
	stored := cur
	cur, err := c.fixTax(ctx, cur)
	if err != nil {
		return fmt.Errorf("attempt %d of %s not made: %w", stored.Attempt+1, stored.SubscriptionID, err)
	}
	if c.freeable(cur) {
		return c.completeTaxedFree(ctx, proc, stored, cur, rep)
	}
	if err := c.chargeable(cur); err != nil {
		return fmt.Errorf("attempt %d of %s not made: %w", cur.Attempt+1, cur.SubscriptionID, err)
	}
	// The invoice the charge pays is decided (and numbered) before the
	// attempt is recorded: the attempt names it, and so does every replay.
	inv, err := c.invoice(ctx, cur)
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		marked, err := c.charge(ctx, rep, func() (*Period, error) {
			return c.startAttempt(ctx, proc, stored, cur, &inv, c.cfg.Clock.Now())
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
		// attempt, so the record is as it was (without a tax fixed for it:
		// the next run asks again) and nothing waits on a key the
		// processor never saw. Should that write fail, the attempt stays
		// in flight and its replay makes it.
		if werr := c.withdraw(ctx, marked, stored); werr != nil {
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
// returns the record as stored with it. stored is the record as read: cur
// itself, or cur without the tax fixed for this attempt ([Collector.fixTax]),
// which the same write stores. An amount the collector may not charge
// (see [Collector.chargeable]) is refused first: nothing is written, so
// nothing is presented to the processor.
func (c *Collector) startAttempt(ctx context.Context, proc Process, stored, cur *Period, inv *Invoice, now time.Time) (*Period, error) {
	n := cur.Attempt + 1
	if err := c.chargeable(cur); err != nil {
		return nil, fmt.Errorf("attempt %d of %s not made: %w", n, cur.SubscriptionID, err)
	}
	due, _, _ := cur.Due()
	marked := cur.Clone()
	marked.LastAttempt = Attempt{
		Number: n, Key: IdempotencyKey(cur.SubscriptionID, n), Amount: due,
		Tier: cur.ReceiptTierName, Process: proc, Started: now.UTC(),
		Invoice: inv.ID, InvoiceNumber: inv.Number,
	}
	if err := c.cfg.Repository.SetAttempt(ctx, stored, &marked); err != nil {
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
	if err := cur.checkAdjustments(); err != nil {
		return &FieldError{Field: "billing_adjustments", Key: cur.Key(), Err: err}
	}
	due, _, _ := cur.Due()
	why := c.outOfLimits(due)
	switch {
	case due == 0:
		why = "zero is never presented to the processor (a free period is completed without it)"
	case cur.IsTrial():
		why = "a trial period is never charged (its first paid period is)"
	}
	if why != "" {
		return &FieldError{Field: "billing_amount", Value: due.String(), Key: cur.Key(),
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
			carryTo(following, cur, carryCharged)
			create = append(create, following)
		}
	}
	next, ev, err := outcome(cur, res, a.Process, a.Number, runTime(cur, now))
	if err != nil {
		return Period{}, err
	}
	ended := c.dunningMove(cur, &next, a.Process, declineKindOf(&res), res.ActionURL, next.LastRunDate)
	if !cur.charged() && !cur.Tax.Fixed() {
		// What was asked for is what the answer is about; a charge with
		// more than its plan (a tax added) keeps its plan's amount.
		next.Amount = a.Amount
	}
	for _, f := range create {
		f.LastRunDate = next.LastRunDate.Add(time.Nanosecond)
		f.CreatedDate = f.LastRunDate
	}
	err = c.write(ctx, ev, cur, &next, create)
	if errors.Is(err, ErrAlreadyExists) && len(create) > 0 {
		// The next period appeared meanwhile: record the outcome alone.
		create = nil
		err = c.writeRecord(ctx, ev, cur, &next, nil)
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
	if ended {
		c.emitDunningEnded(ctx, &next)
	}
	c.emitBalance(ctx, cur, create, next.LastRunDate)
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
		next.Status, next.PaymentError, next.NoRetry = StatusError, res.DeclineReason, !res.Retryable || declineKindOf(&res) == DeclineHard
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
	if err := c.invoiceFollows(ctx, cur, next); err != nil {
		return err
	}
	return c.writeRecord(ctx, change, cur, next, create)
}

// writeRecord is [Collector.write] once the period's invoices follow the
// change: a write made again with fewer records to create.
func (c *Collector) writeRecord(ctx context.Context, change EventType, cur, next *Period, create []*Period) error {
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

// Reasons a retry run leaves an ERROR record alone (runPlan.Reason).
const (
	reasonNotError      = "not an ERROR record"
	reasonDeclinedFinal = "declined as final"
	reasonRetryNotNow   = "retry policy: not now"
)

// eligible reports whether cur may be attempted by proc at now, and why not.
func (c *Collector) eligible(proc Process, cur *Period, now time.Time) (bool, string) {
	// A one-off charge is due from the instant it was made.
	due := cur.DueAt(now) || cur.IsOneOff() && !cur.BillingDate.After(now)
	switch proc {
	case ProcessInitial:
		return cur.Status == StatusScheduled && due, "not SCHEDULED and due"
	case ProcessRetry:
		switch {
		case cur.Status != StatusError:
			return false, reasonNotError
		case cur.NoRetry:
			return false, reasonDeclinedFinal
		}
		if c.cfg.Dunning != nil {
			return c.retryDue(cur, now), reasonRetryNotNow
		}
		return c.cfg.RetryPolicy.ShouldRetry(cur, now), reasonRetryNotNow
	case ProcessWebhook, ProcessWebhookBalance, ProcessBatch:
		ok := due && (cur.Status == StatusScheduled || (cur.Status == StatusError && !cur.NoRetry && c.dunningRetries(cur)))
		return ok, "not a due SCHEDULED or retryable ERROR record"
	case ProcessManualRepayment:
		return cur.Status == StatusError || (cur.Status == StatusScheduled && due), "not ERROR or a due SCHEDULED record"
	}
	return false, "process " + string(proc) + " does not collect"
}

// staleable reports whether proc should mark cur STALE: a SCHEDULED or
// ERROR record older than the threshold, found by a collecting process.
func (c *Collector) staleable(proc Process, cur *Period, now time.Time) bool {
	if cur.Status != StatusScheduled && cur.Status != StatusError {
		return false
	}
	switch proc {
	case ProcessInitial, ProcessRetry, ProcessWebhook, ProcessWebhookBalance, ProcessBatch, ProcessManualRepayment:
		return c.stale(cur, now)
	}
	return false
}

// stale reports whether cur is older than the stale threshold.
func (c *Collector) stale(cur *Period, now time.Time) bool {
	return now.Sub(cur.BillingDate) > c.staleAge()
}

// laterKey carries in a collection's context the user's records after the
// one being handled, as read under the user's lock (see
// [Collector.readLatest]).
type laterKey struct{}

// laterRead is the records of a user after the record keyed userID and
// billingDate, newest first.
type laterRead struct {
	userID      string
	billingDate time.Time
	later       []Period
	earlier     []Period   // the user's records before it the same read returned
	unread      unreadable // the user's records the read skipped
}

// laterCtx is the context readLatest returns: its parent with the
// laterRead. It holds the context of the read too (un), so that one
// allocation serves both.
type laterCtx struct {
	context.Context
	lr laterRead
	un unreadableCtx // the read's context, see [collectUnreadable]
}

// Value returns the laterRead (a *laterRead) for laterKey, else the
// parent's value.
func (c *laterCtx) Value(key any) any {
	if key == any(laterKey{}) {
		return &c.lr
	}
	return c.Context.Value(key)
}

// readDepth is how many of a user's latest records readLatest reads: the
// record a run found is nearly always the user's latest (its first
// attempt) or the one before (a retry, once the next period is open).
const readDepth = 2

// readLatest reads the record it a run found (indexes are eventually
// consistent) under the user's lock together with the user's latest
// records, in one consistent read of the user's newest ones: when the
// record is among them, the same read shows every record after it, so
// opening the next period costs no query of its own (the context returned
// carries them). A record older than those is read by its key.
// [ErrNotFound] when the record is gone.
func (c *Collector) readLatest(ctx context.Context, it *Period) (*Period, context.Context, error) {
	lc := &laterCtx{Context: ctx, un: unreadableCtx{Context: ctx, report: invalidReporterOf(ctx)}}
	recent, err := c.cfg.Repository.Recent(&lc.un, it.UserID, readDepth)
	if err != nil {
		return nil, ctx, fmt.Errorf("read %s: %w", it.SubscriptionID, err)
	}
	for i := range recent {
		if r := &recent[i]; r.SubscriptionID == it.SubscriptionID && sameSecond(r.BillingDate, it.BillingDate) {
			lc.lr = laterRead{userID: r.UserID, billingDate: r.BillingDate, later: recent[:i:i], earlier: recent[i+1:], unread: lc.un.u}
			return &recent[i], lc, nil // the read's own copy: no other holds it
		}
	}
	cur, err := c.cfg.Repository.Get(ctx, it.UserID, it.BillingDate)
	return &cur, ctx, err
}

func sameSecond(a, b time.Time) bool { return a.Truncate(time.Second).Equal(b.Truncate(time.Second)) }

// later returns the user's records after cur, and those of the user the
// same read skipped (see [unreadable]): read under the lock when the
// context carries them, else by a read of the user's records.
func (c *Collector) later(ctx context.Context, cur *Period) ([]Period, unreadable, error) {
	if lr, ok := ctx.Value(laterKey{}).(*laterRead); ok && lr.userID == cur.UserID && sameSecond(lr.billingDate, cur.BillingDate) {
		return lr.later, lr.unread, nil
	}
	rctx, unread := collectUnreadable(ctx)
	all, err := c.cfg.Repository.ListByUser(rctx, cur.UserID)
	if err != nil {
		return nil, nil, err
	}
	var later []Period
	for _, r := range all {
		if r.BillingDate.After(cur.BillingDate) {
			later = append(later, r)
		}
	}
	return later, *unread, nil
}

// earlierOf returns the user's records before cur as the read under the
// lock returned them (at most readDepth-1, most recent first), when ctx
// carries that read.
func earlierOf(ctx context.Context, cur *Period) ([]Period, bool) {
	if lr, ok := ctx.Value(laterKey{}).(*laterRead); ok && lr.userID == cur.UserID && sameSecond(lr.billingDate, cur.BillingDate) {
		return lr.earlier, true
	}
	return nil, false
}

// followingDate is the billing date of the period after cur by its
// schedule; a pause counts months, whatever the term (see advancePause).
func followingDate(cur *Period) (time.Time, error) {
	if cur.IsTrial() {
		return cur.TrialEnd, nil // the first paid period
	}
	if cur.Status == StatusPaused {
		return cur.Schedule().AfterPause(cur.BillingDate, 1)
	}
	return cur.Schedule().Next(cur.BillingDate)
}

// unreadableSuccessor refuses to open the period after a record, billed
// on first by its schedule, while a record of the user that cannot be
// read may be that period or one after it: opening another could bill the
// period twice.
func unreadableSuccessor(unread unreadable, first time.Time) error {
	return unread.refuse("its next period or a later one", func(d time.Time, _ Status) bool {
		return d.IsZero() || !d.Before(first.Add(-successorSlack))
	})
}

// checkSuccessor returns the error nextPeriod will give for cur because
// of a record of the user that cannot be read, asked before cur is
// charged so that nothing is charged whose next period could not be
// opened.
func (c *Collector) checkSuccessor(ctx context.Context, cur *Period) error {
	if cur.IsOneOff() {
		return nil // no period follows a one-off charge
	}
	_, unread, err := c.later(ctx, cur)
	if err != nil || len(unread) == 0 {
		return err
	}
	first, err := followingDate(cur)
	if err != nil {
		return nil // nextPeriod reports the date
	}
	return unreadableSuccessor(unread, first)
}

// maxSkippedPeriods bounds the periods nextPeriod skips for a record too
// old to collect: weekly periods over two centuries.
const maxSkippedPeriods = 200 * 53

// successorSlack is how far from the next billing date a later record of
// the user may be and still be that next period (another writer's time of
// day, a batch write's hour).
const successorSlack = 24 * time.Hour

// nextPeriod returns the next period's SCHEDULED record for cur, or nil
// when the user has it already: a later SCHEDULED or PAUSED record within
// a day of the next billing date (or, for a record too old to collect, of
// any billing date from its next one to the first not too old to collect,
// where the new record goes), or a record of another status on or
// after that created with or after cur (the periods went on; one created
// before cur is of the life before a reactivation). A later record of another status
// before it is not a period of its own but a record written beside cur (a
// batch write moves a non-SCHEDULED record sharing cur's date an hour on,
// for one): it must not stop the subscription. Nor does a later SCHEDULED
// or PAUSED record at another date, which is neither cur nor its successor
// (a second plan another service wrote): it is reported (an
// [EventUnexpectedRecord], counted in rep when rep is not nil) and the
// next period is opened all the same. The new record's creation is
// conditional on its key being free, which also finds a next period
// written after the user's records were read. A record of the user that
// cannot be read and may be the next period or a later one refuses it
// (see [unreadableSuccessor]).
func (c *Collector) nextPeriod(ctx context.Context, proc Process, cur *Period, now time.Time, rep *Report) (*Period, error) {
	if cur.IsOneOff() {
		return nil, nil // a one-off charge is no period of the schedule
	}
	later, unread, err := c.later(ctx, cur)
	if err != nil {
		return nil, fmt.Errorf("look for the next period of %s: %w", cur.SubscriptionID, err)
	}
	date, err := followingDate(cur)
	if err == nil {
		if uerr := unreadableSuccessor(unread, date); uerr != nil {
			return nil, fmt.Errorf("open the period after %s: %w", cur.SubscriptionID, uerr)
		}
	}
	first := date
	// A record too old to collect (marked stale) goes on at the first
	// billing date at least staleMargin newer than the stale limit, in one
	// step: however long the subscription went unattended, one run reopens
	// it, and a run within a day still collects the period it opened.
	for n := 0; err == nil && cur.Status != StatusPaused && date.Before(c.oldestSettable(now)); n++ {
		if n == maxSkippedPeriods {
			err = fmt.Errorf("%w: more than %d periods behind", ErrInvalidDate, maxSkippedPeriods)
			break
		}
		date, err = cur.Schedule().Next(date)
	}
	if err != nil {
		return nil, fmt.Errorf("next billing date of %s: %w", cur.SubscriptionID, err)
	}
	var unexpected []Period
	for _, l := range later {
		if l.IsOneOff() {
			continue // a charge made beside the periods, not one of them
		}
		open := l.Status == StatusScheduled || l.Status == StatusPaused
		from := !l.BillingDate.Before(first.Add(-successorSlack))
		switch {
		case !open && !l.CreatedDate.IsZero() && l.CreatedDate.Before(cur.CreatedDate):
			// Older than cur: a period of the subscription's life before
			// it was reactivated on cur (a cancelled or waived period
			// later than cur), not one it went on to.
		case open && from && !l.BillingDate.After(date.Add(successorSlack)):
			return nil, nil // the next period
		case !open && from:
			return nil, nil // a period at or after the next one: the subscription went on
		case open:
			unexpected = append(unexpected, l)
		}
	}
	for _, u := range unexpected {
		if rep != nil {
			rep.count(&rep.Unexpected)
		}
		e := eventFor(EventUnexpectedRecord, &u, now)
		e.Reason = fmt.Sprintf("%s record %s (%s) is neither %s nor its next period on %s; not taken for it",
			u.Status, u.SubscriptionID, u.Key(), cur.SubscriptionID, date.UTC().Format(time.RFC3339))
		c.cfg.Logger.WarnContext(ctx, "billing: unexpected open record", "user_id", u.UserID, "subscription_id", u.SubscriptionID, "reason", e.Reason)
		c.emit(ctx, e)
	}
	f := &Period{
		UserID: cur.UserID, BillingDate: date, SubscriptionID: c.cfg.NewID(), Amount: cur.Amount,
		Status: StatusScheduled, BillingPeriod: BillingPeriod(date), Process: proc, Term: cur.Term,
		AnchorDay: cur.EffectiveAnchorDay(), BillingWeek: cur.BillingWeek, Interval: cur.Interval, ReceiptTierName: cur.ReceiptTierName,
		CreatedDate: now, LastRunDate: now,
	}
	if f.Term == "" {
		f.Term = TermMonthly
	}
	if cur.IsPendingDowngrade && cur.PendingTierName != "" {
		f.ReceiptTierName, f.Amount = cur.PendingTierName, cur.PendingAmount
	}
	if cur.IsTrial() {
		f.Amount, f.Change, f.UpdatedEvent = cur.TrialAmount, EventTrialConverted, UpdatedTrialConverted
		f.AfterTrial = true // the marker no later write of updated_event replaces
	}
	return f, nil
}

// markStale moves a record too old to collect to STALE. A record that was
// never attempted also opens the next period, so the subscription goes on.
func (c *Collector) markStale(ctx context.Context, proc Process, cur *Period, now time.Time, rep *Report) error {
	next := cur.Clone()
	next.Status = StatusStale
	next.Process = proc
	next.LastRunDate = runTime(cur, now)
	next.CompletionDate = next.LastRunDate
	var create []*Period
	if cur.InitialRunDate.IsZero() {
		following, err := c.nextPeriod(ctx, proc, cur, now, rep)
		if err != nil {
			return err
		}
		if following != nil {
			carryTo(following, cur, carryForgiven)
			following.LastRunDate = next.LastRunDate.Add(time.Nanosecond)
			following.CreatedDate = following.LastRunDate
			create = append(create, following)
		}
	}
	if err := c.write(ctx, EventStale, cur, &next, create); err != nil {
		return fmt.Errorf("mark %s stale: %w", cur.SubscriptionID, err)
	}
	rep.count(&rep.Stale)
	e := eventFor(EventStale, &next, next.LastRunDate)
	e.Reason = fmt.Sprintf("older than %d days", c.cfg.OldSubscriptionDays)
	c.emit(ctx, e)
	return nil
}

// advancePause moves a PAUSED record past due to PAUSED_SKIPPED and opens
// the next period: PAUSED with one month fewer, or SCHEDULED (pause-resume)
// when the pause is over.
//
// A pause counts calendar months on every term, so each PAUSED record
// stands for one month: the record opened after it is one month later
// (anchor day and Friday week kept), for a yearly plan too. A yearly plan
// paused for N months on billing date D thus goes through PAUSED records
// on D, D+1, …, D+N-1 months and is charged again on D+N months (see
// [Schedule.AfterPause]); its yearly schedule goes on from that date.
//
// A trial period paused before it was completed (a pause asked during a
// trial) is not a month of the pause: it opens the first paid period on
// the trial's end PAUSED for all the months, so that period is charged
// months months after the trial's end.
func (c *Collector) advancePause(ctx context.Context, cur *Period, rep *Report) error {
	now := c.cfg.Clock.Now()
	if c.planRecord(RunPause, cur, now).Action != planAdvancePause {
		rep.count(&rep.NotEligible)
		return nil
	}
	next := cur.Clone()
	next.Status = StatusPausedSkipped
	next.UpdatedEvent = UpdatedPauseSkipped
	next.Process = ProcessPause
	next.LastRunDate = runTime(cur, now)
	var create []*Period
	following, err := c.nextPeriod(ctx, ProcessPause, cur, now, rep)
	if err != nil {
		return err
	}
	if following != nil {
		carryTo(following, cur, carryDeferred)
		following.LastRunDate = next.LastRunDate.Add(time.Nanosecond)
		following.CreatedDate = following.LastRunDate
		left := cur.PauseDurationMonths - 1
		if cur.IsTrial() {
			// A trial paused before it was completed: its period is no
			// month of the pause (nothing was to be charged on it). The
			// first paid period opens on the trial's end paused for every
			// month, so the pause pushes the first charge by its months.
			left = cur.PauseDurationMonths
		}
		if left > 0 {
			following.Status = StatusPaused
			following.PauseDurationMonths = left
			if left == 1 {
				following.UpdatedEvent = UpdatedPausePendingResume
			}
		} else {
			following.UpdatedEvent = UpdatedPauseResume
		}
		create = append(create, following)
	}
	if err := c.write(ctx, EventPauseMonthSkipped, cur, &next, create); err != nil {
		return fmt.Errorf("advance paused %s: %w", cur.SubscriptionID, err)
	}
	rep.count(&rep.Advanced)
	return nil
}

// This file is the free path: a period whose amount is zero (a free tier,
// a trial, a full discount) is completed by the engine itself, without an
// attempt, a key or a call to the processor.

// freeable reports whether cur, not in flight, is a zero-amount period the
// engine completes by itself: a trial always, whatever amount a batch of
// the host's may have written on it (a trial is never charged: its price
// is TrialAmount, the first paid period's), any other when
// [Config.AllowFreeTiers] is set. Any
// other zero record is refused before a charge as an amount out of limits
// (see [Collector.chargeable]).
func (c *Collector) freeable(cur *Period) bool {
	if cur.InFlight() {
		return false
	}
	due, _, _ := cur.Due()
	return cur.IsTrial() || due == 0 && (c.cfg.AllowFreeTiers || cur.Amount > 0)
}

// completeFree completes cur, a zero-amount period eligible for proc (read
// under the user's lock), in one write conditional on cur with its history
// row ([EventFreePeriodCompleted]), and opens the next period as a paid
// collection does. The attempt counter is not touched: no key is used.
func (c *Collector) completeFree(ctx context.Context, proc Process, cur *Period, rep *Report) error {
	return c.completeTaxedFree(ctx, proc, cur, cur, rep)
}

// completeTaxedFree is [Collector.completeFree] of taxed, cur with the tax
// fixed for its charge (which the customer's balance pays in full), or cur
// itself: the write is conditional on cur and stores taxed.
func (c *Collector) completeTaxedFree(ctx context.Context, proc Process, cur, taxed *Period, rep *Report) error {
	if err := c.coveredInvoice(ctx, taxed); err != nil {
		return err
	}
	now := c.cfg.Clock.Now()
	next := taxed.Clone()
	at := runTime(cur, now)
	next.Status, next.Process, next.LastRunDate, next.CompletionDate = StatusCompleted, proc, at, at
	next.PaymentError, next.NoRetry = "", false
	if next.InitialRunDate.IsZero() {
		next.InitialRunDate = at
	}
	var create []*Period
	if cur.InitialRunDate.IsZero() {
		following, err := c.nextPeriod(ctx, proc, cur, now, rep)
		if err != nil {
			return err
		}
		if following != nil {
			carryTo(following, taxed, carryCharged)
			following.LastRunDate = at.Add(1)
			following.CreatedDate = following.LastRunDate
			create = append(create, following)
		}
	}
	ev := EventFreePeriodCompleted
	if cur.IsTrial() {
		ev = EventTrialEnded
	}
	err := c.write(ctx, ev, cur, &next, create)
	if errors.Is(err, ErrAlreadyExists) && len(create) > 0 {
		create = nil // the next period appeared meanwhile
		err = c.writeRecord(ctx, ev, cur, &next, nil)
	}
	if err != nil {
		return fmt.Errorf("complete free period %s: %w", cur.SubscriptionID, err)
	}
	rep.count(&rep.Free)
	c.emit(ctx, eventFor(ev, &next, next.LastRunDate))
	c.emitBalance(ctx, cur, create, next.LastRunDate)
	if cur.IsTrial() && len(create) > 0 {
		c.emit(ctx, eventFor(EventTrialConverted, create[0], next.LastRunDate))
	}
	return nil
}

// completeResolvedFree completes a zero-amount record whose attempt (made
// before the engine had a free path) was just resolved: declined, or found
// never made. A record the resolution completed needs nothing more.
func (c *Collector) completeResolvedFree(ctx context.Context, proc Process, res *Period, rep *Report) error {
	if !c.freeable(res) || (res.Status != StatusScheduled && res.Status != StatusError) {
		return nil
	}
	return c.completeFree(ctx, proc, res, rep)
}

// CollectUser collects every collectible record of a user that is due, oldest
// first, under one hold of the user's lock: what an income event (WEBHOOK)
// or a new-account balance event (WEBHOOK_BALANCE) triggers. A held lock is
// an error wrapping [ErrAlreadyLocked]; the caller's queue retries later.
func (c *Collector) CollectUser(ctx context.Context, userID string, proc Process) (*Report, error) {
	if proc != ProcessWebhook && proc != ProcessWebhookBalance && proc != ProcessBatch {
		return nil, fmt.Errorf("%w: CollectUser with process %q", ErrInvalidQuery, proc)
	}
	return c.single(ctx, string(proc), userID, "", func(ctx context.Context, rep *Report) error {
		recs, err := c.cfg.Repository.ListByUser(ctx, userID)
		if err != nil {
			return err
		}
		var errs []error
		for i := range recs {
			now := c.cfg.Clock.Now()
			if ok, _ := c.eligible(proc, &recs[i], now); !ok && !c.staleable(proc, &recs[i], now) && !recs[i].InFlight() {
				continue
			}
			if err := c.attempt(ctx, proc, &recs[i], rep); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// Collect collects one record by subscription ID (BATCH): the batch
// worker's operation. A record that is not a due SCHEDULED or retryable
// ERROR record is an error wrapping [ErrNotCollectible].
func (p *Periods) Collect(ctx context.Context, subscriptionID string) (*Report, error) {
	c := p.c
	return c.collectOne(ctx, ProcessBatch, subscriptionID)
}

// Repay collects one ERROR (or due SCHEDULED) record at the
// user's request (MANUAL_REPAYMENT, the POST .../pay endpoint), whatever
// the retry policy says.
func (p *Periods) Repay(ctx context.Context, subscriptionID string) (*Report, error) {
	c := p.c
	return c.collectOne(ctx, ProcessManualRepayment, subscriptionID)
}

func (c *Collector) collectOne(ctx context.Context, proc Process, subscriptionID string) (*Report, error) {
	found, err := c.cfg.Repository.GetByID(ctx, subscriptionID)
	if err != nil {
		return nil, c.periodIDHint(ctx, subscriptionID, err)
	}
	rep, err := c.single(ctx, string(proc), found.UserID, subscriptionID, func(ctx context.Context, rep *Report) error {
		cur, err := c.reread(ctx, &found)
		if err != nil {
			return err
		}
		if ok, why := c.eligible(proc, &cur, c.cfg.Clock.Now()); !ok && !c.staleable(proc, &cur, c.cfg.Clock.Now()) && !cur.InFlight() {
			return fmt.Errorf("%w: %s is %s: %s", ErrNotCollectible, subscriptionID, cur.Status, why)
		}
		return c.attempt(ctx, proc, &cur, rep)
	})
	// Refusals before an attempt are outcomes too: count and trace them.
	switch {
	case errors.Is(err, ErrAlreadyLocked):
		c.observeRefusal(ctx, proc, found.UserID, subscriptionID, func(r *Report) { r.SkippedLocked++ })
	case errors.Is(err, ErrNotCollectible):
		c.observeRefusal(ctx, proc, found.UserID, subscriptionID, func(r *Report) { r.NotEligible++ })
	}
	return rep, err
}

// observeRefusal records the telemetry of a single collection refused
// before any attempt (the user's lock held, the record not collectible).
func (c *Collector) observeRefusal(ctx context.Context, proc Process, userID, subID string, count func(*Report)) {
	ctx, obs := c.tel.startRecord(ctx, singleRun(proc), proc, userID, subID)
	count(obs.rep)
	obs.end(ctx, &Report{})
}

// single runs fn under userID's lock and returns its report; unlike a run,
// a held lock or a failure is returned as the error.
func (c *Collector) single(ctx context.Context, kind, userID, subID string, fn func(ctx context.Context, rep *Report) error) (*Report, error) {
	rep := &Report{Kind: kind, Started: c.cfg.Clock.Now()}
	defer func() { rep.Finished = c.cfg.Clock.Now() }()
	lease, err := c.lock(ctx, userID)
	if err != nil {
		if errors.Is(err, ErrAlreadyLocked) {
			rep.SkippedLocked++
		}
		return rep, err
	}
	err = func() (err error) {
		// Released on every exit, a panic of the host's code included (see
		// [PanicError]): nothing a provider does leaves the user locked.
		defer func() {
			if rerr := c.release(ctx, lease); rerr != nil {
				// The work is done (or failed on its own); the caller learns
				// that the lock may stay held until it expires.
				err = errors.Join(err, rerr)
			}
		}()
		defer recoverPanic(ctx, c.cfg.Logger, userID, &err)
		ctx = withLease(ctx, lease)
		ctx = c.reportInvalid(ctx, kind, userID, rep)
		return fn(ctx, rep)
	}()
	if err != nil {
		if IsConflict(err) {
			rep.Conflicts++
		}
		rep.Failed = append(rep.Failed, ItemFailure{UserID: userID, SubscriptionID: subID, Reason: err.Error()})
		return rep, err
	}
	return rep, nil
}

// reread reads found again under the user's lock: a consistent read of its
// key (one call), or, when it has moved since (an admin change of its
// billing date) or its key is not in the canonical form, by its
// subscription ID (an index query and a consistent read).
func (c *Collector) reread(ctx context.Context, found *Period) (Period, error) {
	cur, err := c.cfg.Repository.Get(ctx, found.UserID, found.BillingDate)
	if err == nil && cur.SubscriptionID == found.SubscriptionID {
		return cur, nil
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Period{}, err
	}
	return c.cfg.Repository.GetByID(ctx, found.SubscriptionID)
}

// OwedError reports a [Periods.CancelUnowed] refused because cancelling
// the record would forgive money: its period is owed, or its payment is
// not settled yet. It matches [ErrOwed].
type OwedError struct {
	// SubscriptionID is the record, and Status its status as read under
	// the user's lock.
	SubscriptionID string
	Status         Status
	// InFlight is set when the record carries an attempt whose outcome is
	// not recorded yet (whatever its status).
	InFlight bool
}

// Error implements error.
func (e *OwedError) Error() string {
	why := "its charge was declined and is owed"
	switch {
	case e.InFlight:
		why = "a payment attempt has no recorded outcome yet"
	case e.Status == StatusACHSent:
		why = "its bank debit has not settled"
	}
	return fmt.Sprintf("%s: %s is %s: %s", ErrOwed, e.SubscriptionID, e.Status, why)
}

// Unwrap returns [ErrOwed].
func (e *OwedError) Unwrap() error { return ErrOwed }

// refuseOwed refuses a change that would forgive cur: an ERROR or ACHSENT
// record, or one with an attempt in flight.
func refuseOwed(cur *Period) error {
	if cur.InFlight() || cur.Status == StatusError || cur.Status == StatusACHSent {
		return &OwedError{SubscriptionID: cur.SubscriptionID, Status: cur.Status, InFlight: cur.InFlight()}
	}
	return nil
}

// RetryPolicy decides whether the retry run attempts an ERROR record now.
type RetryPolicy interface {
	// ShouldRetry reports whether sub (status ERROR) should be attempted at
	// now. Records declined as not retryable (NoRetry) never reach it.
	ShouldRetry(sub *Period, now time.Time) bool
}

// DefaultRetryPolicy attempts an ERROR record once a day (UTC calendar
// days: not again on the day of its last run) while its billing date is
// within Window of now.
type DefaultRetryPolicy struct {
	// Window is how long after the billing date retries go on. Defaults to
	// 30 days.
	Window time.Duration
}

// ShouldRetry implements [RetryPolicy].
func (p DefaultRetryPolicy) ShouldRetry(sub *Period, now time.Time) bool {
	window := p.Window
	if window <= 0 {
		window = 30 * 24 * time.Hour
	}
	if now.Sub(sub.BillingDate) > window {
		return false
	}
	if sub.LastRunDate.IsZero() {
		return true
	}
	return utcDay(now).After(utcDay(sub.LastRunDate))
}

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
