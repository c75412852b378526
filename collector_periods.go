package billing

import (
	"context"
	"fmt"
	"time"
)

// Reasons a retry run leaves an ERROR record alone (runPlan.Reason).
const (
	reasonNotError      = "not an ERROR record"
	reasonDeclinedFinal = "declined as final"
	reasonRetryNotNow   = "retry policy: not now"
)

// eligible reports whether cur may be attempted by proc at now, and why not.
func (c *Collector) eligible(proc Process, cur *Period, now time.Time) (bool, string) {
	due := cur.DueAt(now)
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
		return c.cfg.RetryPolicy.ShouldRetry(cur, now), reasonRetryNotNow
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
			lc.lr = laterRead{userID: r.UserID, billingDate: r.BillingDate, later: recent[:i:i], unread: lc.un.u}
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
