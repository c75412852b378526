package billing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reasons a retry run leaves an ERROR record alone ([Plan.Reason]).
const (
	ReasonNotError      = "not an ERROR record"
	ReasonDeclinedFinal = "declined as final"
	ReasonRetryNotNow   = "retry policy: not now"
)

// eligible reports whether cur may be attempted by proc at now, and why not.
func (c *Collector) eligible(proc Process, cur *Subscription, now time.Time) (bool, string) {
	due := !cur.BillingDate.After(now)
	switch proc {
	case ProcessInitial:
		return cur.Status == StatusScheduled && due, "not SCHEDULED and due"
	case ProcessRetry:
		switch {
		case cur.Status != StatusError:
			return false, ReasonNotError
		case cur.NoRetry:
			return false, ReasonDeclinedFinal
		}
		return c.cfg.RetryPolicy.ShouldRetry(cur, now), ReasonRetryNotNow
	case ProcessWebhook, ProcessWebhookBalance, ProcessBatch:
		ok := due && (cur.Status == StatusScheduled || (cur.Status == StatusError && !cur.NoRetry))
		return ok, "not a due SCHEDULED or retryable ERROR record"
	case ProcessManualRepayment:
		return cur.Status == StatusError || (cur.Status == StatusScheduled && due), "not ERROR or a due SCHEDULED record"
	}
	return false, "process " + string(proc) + " does not collect"
}

// staleable reports whether proc should mark cur STALE: a SCHEDULED or
// ERROR record older than the threshold, found by a collecting process.
func (c *Collector) staleable(proc Process, cur *Subscription, now time.Time) bool {
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
func (c *Collector) stale(cur *Subscription, now time.Time) bool {
	return now.Sub(cur.BillingDate) > time.Duration(c.cfg.OldSubscriptionDays)*24*time.Hour
}

// runTime returns the last_run_date of a write after cur: now, or just
// after cur's when the clock is behind it (history rows need distinct,
// increasing keys). Records created in the same write take this time plus
// a few nanoseconds, so the next write of either record cannot collide.
func runTime(cur *Subscription, now time.Time) time.Time {
	if now.After(cur.LastRunDate) {
		return now.UTC()
	}
	return cur.LastRunDate.Add(time.Microsecond).UTC()
}

// attempt collects cur (re-read under the user's lock) by proc for a single
// collection, observed as a record of its own (a run observes each record
// around its lock and calls attemptRecord).
func (c *Collector) attempt(ctx context.Context, proc Process, cur *Subscription, rep *Report) error {
	ctx, obs := c.tel.startRecord(ctx, singleRun(proc), proc, cur.UserID, cur.SubscriptionID)
	obs.err = c.attemptRecord(ctx, proc, cur, obs.rep)
	obs.end(ctx, rep)
	return obs.err
}

// attemptRecord collects cur (re-read under the user's lock) by proc. A
// record in flight is first resolved (see [Collector.resolve]); when its
// outcome stays unknown it is left alone, even past the stale threshold,
// and reported.
func (c *Collector) attemptRecord(ctx context.Context, proc Process, cur *Subscription, rep *Report) error {
	if cur.InFlight() {
		_, err := c.resolve(ctx, cur, rep)
		var unresolved *InFlightError
		if errors.As(err, &unresolved) {
			e := eventFor(EventAttemptUnresolved, cur, c.cfg.Clock.Now())
			e.Amount, e.Reason = unresolved.Amount, unresolved.Error()
			c.emit(ctx, e)
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
	for try := 0; ; try++ {
		marked, err := c.startAttempt(ctx, proc, cur, now)
		if err != nil {
			return err
		}
		_, err = c.charge(ctx, &marked, rep)
		switch {
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
		if werr := c.cfg.Repository.SetAttempt(ctx, &marked, cur); werr != nil {
			return fmt.Errorf("%w; withdraw the attempt: %w", err, werr)
		}
		if try >= c.cfg.ProcessorBudget.RateLimitRetries {
			c.cfg.Logger.InfoContext(ctx, "billing: processor rate limit, record left for a later run",
				"subscription_id", cur.SubscriptionID, "tries", try+1)
			return nil
		}
		now = c.cfg.Clock.Now()
	}
}

// outcome applies a provider result to cur.
func outcome(cur *Subscription, res PaymentResult, proc Process, attempt int, at time.Time) (Subscription, EventType, error) {
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
		return Subscription{}, "", fmt.Errorf("provider returned unknown outcome %v for %s", res.Outcome, cur.SubscriptionID)
	}
	return next, ev, nil
}

// latestKey carries in a collection's context the user's latest record as
// read under the user's lock (see [Collector.readLatest]).
type latestKey struct{}

// latestRead is the user's latest record at the read; none when the user
// had no record.
type latestRead struct {
	userID string
	latest Subscription
	none   bool
}

// readDepth is how many of a user's latest records readLatest reads: the
// record a run found is nearly always the user's latest (its first
// attempt) or the one before (a retry, once the next period is open).
const readDepth = 2

// readLatest reads the record it a run found (indexes are eventually
// consistent) under the user's lock together with the user's latest
// records, in one consistent read of the user's newest ones: the same
// read says whether a later period is open already, so opening the next
// period costs no query of its own (the context returned carries it). A
// record older than those is read by its key. [ErrNotFound] when the
// record is gone.
func (c *Collector) readLatest(ctx context.Context, it *Subscription) (Subscription, context.Context, error) {
	recent, err := c.cfg.Repository.Recent(ctx, it.UserID, readDepth)
	if err != nil {
		return Subscription{}, ctx, fmt.Errorf("read %s: %w", it.SubscriptionID, err)
	}
	lr := latestRead{userID: it.UserID, none: len(recent) == 0}
	if !lr.none {
		lr.latest = recent[0]
	}
	ctx = context.WithValue(ctx, latestKey{}, lr)
	for _, r := range recent {
		if r.SubscriptionID == it.SubscriptionID && r.BillingDate.Truncate(time.Second).Equal(it.BillingDate.Truncate(time.Second)) {
			return r, ctx, nil
		}
	}
	cur, err := c.cfg.Repository.Get(ctx, it.UserID, it.BillingDate)
	return cur, ctx, err
}

// latest returns the user's latest record: the one read under the lock
// when the context carries it, else from a query. ok is false when the
// user has no record.
func (c *Collector) latest(ctx context.Context, userID string) (Subscription, bool, error) {
	if lr, found := ctx.Value(latestKey{}).(latestRead); found && lr.userID == userID {
		return lr.latest, !lr.none, nil
	}
	recent, err := c.cfg.Repository.Recent(ctx, userID, 1)
	if err != nil || len(recent) == 0 {
		return Subscription{}, false, err
	}
	return recent[0], true, nil
}

// nextPeriod returns the next period's SCHEDULED record for cur, or nil
// when the user already has a later record (the period is open already).
// The record's creation is conditional on its key being free, and a
// later record written after the user's latest was read is then found by
// that condition when it has the next period's date.
func (c *Collector) nextPeriod(ctx context.Context, proc Process, cur *Subscription, now time.Time) (*Subscription, error) {
	latest, ok, err := c.latest(ctx, cur.UserID)
	if err != nil {
		return nil, fmt.Errorf("look for the next period of %s: %w", cur.SubscriptionID, err)
	}
	if ok && latest.BillingDate.After(cur.BillingDate) {
		return nil, nil
	}
	date, err := NextBillingDate(cur.BillingDate, cur.Schedule())
	if err != nil {
		return nil, fmt.Errorf("next billing date of %s: %w", cur.SubscriptionID, err)
	}
	f := &Subscription{
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
	return f, nil
}

// pauseMonthAfter dates following, the period nextPeriod opened after the
// PAUSED record cur, one month after cur whatever the term: a pause counts
// months. For a monthly term this is the date nextPeriod gave.
func pauseMonthAfter(cur, following *Subscription) error {
	date, err := PauseResumeDate(cur.BillingDate, cur.Schedule(), 1)
	if err != nil {
		return fmt.Errorf("month after the pause of %s: %w", cur.SubscriptionID, err)
	}
	following.BillingDate, following.BillingPeriod = date, BillingPeriod(date)
	return nil
}

// markStale moves a record too old to collect to STALE. A record that was
// never attempted also opens the next period, so the subscription goes on.
func (c *Collector) markStale(ctx context.Context, proc Process, cur *Subscription, now time.Time, rep *Report) error {
	next := cur.Clone()
	next.Status = StatusStale
	next.Process = proc
	next.LastRunDate = runTime(cur, now)
	next.CompletionDate = next.LastRunDate
	var create []*Subscription
	if cur.InitialRunDate.IsZero() {
		following, err := c.nextPeriod(ctx, proc, cur, now)
		if err != nil {
			return err
		}
		if following != nil {
			following.LastRunDate = next.LastRunDate.Add(time.Nanosecond)
			following.CreatedDate = following.LastRunDate
			create = append(create, following)
		}
	}
	if err := c.write(ctx, cur, &next, create); err != nil {
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
// [PauseResumeDate]); its yearly schedule goes on from that date.
func (c *Collector) advancePause(ctx context.Context, cur *Subscription, rep *Report) error {
	now := c.cfg.Clock.Now()
	if c.PlanRecord(RunPause, cur, now).Action != PlanAdvancePause {
		rep.count(&rep.NotEligible)
		return nil
	}
	next := cur.Clone()
	next.Status = StatusPausedSkipped
	next.UpdatedEvent = EventPauseSkipped
	next.Process = ProcessPause
	next.LastRunDate = runTime(cur, now)
	var create []*Subscription
	following, err := c.nextPeriod(ctx, ProcessPause, cur, now)
	if err != nil {
		return err
	}
	if following != nil {
		if err := pauseMonthAfter(cur, following); err != nil {
			return err
		}
		following.LastRunDate = next.LastRunDate.Add(time.Nanosecond)
		following.CreatedDate = following.LastRunDate
		if left := cur.PauseDurationMonths - 1; left > 0 {
			following.Status = StatusPaused
			following.PauseDurationMonths = left
			if left == 1 {
				following.UpdatedEvent = EventPausePendingResume
			}
		} else {
			following.UpdatedEvent = EventPauseResume
		}
		create = append(create, following)
	}
	if err := c.write(ctx, cur, &next, create); err != nil {
		return fmt.Errorf("advance paused %s: %w", cur.SubscriptionID, err)
	}
	rep.count(&rep.Advanced)
	return nil
}

// historyKeyRetries bounds the rewrites of a write whose only failed
// condition was a taken history key.
const historyKeyRetries = 3

// write stores next (replacing cur) and the records in create. When only a
// history key was taken (another row of the user has that last_run_date:
// two writes of one user in the same instant), the record's condition held,
// so the write is repeated with later last_run_dates.
func (c *Collector) write(ctx context.Context, cur, next *Subscription, create []*Subscription) error {
	for i := 0; ; i++ {
		var err error
		if !next.BillingDate.Truncate(time.Second).Equal(cur.BillingDate.Truncate(time.Second)) {
			err = c.cfg.Repository.AdminUpdate(ctx, cur, next)
		} else {
			err = c.cfg.Repository.Update(ctx, cur, next, create...)
		}
		if !IsHistoryKeyConflict(err) || i == historyKeyRetries {
			return err
		}
		next.LastRunDate = next.LastRunDate.Add(time.Duration(i+1) * time.Millisecond)
		for j, f := range create {
			f.LastRunDate = next.LastRunDate.Add(time.Duration(j+1) * time.Nanosecond)
			f.CreatedDate = f.LastRunDate
		}
	}
}
