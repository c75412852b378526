package billing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// leaseKey carries the lease a collection runs under in its context.
type leaseKey struct{}

func withLease(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// checkLease fails when the lease the collection runs under is lost or
// past its local deadline. It reads nothing: the lease's own signal and
// its local expiry are enough to stop before a charge or a write; the
// conditional writes remain the fence for a holder that paused after it.
func checkLease(ctx context.Context) error {
	l, _ := ctx.Value(leaseKey{}).(Lease)
	if l == nil {
		return nil
	}
	select {
	case <-l.Lost():
		return fmt.Errorf("billing: lock of %s: %w", l.UserID(), ErrLeaseLost)
	default:
	}
	if dl := l.Deadline(); !dl.IsZero() && time.Now().After(dl) {
		return fmt.Errorf("billing: lock of %s: past its local deadline %v: %w", l.UserID(), dl.Format(time.RFC3339Nano), ErrLeaseLost)
	}
	return nil
}

// release gives a lease back, retrying a failed release a few times. A
// lease lost meanwhile is not an error of the caller's (its writes were
// fenced); any other failure is returned: the lock then expires by itself,
// within two lease durations, since nothing renews it any more.
func (c *Collector) release(ctx context.Context, l Lease) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	for i := range releaseTries {
		if err = l.Release(ctx); err == nil {
			return nil
		}
		if errors.Is(err, ErrLeaseLost) {
			c.cfg.Logger.WarnContext(ctx, "billing: lease lost before release", "user_id", l.UserID(), "error", err)
			return nil
		}
		time.Sleep(time.Duration(i+1) * 20 * time.Millisecond)
	}
	c.cfg.Logger.ErrorContext(ctx, "billing: releasing lock failed", "user_id", l.UserID(), "error", err)
	return fmt.Errorf("billing: release lock of %s: %w", l.UserID(), err)
}

// releaseTries bounds the tries of a failed release.
const releaseTries = 3

// startAttempt makes attempt n of cur durable (the in-flight marker) and
// returns the record as stored with it.
func (c *Collector) startAttempt(ctx context.Context, proc Process, cur *Subscription, now time.Time) (Subscription, error) {
	n := cur.Attempt + 1
	marked := cur.Clone()
	marked.LastAttempt = Attempt{
		Number: n, Key: IdempotencyKey(cur.SubscriptionID, n), Amount: cur.Amount,
		Tier: cur.ReceiptTierName, Process: proc, Started: now.UTC(),
	}
	if err := checkLease(ctx); err != nil {
		return Subscription{}, err
	}
	if err := c.cfg.Repository.SetAttempt(ctx, cur, &marked); err != nil {
		return Subscription{}, fmt.Errorf("record attempt %d of %s before the charge: %w", n, cur.SubscriptionID, err)
	}
	return marked, nil
}

// charge calls the provider with the attempt recorded on cur and records
// its answer. The lease is checked right before the call and again before
// the outcome is written; a lost lease stops the collection and leaves the
// attempt in flight for the next holder to replay. A provider error is an
// [*InFlightError]: the outcome is unknown. A rate-limited answer is an
// error wrapping [ErrRateLimited]: the processor did nothing with the
// attempt.
func (c *Collector) charge(ctx context.Context, cur *Subscription, rep *Report) (Subscription, error) {
	res, err := c.call(ctx, cur, rep)
	if err != nil {
		switch {
		case errors.Is(err, ErrRateLimited):
			a := cur.LastAttempt
			err = fmt.Errorf("attempt %d of %s (key %s) not made: %w", a.Number, cur.SubscriptionID, a.Key, err)
		case !errors.Is(err, ErrLeaseLost):
			err = inFlightErr(cur, err)
		}
		return Subscription{}, err
	}
	if err := checkLease(ctx); err != nil {
		return Subscription{}, fmt.Errorf("%s outcome of key %s not recorded: %w", res.Outcome, cur.LastAttempt.Key, err)
	}
	return c.recordOutcome(ctx, cur, res, rep)
}

// call presents the attempt recorded on cur to the provider when the
// processor budget allows, once the lease is checked. An error other than
// a lost lease or a rate-limited answer is the provider's: the outcome is
// unknown.
func (c *Collector) call(ctx context.Context, cur *Subscription, rep *Report) (PaymentResult, error) {
	done, err := c.pace.acquire(ctx)
	if err != nil {
		return PaymentResult{}, fmt.Errorf("waiting for the processor budget: %w", err)
	}
	defer done()
	if err := checkLease(ctx); err != nil {
		return PaymentResult{}, err
	}
	a := cur.LastAttempt
	rep.count(&rep.Attempted)
	start := time.Now()
	res, err := c.cfg.Provider.Collect(ctx, a.Request(cur))
	c.tel.providerCalled(ctx, a.Number, time.Since(start), res, err)
	c.paced(err, rep)
	return res, err
}

// paced tells the budget how the processor answered a call.
func (c *Collector) paced(err error, rep *Report) {
	switch {
	case errors.Is(err, ErrRateLimited):
		rep.count(&rep.RateLimited)
		c.pace.limited(retryAfter(err))
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
	c.paced(err, rep)
	return res, found, err
}

func inFlightErr(cur *Subscription, why error) error {
	a := cur.LastAttempt
	return &InFlightError{SubscriptionID: cur.SubscriptionID, Key: a.Key, Amount: a.Amount, Started: a.Started, Err: why}
}

// resolve settles the attempt in flight on cur (re-read under the user's
// lock) before anything else may change the record: it replays the
// recorded request while the processor still knows its key, asks the
// processor through [PaymentLookup] when it offers that, and records the
// answer. It returns the record as stored afterwards, or an
// [*InFlightError] when the outcome stays unknown (nothing is written
// then). A record not in flight is returned as it is.
func (c *Collector) resolve(ctx context.Context, cur *Subscription, rep *Report) (Subscription, error) {
	if !cur.InFlight() {
		return *cur, nil
	}
	a := cur.LastAttempt
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
	if w, ok := c.cfg.Provider.(ReplayWindow); ok && w.ReplayWindow() > 0 && c.cfg.Clock.Now().Sub(a.Started) > w.ReplayWindow() {
		why = fmt.Errorf("the processor's replay window (%v) has passed", w.ReplayWindow())
	} else {
		stored, err := c.charge(ctx, cur, rep) // the replay
		var unresolved *InFlightError
		switch {
		case errors.Is(err, ErrRateLimited):
			why = err // the replay was refused: the first call's fate is still open
		case !errors.As(err, &unresolved):
			return stored, err
		default:
			why = unresolved.Err
		}
	}
	if errors.Is(why, ErrRateLimited) {
		// A lookup now would be refused too: ask again in a later run.
		return Subscription{}, unknown(why, why)
	}
	if !canLookup {
		return Subscription{}, unknown(why, fmt.Errorf("%w; the provider offers no lookup", why))
	}
	if err := checkLease(ctx); err != nil {
		return Subscription{}, err
	}
	res, found, err := c.lookup(ctx, lookup, a.Request(cur), rep)
	if err != nil {
		return Subscription{}, unknown(err, fmt.Errorf("%w; lookup: %w", why, err))
	}
	if !found {
		// The processor has nothing for the key: the attempt is counted
		// as made, and the next one takes a fresh key.
		settled := cur.Clone()
		settled.Attempt = a.Number
		if err := c.cfg.Repository.SetAttempt(ctx, cur, &settled); err != nil {
			return Subscription{}, fmt.Errorf("settle attempt %d of %s (not found by the processor): %w", a.Number, cur.SubscriptionID, err)
		}
		c.cfg.Logger.InfoContext(ctx, "billing: attempt not found by the processor, settled", "subscription_id", cur.SubscriptionID, "key", a.Key)
		return settled, nil
	}
	return c.recordOutcome(ctx, cur, res, rep)
}

// recordOutcome writes the provider's answer to the attempt in flight on
// cur, with the next period's record when this was the period's first
// attempt, in one transaction conditional on cur, and returns the record
// as written.
func (c *Collector) recordOutcome(ctx context.Context, cur *Subscription, res PaymentResult, rep *Report) (Subscription, error) {
	a := cur.LastAttempt
	now := c.cfg.Clock.Now()
	var create []*Subscription
	if cur.InitialRunDate.IsZero() {
		following, err := c.nextPeriod(ctx, a.Process, cur, now)
		if err != nil {
			return Subscription{}, err
		}
		if following != nil {
			create = append(create, following)
		}
	}
	next, ev, err := outcome(cur, res, a.Process, a.Number, runTime(cur, now))
	if err != nil {
		return Subscription{}, err
	}
	next.Amount = a.Amount // what was asked for is what the answer is about
	for _, f := range create {
		f.LastRunDate = next.LastRunDate.Add(time.Nanosecond)
		f.CreatedDate = f.LastRunDate
	}
	err = c.write(ctx, cur, &next, create)
	if errors.Is(err, ErrAlreadyExists) && len(create) > 0 {
		// The next period appeared meanwhile: record the outcome alone.
		err = c.write(ctx, cur, &next, nil)
	}
	if err != nil {
		if IsConflict(err) {
			// Only a writer that ignored the attempt could have changed the
			// record; the answer stays with the processor, under its key.
			e := eventFor(EventUnrecorded, &next, next.LastRunDate)
			e.Reason = fmt.Sprintf("%s outcome of key %s not recorded: %v", res.Outcome, a.Key, err)
			c.emit(ctx, e)
		}
		return Subscription{}, fmt.Errorf("record %s outcome of %s: %w", res.Outcome, cur.SubscriptionID, err)
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
