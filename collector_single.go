package billing

import (
	"context"
	"errors"
	"fmt"
)

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
