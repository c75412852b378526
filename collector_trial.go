package billing

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dynabill/billing/internal/calendar"
)

// This file is the trial: a period of its own at zero from the trial's
// start, completed by the engine without a charge (see completeFree), after
// which the first paid period opens on the trial's end at the plan's price
// and the schedule follows that day.

// trialEnd returns the first paid billing date of req, start being its
// first billing date: start itself without a trial, else the trial's end.
func trialEnd(req SubscribeRequest, start time.Time) (time.Time, error) {
	switch {
	case req.TrialDays == 0 && req.TrialEnd.IsZero():
		return start, nil
	case req.TrialDays != 0 && !req.TrialEnd.IsZero():
		return time.Time{}, requestField("TrialEnd", req.TrialEnd.Format(time.RFC3339), "TrialDays or TrialEnd, not both")
	case req.TrialDays < 0 || req.TrialDays > MaxTrialDays:
		return time.Time{}, requestField("TrialDays", fmt.Sprint(req.TrialDays), "0 to %d", MaxTrialDays)
	case req.PauseMonths != 0:
		return time.Time{}, requestField("TrialDays", fmt.Sprint(req.TrialDays), "a trial cannot start paused (PauseMonths)")
	case req.TrialDays != 0:
		return start.AddDate(0, 0, req.TrialDays), nil
	case !req.TrialEnd.After(start.Add(time.Second)):
		return time.Time{}, requestField("TrialEnd", req.TrialEnd.Format(time.RFC3339), "after FirstBillingDate %s", start.Format(time.RFC3339))
	case req.TrialEnd.Sub(start) > MaxTrialDays*24*time.Hour:
		return time.Time{}, requestField("TrialEnd", req.TrialEnd.Format(time.RFC3339), "at most %d days after FirstBillingDate", MaxTrialDays)
	}
	return req.TrialEnd, nil
}

// trialPeriod returns the trial period before paid, the first paid period
// a request with a trial describes (billed on the trial's end, its anchor
// and Friday week that day's): the same plan at zero, billed on start,
// carrying the trial's end and the paid amount.
func (c *Collector) trialPeriod(paid Period, start, now time.Time) (Period, error) {
	date, err := c.billingDay("FirstBillingDate", start, now)
	if err != nil {
		return Period{}, err
	}
	t := paid
	t.BillingDate, t.BillingPeriod = date, BillingPeriod(date)
	t.TrialEnd, t.TrialAmount, t.Amount = paid.BillingDate, paid.Amount, 0
	return t, nil
}

// checkRepeatTrial refuses sub, a trial, for a user whose records recs
// (read under the lock) or history rows show a trial already, unless req
// allows it.
func (c *Collector) checkRepeatTrial(ctx context.Context, req SubscribeRequest, sub *Period, recs []Period) error {
	if !sub.IsTrial() || req.AllowRepeatTrial {
		return nil
	}
	had := slices.ContainsFunc(recs, func(r Period) bool { return r.IsTrial() })
	if !had && c.cfg.History != nil {
		rows, err := c.cfg.History.ListByUser(ctx, req.UserID)
		if err != nil {
			return fmt.Errorf("read the history of user %s: %w", req.UserID, err)
		}
		had = slices.ContainsFunc(rows, func(r Period) bool { return r.IsTrial() })
	}
	if had {
		return &FieldError{Field: "TrialDays", Value: fmt.Sprint(req.TrialDays), Err: fmt.Errorf("%w: user %s (AllowRepeatTrial lets the host give another)", ErrTrialUsed, req.UserID)}
	}
	return nil
}

// TrialRequest is what [Collector.ExtendTrial] takes.
type TrialRequest struct {
	UserRequest
	// End is the trial's new end: the first paid period's billing date,
	// read as [Periods.Move] reads dates. Required; it
	// must be after the trial's current end.
	End time.Time
}

// EndTrial ends the user's trial now: the first paid period, not charged
// yet, is moved to now (its anchor day and Friday week following), so the
// next scheduled run charges it; a host that wants the charge at once
// calls [Collector.CollectUser] after it. A trial not completed yet is
// given its end now. The request is keyed like every change by user
// ([UserRequest]); a user without a trial in progress is refused with an
// error wrapping [ErrNotCollectible].
func (c *Collector) EndTrial(ctx context.Context, req UserRequest) (UserChange, error) {
	return c.changeTrial(ctx, req, time.Time{}, opEndTrial)
}

// ExtendTrial moves the end of the user's trial in progress to req.End
// (later than it is): the first paid period is billed then, its anchor
// day and Friday week following. Keyed and refused as [Collector.EndTrial];
// an end whose schedule meets a record of the user's earlier life is
// refused as [Periods.Move] refuses such a date (an error
// wrapping [ErrInvalidDate]), since that paid period could not be opened.
func (c *Collector) ExtendTrial(ctx context.Context, req TrialRequest) (UserChange, error) {
	if req.End.IsZero() {
		return UserChange{}, fmt.Errorf("extend trial %s: %w", req.UserID, requestField("End", "", "required"))
	}
	return c.changeTrial(ctx, req.UserRequest, req.End, opExtendTrial)
}

func (c *Collector) changeTrial(ctx context.Context, ur UserRequest, end time.Time, op opName) (UserChange, error) {
	kr := newKeyedRequest(string(op), ur.RequestKey)
	if !end.IsZero() {
		kr = kr.time("End", end)
	}
	return c.byUser(ctx, ur, kr, op, func(recs []Period, kr keyedRequest, now time.Time) ([]Period, keyedRequest, error) {
		if t := trialTarget(recs, now); t != nil {
			return []Period{*t}, kr, nil
		}
		return nil, kr, fmt.Errorf("%w: user %s has no trial in progress", ErrNotCollectible, ur.UserID)
	}, func(ctx context.Context, id string) (Change, error) {
		return c.admin(ctx, op, id, func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
			date := end
			if date.IsZero() {
				date = now
			}
			if cur.IsTrial() { // not completed yet: its end moves
				if !end.IsZero() && !date.After(cur.TrialEnd) {
					return nil, requestField("End", date.Format(time.RFC3339), "after the trial's end %s", cur.TrialEnd.Format(time.RFC3339))
				}
				d, err := c.billingDay("End", date, now)
				if err != nil {
					return nil, err
				}
				next.TrialEnd, next.AnchorDay = d, d.Day()
				if cur.BillingWeek != 0 {
					if w := calendar.FridayWeek(d); w != 0 {
						next.BillingWeek = w
					}
				}
				return nil, c.clearTrialEnd(ctx, next)
			}
			if !end.IsZero() && !date.After(cur.BillingDate) {
				return nil, requestField("End", date.Format(time.RFC3339), "after the trial's end %s", cur.BillingDate.Format(time.RFC3339))
			}
			return c.moveDate(date)(ctx, cur, next, now)
		}, requireTrialTarget)
	})
}

// clearTrialEnd refuses next, a trial period given a new end, when its
// schedule from that end meets a record of the user's earlier life (read
// under the lock): the paid period on that date could not be opened, and
// the subscription would end with the trial. A date move is refused
// alike (see [Periods.Move]).
func (c *Collector) clearTrialEnd(ctx context.Context, next *Period) error {
	recs, err := c.cfg.Repository.ListByUser(ctx, next.UserID)
	if err != nil {
		return fmt.Errorf("list the records of user %s: %w", next.UserID, err)
	}
	var others []Period
	for _, r := range recs {
		if r.SubscriptionID != next.SubscriptionID && r.Status.IsTerminal() {
			others = append(others, r)
		}
	}
	return clearSchedule("End", next, others)
}

// trialTarget returns the record of recs (ascending) a trial change acts
// on: an open trial period not completed yet, or the first paid period
// after a trial, not attempted yet.
func trialTarget(recs []Period, _ time.Time) *Period {
	for i := len(recs) - 1; i >= 0; i-- {
		r := &recs[i]
		if r.Status.IsTerminal() {
			continue
		}
		if requireTrialTarget(r) == nil {
			return r
		}
	}
	return nil
}

// firstAfterTrial reports whether r is the first paid period after a
// trial, not charged or attempted yet: the trial is still running.
func firstAfterTrial(r *Period) bool {
	return !r.IsTrial() && requireTrialTarget(r) == nil
}

// requireTrialTarget refuses a record a trial change may not act on (see
// trialTarget), as read under the lock.
func requireTrialTarget(r *Period) error {
	switch {
	case r.Status != StatusScheduled || !r.InitialRunDate.IsZero() || r.LastAttempt.Number != 0:
	case r.IsTrial(), r.IsAfterTrial():
		return nil
	}
	return fmt.Errorf("%w: %s is no trial in progress (%s)", ErrNotCollectible, r.SubscriptionID, r.Status)
}
