package billing

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// SubscriptionStatus is the state of a subscription as a host gates access
// on it, at the time the view was read (see [Subscription.Status]).
type SubscriptionStatus string

// The states of a subscription, as Stripe names them. A host grants access
// while a subscription is TRIALING or ACTIVE (and, if it gives a grace
// period to a declined card, PAST_DUE), and none while it is PAUSED or
// ENDED.
const (
	// SubscriptionActive: the user is billed and owes nothing: an open
	// period (SCHEDULED, or an ACH debit awaiting settlement) renews it.
	// A subscription cancelled at period end stays ACTIVE, with
	// [Subscription.CancelAt] set, until the paid time runs out.
	SubscriptionActive SubscriptionStatus = "ACTIVE"
	// SubscriptionPastDue: a charge was declined and is owed (an ERROR
	// period); the retry runs try it again.
	SubscriptionPastDue SubscriptionStatus = "PAST_DUE"
	// SubscriptionPaused: a PAUSED period and nothing owed; nothing is
	// charged before [Subscription.NextChargeDate], the resume date.
	SubscriptionPaused SubscriptionStatus = "PAUSED"
	// SubscriptionTrialing: in a trial, nothing charged yet (see
	// [SubscribeRequest.TrialDays]); the first charge is on TrialEnd
	// ([Subscription.NextChargeDate]). A trial cancelled stays TRIALING,
	// with [Subscription.CancelAt] set, until its end.
	SubscriptionTrialing SubscriptionStatus = "TRIALING"
	// SubscriptionEnded: no open period and no paid (or trial) time left:
	// cancelled, cancelled now ([CancelNow]), given up on (STALE) or never
	// renewed. [Collector.Reactivate] or a new [Collector.Subscribe]
	// starts it again.
	SubscriptionEnded SubscriptionStatus = "ENDED"
)

// Subscription is a subscription as a host holds it: by its user, over
// all its billing periods, at the time it was read. [Collector.Subscription]
// returns it, and every change by user ([UserChange.Subscription]). It is
// modelled on Stripe's Subscription object: gate access on Status, show
// the dates and amounts as they are.
type Subscription struct {
	// UserID is the user (on the single table, one subscription of an
	// account: "account#subscription#SKU").
	UserID string
	// Status is what a host gates access on (see [SubscriptionStatus]).
	Status SubscriptionStatus
	// Tier, Amount, Term and Interval are the plan of the latest open
	// period, or of the latest period when none is open. During a trial
	// Amount is what the first charge will be, not the trial's zero.
	Tier     string
	Amount   Amount
	Term     Term
	Interval int

	// CancelAt is when a cancelled subscription's access ends: set while
	// it is ACTIVE (or TRIALING) with nothing more to charge, after a
	// cancel at period end ([CancelAtPeriodEnd]), to the end of the paid
	// (or trial) time, which is PaidThrough. Zero otherwise; once it is
	// past the subscription is ENDED.
	CancelAt time.Time

	// CurrentPeriodStart and CurrentPeriodEnd are the billing period now
	// runs in: the latest period billed at or before now that was
	// paid, is being collected, was skipped by a pause or is a trial (a
	// cancelled renewal is none), from its billing date to the next one
	// by its schedule (a trial to its end, a paused month a month later),
	// or to the instant a cancellation now ended its access. For an ENDED
	// subscription it is the last such period; zero when none is billed
	// yet (a first billing date in the future).
	CurrentPeriodStart time.Time
	CurrentPeriodEnd   time.Time

	// TrialStart and TrialEnd are the user's latest trial: its first day
	// and its end, which is the first paid period's billing date while
	// that period is not charged (moved by [Collector.EndTrial] and
	// [Collector.ExtendTrial]), else the end the trial was given. Zero
	// when the user never had a trial. Trial is that trial's period.
	TrialStart time.Time
	TrialEnd   time.Time
	Trial      *Period

	// NextChargeDate and NextChargeAmount are the next charge the
	// processor is asked for: during a trial the first charge, on the
	// trial's end; for a paused subscription the charge on the date the
	// pause resumes it ([Period.ResumeDate]), not the date it skips; else the
	// renewal, on the billing date of the next open period (a date before
	// now is due and charged by the next run). A pending downgrade is in
	// the amount from the period it applies to. Zero when nothing more
	// will be charged: cancelled (at period end too), ended, or a free
	// plan. An owed ERROR period is retried besides (see Open).
	NextChargeDate   time.Time
	NextChargeAmount Amount

	// PaidThrough is when the time the user's completed periods cover
	// ends: the billing date after the latest (a trial's end after a
	// trial, which covers its time at zero, as a free period does), or the
	// instant a cancellation now ended that access ([Period.AccessEnd]),
	// the rest having been refunded. Zero when no period was completed.
	// An ACTIVE subscription with CancelAt set ends here.
	PaidThrough time.Time

	// PendingTier and PendingAmount are a downgrade that applies from the
	// next period ("" when none is pending).
	PendingTier   string
	PendingAmount Amount

	// Periods are all the user's billing periods, ascending by billing
	// date, whatever their status. Open are the open ones (SCHEDULED,
	// ERROR, ACHSENT, PAUSED); Paid the COMPLETED ones that were charged:
	// a trial's period and a free period (completed at zero) are in
	// Periods only.
	Periods []Period
	Open    []Period
	Paid    []Period
	// InFlight are the open periods whose attempt's outcome is not
	// recorded yet ([Period.InFlight]): no change touches them
	// before it is resolved.
	InFlight []Period

	// NextBillingDate is the billing date of the latest SCHEDULED or
	// PAUSED period: the date the engine acts on next, which for a PAUSED
	// period is skipped, not charged, and for a trial's own period is
	// its start. A host shows NextChargeDate instead.
	NextBillingDate time.Time
}

// Subscription returns the subscription of userID at the collector's
// clock's now: its status, plan, dates, next charge and periods, from one
// consistent read of the user's records. A user without records is
// [ErrNotFound]. It reads no lock and writes nothing.
func (c *Collector) Subscription(ctx context.Context, userID string) (Subscription, error) {
	recs, err := c.cfg.Repository.ListByUser(ctx, userID)
	if err != nil {
		return Subscription{}, fmt.Errorf("subscription of user %s: %w", userID, err)
	}
	if len(recs) == 0 {
		return Subscription{}, fmt.Errorf("%w: user_id=%s has no billing periods", ErrNotFound, userID)
	}
	return viewOf(userID, recs, c.cfg.Clock.Now()), nil
}

// viewOf builds the view of userID from its records recs (ascending) at
// now.
func viewOf(userID string, recs []Period, now time.Time) Subscription {
	v := Subscription{UserID: userID, Status: SubscriptionEnded, Periods: slices.Clone(recs)}
	plan := &recs[len(recs)-1]
	var next *Period // the latest SCHEDULED or PAUSED period
	var owed, paused, active bool
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Status == StatusCompleted:
			if r.Amount > 0 && !r.IsTrial() {
				v.Paid = append(v.Paid, *r)
			}
		case !r.Status.IsTerminal():
			v.Open = append(v.Open, *r)
			plan = r
			owed = owed || r.Status == StatusError
			paused = paused || r.Status == StatusPaused
			active = active || r.Status == StatusScheduled || r.Status == StatusACHSent
			if r.Status == StatusScheduled || r.Status == StatusPaused {
				next = r
			}
			if r.InFlight() {
				v.InFlight = append(v.InFlight, *r)
			}
			if r.IsPendingDowngrade {
				v.PendingTier, v.PendingAmount = r.PendingTierName, r.PendingAmount
			}
		}
	}
	for i := range recs {
		r := &recs[i]
		switch {
		case r.IsTrial():
			t := *r
			v.Trial, v.TrialStart, v.TrialEnd = &t, r.BillingDate, r.TrialEnd
		case v.Trial != nil && requireTrialTarget(r) == nil:
			v.TrialEnd = r.BillingDate // the first paid period, moved or not
		}
	}
	if next != nil {
		v.NextBillingDate = next.BillingDate
		v.NextChargeDate, v.NextChargeAmount = nextCharge(next)
	}
	v.Tier, v.Amount, v.Term, v.Interval = plan.ReceiptTierName, plan.Amount, plan.Term, max(plan.Interval, 1)
	if plan.IsTrial() {
		v.Amount = plan.TrialAmount
	}
	done := lastCompleted(recs)
	if done != nil {
		v.PaidThrough = v.periodEnd(done, recs)
	}
	if cur := currentPeriod(recs, now); cur != nil {
		v.CurrentPeriodStart, v.CurrentPeriodEnd = cur.BillingDate, v.periodEnd(cur, recs)
	}
	trialing := v.Trial != nil && slices.ContainsFunc(v.Open, func(r Period) bool { return requireTrialTarget(&r) == nil })
	switch {
	case owed:
		v.Status = SubscriptionPastDue
	case paused:
		v.Status = SubscriptionPaused
	case trialing:
		v.Status = SubscriptionTrialing
	case active:
		v.Status = SubscriptionActive
	case v.PaidThrough.After(now):
		// Nothing open, nothing more to charge, and the time paid for
		// (or the trial) runs on: a cancel at period end, until then.
		v.Status, v.CancelAt = SubscriptionActive, v.PaidThrough
		if done.IsTrial() {
			v.Status = SubscriptionTrialing
		}
	}
	return v
}

// nextCharge returns the date and amount of the charge r, the user's
// latest SCHEDULED or PAUSED period, leads to: a trial's at its end, a
// paused one's on the resume date (after the pause run has opened the
// period it resumes on, with a pending downgrade applied), else r's own.
// A charge of zero (a free plan) is none: both zero.
func nextCharge(r *Period) (time.Time, Amount) {
	date, amount := r.BillingDate, r.Amount
	switch {
	case r.Status == StatusPaused:
		from := r.BillingDate
		if r.IsTrial() {
			from = r.TrialEnd
		}
		var err error
		if date, err = r.Schedule().AfterPause(from, max(r.PauseDurationMonths, 1)); err != nil {
			return time.Time{}, 0
		}
		if r.IsPendingDowngrade && r.PendingTierName != "" {
			amount = r.PendingAmount
		}
		if r.IsTrial() {
			amount = r.TrialAmount
		}
	case r.IsTrial():
		date, amount = r.TrialEnd, r.TrialAmount
	}
	if amount <= 0 {
		return time.Time{}, 0
	}
	return date, amount
}

// lastCompleted returns the latest COMPLETED period of recs (ascending),
// charged or at zero, or nil.
func lastCompleted(recs []Period) *Period {
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Status == StatusCompleted {
			return &recs[i]
		}
	}
	return nil
}

// currentPeriod returns the latest period of recs (ascending) billed at or
// before now that covers its time: completed, open, skipped by a pause or
// waived; nil when there is none.
func currentPeriod(recs []Period, now time.Time) *Period {
	var cur *Period
	for i := range recs {
		r := &recs[i]
		if r.BillingDate.After(now) {
			continue
		}
		switch r.Status {
		case StatusCompleted, StatusScheduled, StatusACHSent, StatusError, StatusPaused, StatusPausedSkipped, StatusWaived:
			cur = r
		}
	}
	return cur
}

// periodEnd is when p, a period of the user whose records are recs and
// view v, ends: a trial at the view's trial end (its own when it is not
// the latest trial), a paused or skipped month a month after it, any
// other at the next billing date by its schedule; or at the end of access
// a cancellation now put before that ([accessCut]).
func (v *Subscription) periodEnd(p *Period, recs []Period) time.Time {
	var end time.Time
	var err error
	switch {
	case p.IsTrial():
		end = p.TrialEnd
		if v.Trial != nil && v.Trial.SubscriptionID == p.SubscriptionID {
			end = v.TrialEnd
		}
	case p.Status == StatusPaused || p.Status == StatusPausedSkipped:
		end, err = p.Schedule().AfterPause(p.BillingDate, 1)
	default:
		end, err = p.Schedule().Next(p.BillingDate)
	}
	if err != nil {
		return time.Time{}
	}
	return accessCut(p, end, recs)
}

// paidEnd is when p, a paid period of a user whose records are recs,
// ends: the billing date after it by its schedule, or the end of access
// a cancellation now put before it ([accessCut]).
func paidEnd(p *Period, recs []Period) (time.Time, error) {
	end, err := followingDate(p)
	if err != nil {
		return end, err
	}
	return accessCut(p, end, recs), nil
}

// accessCut returns end, the end of p, a paid period of a user whose
// records are recs, or the earliest end of access before it that a
// cancellation now put on a record of the user ([Period.AccessEnd])
// after p was opened: the time after it was refunded. A period opened
// after the cancellation (a come-back) is not cut.
func accessCut(p *Period, end time.Time, recs []Period) time.Time {
	for i := range recs {
		if a := recs[i].AccessEnd; !a.IsZero() && a.Before(end) && !p.CreatedDate.After(a) {
			end = a
		}
	}
	return end
}
