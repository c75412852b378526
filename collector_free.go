package billing

import (
	"context"
	"errors"
	"fmt"
)

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
	return !cur.InFlight() && (cur.IsTrial() || cur.Amount == 0 && c.cfg.AllowFreeTiers)
}

// completeFree completes cur, a zero-amount period eligible for proc (read
// under the user's lock), in one write conditional on cur with its history
// row ([EventFreePeriodCompleted]), and opens the next period as a paid
// collection does. The attempt counter is not touched: no key is used.
func (c *Collector) completeFree(ctx context.Context, proc Process, cur *Period, rep *Report) error {
	now := c.cfg.Clock.Now()
	next := cur.Clone()
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
		err = c.write(ctx, ev, cur, &next, nil)
	}
	if err != nil {
		return fmt.Errorf("complete free period %s: %w", cur.SubscriptionID, err)
	}
	rep.count(&rep.Free)
	c.emit(ctx, eventFor(ev, &next, next.LastRunDate))
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
