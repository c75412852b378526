package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
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
	// SubscriptionPaused: a PAUSED period, nothing owed and no paid time
	// left; nothing is charged before [Subscription.NextChargeDate], the
	// resume date. A pause asked during a paid period is ACTIVE, with
	// [Subscription.PauseAt] set, until the paid time runs out.
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

	// PauseAt is when a pause asked during a paid (or trial) period takes
	// effect: the billing date it skips first. Until then the time paid
	// for runs on and Status stays ACTIVE (or TRIALING); from then on it is
	// PAUSED. Zero when no pause is pending.
	PauseAt time.Time

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
	// plan. An owed ERROR period is retried besides (see Open). The
	// amount is before tax: a [Config.Tax] is asked for the tax only when
	// the charge is attempted ([Period.Tax]).
	NextChargeDate   time.Time
	NextChargeAmount Amount
	// Balance is the customer's credit balance: what the next charge's
	// period carries ([Period.Balance]), which pays what it can of that
	// charge (already taken off NextChargeAmount) and of later ones.
	// Discounts are the coupons that come off the next charge.
	Balance   Amount
	Discounts []Discount

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
	// Periods only. A plan change's one-off charge ([Period.IsOneOff])
	// is among them as any record is (in Open while owed, in Paid once
	// charged), but the plan, the next charge and the paid time never
	// come from it.
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
	var pausedFrom time.Time // the first PAUSED period's billing date
	for i := range recs {
		r := &recs[i]
		switch {
		case r.IsOneOff():
			switch {
			case r.Status == StatusCompleted:
				v.Paid = append(v.Paid, *r)
			case !r.Status.IsTerminal():
				v.Open = append(v.Open, *r)
				owed = owed || r.Status == StatusError
				if r.InFlight() {
					v.InFlight = append(v.InFlight, *r)
				}
			}
		case r.Status == StatusCompleted:
			if r.Amount > 0 && !r.IsTrial() {
				v.Paid = append(v.Paid, *r)
			}
		case !r.Status.IsTerminal():
			v.Open = append(v.Open, *r)
			plan = r
			owed = owed || r.Status == StatusError
			if r.Status == StatusPaused && !paused {
				paused, pausedFrom = true, r.BillingDate
			}
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
		v.Balance, v.Discounts = next.Balance, slices.Clone(next.Discounts)
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
	case paused && v.PaidThrough.After(now):
		// A pause asked during a paid (or trial) period begins when that
		// time runs out: the user keeps what was paid for until then.
		v.Status, v.PauseAt = SubscriptionActive, pausedFrom
		if done.IsTrial() {
			v.Status = SubscriptionTrialing
		}
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
	case r.charged():
		// A plan change's proration and the customer's balance are in
		// the charge; a balance that pays all of it leaves the date.
		due, _, _ := r.Due()
		return date, due
	}
	if r.charged() && !r.IsTrial() {
		// A pause defers the proration, discounts and balance to the
		// charge it resumes with.
		p := *r
		p.Amount = amount
		due, _, _ := p.Due()
		return date, due
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
		if recs[i].Status == StatusCompleted && !recs[i].IsOneOff() {
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
		if r.BillingDate.After(now) || r.IsOneOff() {
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
// after the cancellation (a come-back) is not cut. So is p's end where a
// move into it or a change of term started a new period, crediting the
// rest ([Adjustment.EndsPeriod]), once that period is charged.
func accessCut(p *Period, end time.Time, recs []Period) time.Time {
	for i := range recs {
		r := &recs[i]
		if a := r.AccessEnd; !a.IsZero() && a.Before(end) && !p.CreatedDate.After(a) {
			end = a
		}
		if r.Status != StatusCompleted && r.Status != StatusACHSent && r.Status != StatusRefunded {
			continue // not charged (yet): its credit is not applied
		}
		for _, a := range r.Adjustments {
			if a.EndsPeriod && a.PeriodID == p.SubscriptionID && a.Start.Before(end) {
				end = a.Start // a new period started there, crediting the rest
			}
		}
	}
	return end
}

// UserChange is what a change of a subscription by its user did.
type UserChange struct {
	// Changes are the period changes made, in the order made: one per open
	// period the change acted on. On a repeat they are read back from
	// the history rows the first call wrote (Before is the period's row
	// before it).
	Changes []Change
	// Subscription is the subscription after the change.
	Subscription Subscription
	// Repeated reports that the request key had been used for this same
	// request, which had been applied in full: nothing was written, and
	// Changes are what the first call did.
	Repeated bool
	// AccessUntil is, for a cancellation, when the user's paid access
	// ends: the end of the last paid period ([CancelAtPeriodEnd]), or the
	// time of the cancellation ([CancelNow]).
	AccessUntil time.Time
	// Refund is, for [CancelNow], what the host owes back: the unused
	// share of the last paid period (RefundPeriodID), pro rata by time and
	// rounded down to the minor unit. The library refunds nothing itself.
	Refund         Amount
	RefundPeriodID string
	// Adjustments are, for a plan change now ([ProrateNextCharge]), the
	// lines it added to the next charge: the credit for the old plan's
	// unused time and the charge for the new plan's (with [ProrateNow],
	// the lines of Charge when it charged them at once). None when no paid
	// period was running (a trial, before the first charge).
	Adjustments []Adjustment
	// Charge is, for a plan change with [ProrateNow] whose lines charge
	// more than they credit, the one-off charge of that difference as it
	// stands after the call: COMPLETED when paid, ERROR when declined
	// (owed: retried, repaid or waived as an owed period is, and the
	// subscription is past due), ACHSENT while a bank debit settles. Nil
	// otherwise: the lines ride on the next charge.
	Charge *Period
}

// When says when a change by user takes effect: a cancel
// ([CancelRequest.When]) or a plan change ([ChangePlanRequest.When]).
type When string

// When a cancel or a plan change takes effect.
const (
	// CancelAtPeriodEnd: no period is charged again; the user keeps what
	// was paid until the end of the last paid period.
	CancelAtPeriodEnd When = "AT_PERIOD_END"
	// CancelNow: access ends now, and the host refunds the unused share of
	// the last paid period ([UserChange.Refund]). Always: the refund is
	// that whole share (rounded down to the minor unit), so the time after
	// the cancellation is no longer paid for, whatever the host then
	// refunds. The periods cancelled record the instant
	// ([Period.AccessEnd]): the view's PaidThrough ends there, and
	// the user may come back at once, charged from the come-back's date.
	CancelNow When = "NOW"

	// ChangeNow applies the new plan to the next charge (an upgrade).
	ChangeNow When = "NOW"
	// ChangeAtNextPeriod keeps this period's plan and applies the new one
	// from the period after it (a downgrade, marked pending).
	ChangeAtNextPeriod When = "NEXT_PERIOD"
)

// UserRequest names the subscription and the request of a change by user.
type UserRequest struct {
	// UserID is the user: the user's ID on the legacy tables, one
	// subscription of an account ("account#subscription#SKU") on the single
	// table, where an account holds one such user per SKU. Required.
	UserID string
	// RequestKey names the request, 1 to 256 bytes of UTF-8 chosen by the
	// host: a call repeated with the same user and key answers what the
	// first did and changes nothing more; the key given again with other
	// parameters is a [*RequestKeyError]. Required.
	RequestKey string
	// Operator and Reason, for a change an operator makes (a console, a
	// support tool), say who made it and why: the history rows of the
	// change record them ([Period.Operator]). A repeat of the key is
	// not compared on them: the rows keep the first call's. Optional; at most
	// [MaxActorLen] bytes of UTF-8 each, without control characters but
	// line breaks in Reason.
	Operator string
	Reason   string
}

// CancelRequest is what [Collector.Cancel] takes.
type CancelRequest struct {
	UserRequest
	// When says when access ends. Defaults to [CancelAtPeriodEnd].
	When When
	// ForgiveOwed cancels an owed ERROR period too, forgiving what it
	// owes, as [Periods.Cancel] does: an operator's decision. Defaults to
	// false: an ERROR period refuses the whole cancellation (an error
	// wrapping [ErrNotCollectible] that names it, nothing written), so
	// that an end user's cancel never forgives a debt; collect it
	// ([Periods.Repay]) first.
	ForgiveOwed bool
}

// PauseRequest is what [Collector.Pause] takes.
type PauseRequest struct {
	UserRequest
	// Months is the pause, 1 to 120 calendar months (see [Periods.Pause]). Required.
	Months int
}

// ResumeRequest is what [Collector.Resume] takes.
type ResumeRequest struct {
	UserRequest
}

// ChangePlanRequest is what [Collector.ChangePlan] takes.
type ChangePlanRequest struct {
	UserRequest
	// Tier is the new plan, name and version ("Plus:v2"). Required.
	Tier string
	// Amount is what each period of the new plan costs. Defaults to the
	// price in [Config.Prices] ([ListPrice]) of Tier on the subscription's
	// term and interval ([PricePlan]); without a price list
	// it is required. Checked as [Periods.ChangeTier] checks it.
	Amount Amount
	// When says when the plan applies. Defaults to [ChangeNow].
	When When
	// Proration says how a change now ([ChangeNow]) bills the rest of the
	// paid period it is made in. Defaults to [ProrateNextCharge];
	// [ProrateNow] charges an upgrade's difference in this call (see
	// [UserChange.Charge]); a change at the next period takes only the
	// default or [ProrateNone].
	Proration Proration
	// Term and Interval, when set and not the subscription's, change how
	// often it is billed (monthly to yearly, every 3 months): the next
	// period starts now, a full period of the new plan (charged by the
	// next run, or at once by [Collector.CollectUser]), and the unused
	// time of the period paid before is credited on it
	// ([ProrateNextCharge]; [ProrateNone] credits nothing). Only with
	// [ChangeNow]. Default to the subscription's.
	Term     Term
	Interval int
}

// MoveBillingDateRequest is what [Collector.MoveBillingDate] takes.
type MoveBillingDateRequest struct {
	UserRequest
	// Date is the new billing date of the next period, read as
	// [Periods.Move] reads it. Required.
	Date time.Time
	// Proration says how a date inside the paid period before is billed:
	// [ProrateNextCharge] (the default) credits that period's unused time
	// from Date on, on the moved charge; [ProrateNone] refuses such a
	// date ([*DateMoveError]), as [Periods.Move] does.
	Proration Proration
}

// Cancel cancels every open period of the user (SCHEDULED,
// ERROR, PAUSED) as one change: nothing is charged again. An owed ERROR
// period refuses it unless req.ForgiveOwed is set, which forgives it. With
// [CancelNow] the result says what the host must refund. An ACH debit awaiting settlement (ACHSENT) refuses the
// whole change ([ErrNotCollectible]): cancel once it settles. See
// [Collector.ChangePlan] for what every change by user shares; in
// particular, repeat a cancellation that failed part-way at once, with
// its key: until then a period it did not reach is still collected by the
// runs, and once collected it fails the repeat.
func (c *Collector) Cancel(ctx context.Context, req CancelRequest) (UserChange, error) {
	when := req.When
	if when == "" {
		when = CancelAtPeriodEnd
	}
	if when != CancelAtPeriodEnd && when != CancelNow {
		return UserChange{}, fmt.Errorf("cancel subscription %s: %w", req.UserID,
			requestField("When", string(when), "%s or %s", CancelAtPeriodEnd, CancelNow))
	}
	kr := newKeyedRequest("cancel", req.RequestKey).field("When", string(when)).
		field("ForgiveOwed", fmt.Sprint(req.ForgiveOwed))
	return c.byUser(ctx, req.UserRequest, kr, opCancel, func(recs []Period, kr keyedRequest, now time.Time) ([]Period, keyedRequest, error) {
		targets := openPeriods(recs)
		for _, r := range recs {
			// A plan change's difference not charged yet is cancelled
			// with the rest; one owed is owed as a period is.
			if r.IsOneOff() && !r.Status.IsTerminal() {
				targets = append(targets, r)
			}
		}
		for _, r := range targets {
			if r.Status == StatusError && !req.ForgiveOwed {
				return nil, kr, fmt.Errorf("%w: %s is ERROR: its charge was declined and is owed; collect it first, or set ForgiveOwed", ErrNotCollectible, r.SubscriptionID)
			}
		}
		v := viewOf(req.UserID, recs, now)
		kr = kr.time("access_until", v.PaidThrough)
		if when == CancelNow {
			kr = kr.time("access_until", now)
			// The latest completed period, a trial's or a free one too
			// (refunding zero), as PaidThrough counts it.
			if last := lastCompleted(recs); last != nil {
				// With what a one-off charge paid for the rest of it
				// (an upgrade charged at once), rounded down once.
				exact := unusedShare(last, v.PaidThrough, now)
				for i := range recs {
					if o := &recs[i]; o.IsOneOff() && o.Status == StatusCompleted && o.ChargeOf == last.SubscriptionID {
						exact.Add(exact, unusedLines(o, v.PaidThrough, now))
					}
				}
				refund := Amount(0)
				if exact.Sign() > 0 {
					refund = Amount(new(big.Int).Quo(exact.Num(), exact.Denom()).Int64())
				}
				kr = kr.set("refund", refund.String()).set("refund_period", last.SubscriptionID)
			}
		}
		return targets, kr, nil
	}, func(ctx context.Context, id string) (Change, error) {
		edit := cancelEdit
		if when == CancelNow {
			edit = endAccess(ctx)
		}
		if req.ForgiveOwed {
			return c.admin(ctx, opCancel, id, edit) // as Cancel
		}
		// Decided again on the period as read under the lock: a period
		// that became owed is refused (*OwedError), never forgiven.
		return c.admin(ctx, opCancel, id, edit, refuseOwed) // as CancelUnowed
	})
}

// endAccess is the edit of a period a cancellation now cancels: as
// [Periods.Cancel]'s, and the end of the user's access, the instant
// the request recorded in ctx decided (access_until, the same for each
// period and on a repeat), set on the record ([Period.AccessEnd]).
// An earlier end the record carries already (from a cancellation now
// before a come-back reopened it) stays: that time was refunded then.
func endAccess(ctx context.Context) func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
	end, err := time.Parse(time.RFC3339Nano, recorded(ctx).get("access_until"))
	return func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
		if err != nil {
			return nil, fmt.Errorf("the cancellation's end of access: %w", err)
		}
		if next.AccessEnd.IsZero() || end.Before(next.AccessEnd) {
			next.AccessEnd = end
		}
		return cancelEdit(ctx, cur, next, now)
	}
}

// unusedShare is the share of what p was charged for its plan (its
// amount less its discounts) for the time from now to end, the end of the
// period p paid for, exact (the refund rounds it down).
func unusedShare(p *Period, end, now time.Time) *big.Rat {
	if end.IsZero() || !now.Before(end) {
		return new(big.Rat)
	}
	start := p.BillingDate
	if now.Before(start) {
		now = start
	}
	// At the period's own rate: end may be cut before its natural end.
	whole := end
	if natural, err := followingDate(p); err == nil && natural.After(end) {
		whole = natural
	}
	paid, _ := discounted(p.Amount, p.Discounts)
	share := new(big.Int).Mul(big.NewInt(int64(paid)), big.NewInt(int64(end.Sub(now)/time.Second)))
	return new(big.Rat).SetFrac(share, big.NewInt(max(int64(whole.Sub(start)/time.Second), 1)))
}

// unusedLines is the share of what the one-off charge o was paid for its
// lines' time (charges less credits) for the time from now to end, the
// end of the paid time, exact.
func unusedLines(o *Period, end, now time.Time) *big.Rat {
	sum := new(big.Rat)
	for _, a := range o.Adjustments {
		from, to := a.Start, a.End
		if now.After(from) {
			from = now
		}
		if end.Before(to) {
			to = end
		}
		whole := int64(a.End.Sub(a.Start) / time.Second)
		if !from.Before(to) || whole <= 0 {
			continue
		}
		part := new(big.Int).Mul(big.NewInt(int64(a.Amount)), big.NewInt(int64(to.Sub(from)/time.Second)))
		r := new(big.Rat).SetFrac(part, big.NewInt(whole))
		if a.Credit {
			r.Neg(r)
		}
		sum.Add(sum, r)
	}
	return sum
}

// Pause pauses every open period of the user for req.Months
// months, as [Periods.Pause] pauses one, as one change. An owed ERROR
// period (or an ACH debit awaiting settlement) refuses the whole change
// ([ErrPauseRefused], matching [ErrNotCollectible]): settle, waive or
// cancel it first. A paused user's pause sets its months anew. Months outside
// 1 to 120 is a [*FieldError].
func (c *Collector) Pause(ctx context.Context, req PauseRequest) (UserChange, error) {
	if err := checkPauseMonths(req.Months); err != nil {
		return UserChange{}, fmt.Errorf("pause subscription %s: %w", req.UserID, err)
	}
	kr := newKeyedRequest("pause", req.RequestKey).field("Months", fmt.Sprint(req.Months))
	return c.byUser(ctx, req.UserRequest, kr, opPause, func(recs []Period, kr keyedRequest, _ time.Time) ([]Period, keyedRequest, error) {
		return openPeriods(recs), kr, nil
	}, func(ctx context.Context, id string) (Change, error) { return c.Periods().Pause(ctx, id, req.Months) })
}

// Resume resumes every PAUSED period of the user, as
// [Periods.Resume] resumes one, as one change. A user without a PAUSED
// period is refused ([ErrResumeRefused], matching [ErrNotCollectible]).
func (c *Collector) Resume(ctx context.Context, req ResumeRequest) (UserChange, error) {
	kr := newKeyedRequest("resume", req.RequestKey)
	return c.byUser(ctx, req.UserRequest, kr, opResume, func(recs []Period, kr keyedRequest, _ time.Time) ([]Period, keyedRequest, error) {
		return inStatus(recs, StatusPaused), kr, nil
	}, func(ctx context.Context, id string) (Change, error) { return c.Periods().Resume(ctx, id) })
}

// ChangePlan moves every SCHEDULED period of the user to req's tier and
// amount, as [Periods.ChangeTier] moves one ([ChangeAtNextPeriod] is
// its downgrade), as one change. An owed ERROR period and an ACH debit
// awaiting settlement keep the plan they were billed at; a user with no
// SCHEDULED period (paused: resume first; ended) is refused
// ([ErrPlanChangeRefused], matching [ErrNotCollectible]). A
// plan the periods have already is [ErrNoChange], and nothing is written.
//
// What every change by user shares (Cancel,
// Pause, Resume, ChangePlan, MoveBillingDate):
//
//   - it runs under the user's billing lock, and each period is changed by
//     the period call ([Periods.Cancel], ...) with every rule that call
//     applies: an in-flight attempt is resolved first or the change is
//     refused ([*InFlightError]), the status must allow it, the write is
//     conditional on the record read;
//   - the periods it acts on are chosen, and all checked against the
//     change's statuses, before anything is written: a period in a status
//     the change refuses refuses the whole change;
//   - each period is one conditional write with its history row; the rows
//     record the request ([Period.Request]). The stores cannot write
//     several periods in one transaction, so a crash (or a refusal) between
//     two periods leaves the first changed: the same call repeated with the
//     same key completes the rest, and only the periods the first call
//     chose (a chosen period that no longer takes the change, say one
//     collected meanwhile, fails the repeat with the period call's error:
//     a new request, with a new key, acts on the periods as they are);
//   - it needs [Config.History] to read the requests back: without it the
//     call is refused ([ErrInvalidRequest]);
//   - a repeat of the key with the same parameters answers what the first
//     call did (Repeated set); with other parameters it is a
//     [*RequestKeyError], whatever the subscription has become since.
func (c *Collector) ChangePlan(ctx context.Context, req ChangePlanRequest) (UserChange, error) {
	when, given, prorate, err := c.checkPlanChange(ctx, req)
	if err != nil {
		return UserChange{}, fmt.Errorf("change plan %s: %w", req.UserID, err)
	}
	amount := given
	down := when == ChangeAtNextPeriod
	kr := newKeyedRequest("change plan", req.RequestKey).field("Tier", req.Tier).
		field("When", string(when))
	if req.Amount != 0 && req.Amount != ListPrice {
		kr = kr.field("Amount", req.Amount.String())
	}
	if !prorate && !down {
		kr = kr.field("Proration", string(ProrateNone))
	}
	atOnce := req.Proration == ProrateNow
	if atOnce {
		kr = kr.field("Proration", string(ProrateNow))
	}
	if req.Term != "" || req.Interval != 0 {
		if down {
			return UserChange{}, fmt.Errorf("change plan %s: %w", req.UserID,
				requestField("When", string(when), "a change of term or interval starts a new period now: %s", ChangeNow))
		}
		if _, err := ParseTerm(string(req.Term)); req.Term != "" && err != nil {
			return UserChange{}, fmt.Errorf("change plan %s: %w", req.UserID, requestField("Term", string(req.Term), "%v", err))
		}
		if req.Interval < 0 || req.Interval > MaxInterval {
			return UserChange{}, fmt.Errorf("change plan %s: %w", req.UserID, requestField("Interval", fmt.Sprint(req.Interval), "0 to %d", MaxInterval))
		}
		kr = kr.field("Term", string(req.Term)).field("Interval", fmt.Sprint(req.Interval))
	}
	var read Period // the period prorated, as read when the lines were made
	out, err := c.byUser(ctx, req.UserRequest, kr, opChangeTier, func(recs []Period, kr keyedRequest, now time.Time) ([]Period, keyedRequest, error) {
		targets, price, lines, err := c.planChangeTargets(ctx, req, given, down, prorate, recs, now)
		if err != nil {
			return nil, kr, err
		}
		amount = price
		if term, interval, ok := termChange(req, recs, now); ok {
			// A new full period from now: the move credits what is left
			// of the paid one (see changeTerm).
			kr = kr.set("term", string(term), fmt.Sprint(interval)).time("at", now)
			return targets[:min(len(targets), 1)], kr, nil
		}
		if len(lines) > 0 {
			read = targets[0]
			b, err := json.Marshal(lines)
			if err != nil {
				return nil, kr, err
			}
			kr = kr.set("adjustments", read.SubscriptionID, string(b))
			if d := difference(lines); atOnce && d > 0 && c.outOfLimits(d) == "" {
				// Charged at once, by a one-off charge made with the
				// change: its ID and date are the request's.
				o := oneOff(OneOffChargeID(req.UserID, req.RequestKey), &read, req.Tier, lines, now, recs)
				kr = kr.set("charge_now", o.SubscriptionID).time("charge_now_date", o.BillingDate)
			}
		}
		return targets, kr, nil
	}, func(ctx context.Context, id string) (Change, error) {
		if ch, ok, err := c.changeTerm(ctx, id, req, amount, prorate); ok {
			return ch, err
		}
		lines, err := recordedLines(ctx, id)
		if err != nil {
			return Change{}, err
		}
		var now *chargeNow
		if kr := recorded(ctx); len(lines) > 0 && kr.get("charge_now") != "" {
			d, err := time.Parse(time.RFC3339Nano, kr.get("charge_now_date"))
			if err != nil {
				return Change{}, fmt.Errorf("the recorded one-off charge of %s: %w", id, err)
			}
			now = &chargeNow{id: kr.get("charge_now"), date: d}
		}
		var guard []func(*Period) error
		if len(lines) > 0 && read.SubscriptionID == id {
			guard = append(guard, func(cur *Period) error {
				if !cur.LastRunDate.Equal(read.LastRunDate) {
					return fmt.Errorf("%w: %s changed after its proration was made", ErrConflict, id)
				}
				return nil
			})
		}
		return c.changeTier(ctx, id, req.Tier, amount, down, lines, now, guard...)
	}, func(ctx context.Context, out *UserChange) error { return c.chargeNow(ctx, req.UserID, out) })
	if err != nil {
		return out, err
	}
	for _, ch := range out.Changes {
		out.Adjustments = append(out.Adjustments, addedLines(&ch.Before, &ch.After)...)
	}
	if out.Charge != nil {
		out.Adjustments = append(out.Adjustments, out.Charge.Adjustments...)
	}
	return out, nil
}

// chargeNow collects, under the user's lock, the one-off charge the
// plan change in ctx (its first call's request) wrote, if any and not
// collected yet, and sets it on out: on the first call, and on every
// repeat until it has an outcome, so that a repeat resolves a charge
// whose outcome was unknown (an [*InFlightError] until then).
func (c *Collector) chargeNow(ctx context.Context, userID string, out *UserChange) error {
	kr := recorded(ctx)
	id := kr.get("charge_now")
	if id == "" {
		return nil
	}
	date, err := time.Parse(time.RFC3339Nano, kr.get("charge_now_date"))
	if err != nil {
		return fmt.Errorf("the recorded one-off charge %s: %w", id, err)
	}
	found := Period{UserID: userID, BillingDate: date, SubscriptionID: id}
	cur, err := c.reread(ctx, &found)
	if err != nil {
		return fmt.Errorf("the one-off charge %s: %w", id, err)
	}
	if cur.Status == StatusScheduled {
		if err := c.attempt(ctx, ProcessInitial, &cur, &Report{}); err != nil {
			return fmt.Errorf("the one-off charge %s of the plan change: %w", id, err)
		}
		if cur, err = c.reread(ctx, &found); err != nil {
			return fmt.Errorf("the one-off charge %s: %w", id, err)
		}
	}
	out.Charge = &cur
	return nil
}

// checkPlanChange checks what req asks for before anything is read, and
// returns when it takes effect, the amount given (or [ListPrice]) and
// whether it is prorated.
func (c *Collector) checkPlanChange(ctx context.Context, req ChangePlanRequest) (when When, amount Amount, prorate bool, err error) {
	when = req.When
	if when == "" {
		when = ChangeNow
	}
	if when != ChangeNow && when != ChangeAtNextPeriod {
		return "", 0, false, requestField("When", string(when), "%s or %s", ChangeNow, ChangeAtNextPeriod)
	}
	amount = req.Amount
	if amount == 0 && c.cfg.Prices != nil {
		amount = ListPrice
	}
	// Refused before anything is read when no record is needed to tell;
	// a price list prices the user's plan (term and interval), read later.
	if c.cfg.Prices == nil || !validTierName(req.Tier) {
		if _, err := c.priceOf(ctx, PricePlan{Tier: req.Tier}, amount); err != nil {
			return "", 0, false, err
		}
	}
	if req.Proration == ProrateNow && (req.Term != "" || req.Interval != 0) {
		return "", 0, false, requestField("Proration", string(req.Proration),
			"a change of term or interval starts a new period, charged by the next run or Collector.CollectUser: %s or %s", ProrateNextCharge, ProrateNone)
	}
	prorate, err = prorationOf(req.Proration, when)
	return when, amount, prorate, err
}

// prorationOf checks p for a change taking effect when, and reports
// whether the change is prorated.
func prorationOf(p Proration, when When) (bool, error) {
	switch {
	case p == "" || (p == ProrateNextCharge || p == ProrateNow) && when == ChangeNow:
		return when == ChangeNow, nil
	case p == ProrateNone:
		return false, nil
	}
	return false, requestField("Proration", string(p), "%s, %s or %s (%s and %s only with %s)",
		ProrateNextCharge, ProrateNow, ProrateNone, ProrateNextCharge, ProrateNow, ChangeNow)
}

// planChangeTargets picks the periods a plan change of the user (records
// recs) moves, at now: every SCHEDULED one not on the plan already. It
// returns them, the plan's price, and, prorated, the lines the change adds
// to the first of them, the next charge (see [prorateChange]).
func (c *Collector) planChangeTargets(ctx context.Context, req ChangePlanRequest, given Amount, down, prorate bool, recs []Period, now time.Time) ([]Period, Amount, []Adjustment, error) {
	term, interval, newTerm := termChange(req, recs, now)
	amount, err := c.priceOf(ctx, PricePlan{Tier: req.Tier, Term: term, Interval: interval}, given)
	if err != nil {
		return nil, 0, nil, err
	}
	if newTerm {
		// The next period alone starts anew; its credit is the move's.
		return inStatus(recs, StatusScheduled)[:min(1, len(inStatus(recs, StatusScheduled)))], amount, nil, nil
	}
	var targets []Period
	for _, r := range inStatus(recs, StatusScheduled) {
		if sameTier(&r, req.Tier, amount, down) == nil {
			targets = append(targets, r)
		}
	}
	if len(targets) == 0 && len(inStatus(recs, StatusScheduled)) > 0 {
		return nil, 0, nil, fmt.Errorf("%w: user %s is on %s at %s already", ErrNoChange, req.UserID, req.Tier, amount)
	}
	if !prorate || len(targets) == 0 || targets[0].IsTrial() {
		return targets, amount, nil, nil
	}
	pc, err := prorateChange(recs, &targets[0], req.Tier, amount, now, centsPerMinorUnit(c.cfg.Invoicing.Currency))
	switch {
	case errors.Is(err, errNoProration):
		return targets, amount, nil, nil
	case err != nil:
		return nil, 0, nil, err
	}
	for i := range pc.lines {
		pc.lines[i].Request = req.RequestKey
	}
	return targets, amount, pc.lines, nil
}

// termChange returns the term and interval req asks for when they are
// not those of the user's subscription (records recs at now).
func termChange(req ChangePlanRequest, recs []Period, now time.Time) (Term, int, bool) {
	v := viewOf(req.UserID, recs, now)
	term, interval := v.Term, max(v.Interval, 1)
	if req.Term != "" {
		term = req.Term
	}
	if req.Interval != 0 {
		interval = req.Interval
	}
	return term, interval, term != v.Term || interval != max(v.Interval, 1)
}

// changeTerm applies the change of term the change by user in ctx
// decided (ok false when it decided none) to the period id: moved to the
// change's instant, a full period of the new plan (tier, amount, term,
// interval) from there, with the paid period's unused time credited when
// prorated. A trial's period, or the first one after it not charged yet,
// stays on its date and takes the new plan.
func (c *Collector) changeTerm(ctx context.Context, id string, req ChangePlanRequest, amount Amount, prorate bool) (Change, bool, error) {
	kr := recorded(ctx)
	v := kr.v["term"]
	if len(v) != 2 {
		return Change{}, false, nil
	}
	term, interval := Term(v[0]), 1
	fmt.Sscan(v[1], &interval)
	at, err := time.Parse(time.RFC3339Nano, kr.get("at"))
	if err != nil {
		return Change{}, true, fmt.Errorf("the recorded instant of the term change of %s: %w", id, err)
	}
	amount, err = c.priceOf(ctx, PricePlan{Tier: req.Tier, Term: term, Interval: interval}, amount)
	if err != nil {
		return Change{}, true, err
	}
	ch, err := c.admin(ctx, opChangeTier, id, func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
		next.ReceiptTierName, next.Term, next.Interval = req.Tier, term, interval
		next.IsPendingDowngrade, next.PendingTierName, next.PendingAmount = false, "", 0
		if cur.IsTrial() {
			next.TrialAmount = amount
			return nil, nil
		}
		next.Amount = amount
		if term != TermMonthly {
			// Friday billing is for monthly terms (as Subscribe says).
			next.BillingWeek = 0
		}
		if firstAfterTrial(cur) {
			return nil, nil
		}
		moved := *cur
		moved.BillingWeek = next.BillingWeek
		return c.moveInto(at, true, req.RequestKey, prorate)(ctx, &moved, next, now)
	})
	return ch, true, err
}

// recordedLines returns the proration lines the change by user in ctx
// (its first call's request) decided for the period id, if any.
func recordedLines(ctx context.Context, id string) ([]Adjustment, error) {
	v := recorded(ctx).v["adjustments"]
	if len(v) != 2 || v[0] != id {
		return nil, nil
	}
	var lines []Adjustment
	if err := json.Unmarshal([]byte(v[1]), &lines); err != nil {
		return nil, fmt.Errorf("the recorded proration of %s: %w", id, err)
	}
	return lines, nil
}

// addedLines returns the adjustments after has that before had not.
func addedLines(before, after *Period) []Adjustment {
	if len(after.Adjustments) <= len(before.Adjustments) {
		return nil
	}
	return slices.Clone(after.Adjustments[len(before.Adjustments):])
}

// MoveBillingDate moves the user's next period — its latest open one — to
// req.Date, as [Periods.Move] moves it (its rules and
// errors). Earlier open periods (an owed ERROR one) keep their dates.
//
// A date inside the period paid before it (earlier than its end) is
// prorated by default: the moved period starts a full period on that
// date, and the paid period's unused time from it on is credited on that
// charge (a credit line of [UserChange.Adjustments], as a plan change's),
// so no day is paid twice.
func (c *Collector) MoveBillingDate(ctx context.Context, req MoveBillingDateRequest) (UserChange, error) {
	if req.Date.IsZero() {
		return UserChange{}, fmt.Errorf("move billing date %s: %w", req.UserID, requestField("Date", "", "required"))
	}
	prorate, err := prorationOf(req.Proration, ChangeNow)
	if err != nil {
		return UserChange{}, fmt.Errorf("move billing date %s: %w", req.UserID, err)
	}
	key := ""
	if prorate {
		key = req.RequestKey
	}
	kr := newKeyedRequest("move billing date", req.RequestKey).time("Date", req.Date)
	if !prorate {
		kr = kr.field("Proration", string(ProrateNone))
	}
	out, err := c.byUser(ctx, req.UserRequest, kr, opChangeDate, func(recs []Period, kr keyedRequest, _ time.Time) ([]Period, keyedRequest, error) {
		open := openPeriods(recs)
		if len(open) == 0 {
			return nil, kr, nil
		}
		return open[len(open)-1:], kr, nil
	}, func(ctx context.Context, id string) (Change, error) {
		return c.admin(ctx, opChangeDate, id, c.moveDate(req.Date, key))
	})
	for _, ch := range out.Changes {
		out.Adjustments = append(out.Adjustments, addedLines(&ch.Before, &ch.After)...)
	}
	return out, err
}

// openPeriods returns the records of recs that are not terminal, but
// for one-off charges: no change of the subscription acts on those.
func openPeriods(recs []Period) []Period {
	var out []Period
	for _, r := range recs {
		if !r.Status.IsTerminal() && !r.IsOneOff() {
			out = append(out, r)
		}
	}
	return out
}

// inStatus returns the records of recs in status st, but for one-off
// charges.
func inStatus(recs []Period, st Status) []Period {
	var out []Period
	for _, r := range recs {
		if r.Status == st && !r.IsOneOff() {
			out = append(out, r)
		}
	}
	return out
}

// sameTier returns [ErrNoChange] when a tier change of cur to tier and
// amount (a downgrade when down) would leave it as it is.
func sameTier(cur *Period, tier string, amount Amount, down bool) error {
	same := cur.ReceiptTierName == tier && cur.Amount == amount
	if down && cur.IsPendingDowngrade {
		same = cur.PendingTierName == tier && cur.PendingAmount == amount
	} else if !down {
		same = same && !cur.IsPendingDowngrade
	}
	if same {
		return fmt.Errorf("%w: %s is on %s at %s already", ErrNoChange, cur.SubscriptionID, tier, amount)
	}
	return nil
}

// choose picks the periods a change by user acts on among the user's
// records recs, at now, and completes the request's record with what the
// call decides (its refund, ...).
type choose func(recs []Period, kr keyedRequest, now time.Time) ([]Period, keyedRequest, error)

// byUser runs a change by user: under the user's lock it answers a repeat
// of the key from the history rows, or picks the periods (choose), checks
// each against op's statuses, and applies apply to each, every history row
// recording kr. See [Collector.ChangePlan] for the rules.
func (c *Collector) byUser(ctx context.Context, ur UserRequest, kr keyedRequest, op opName, pick choose, apply func(ctx context.Context, periodID string) (Change, error), then ...func(ctx context.Context, out *UserChange) error) (UserChange, error) {
	fail := func(err error) (UserChange, error) {
		return UserChange{}, fmt.Errorf("%s subscription %s: %w", kr.op(), ur.UserID, err)
	}
	if err := checkIdentity(SubscribeRequest{UserID: ur.UserID, RequestKey: ur.RequestKey}); err != nil {
		return fail(err)
	}
	if err := checkActor(ur); err != nil {
		return fail(err)
	}
	kr = withActor(kr, ur) // who and why are the request's too
	if c.cfg.History == nil {
		return fail(fmt.Errorf("%w: a change by user reads its request back from the history: Config.History is required", ErrInvalidRequest))
	}
	var out UserChange
	_, err := c.single(ctx, kr.op(), ur.UserID, "", func(ctx context.Context, _ *Report) error {
		rows, err := c.cfg.History.ListByUser(ctx, ur.UserID)
		if err != nil {
			return fmt.Errorf("read the history: %w", err)
		}
		first, done := firstRequest(rows, ur.RequestKey)
		var todo []string
		if first != nil {
			if err := kr.reused(ur.UserID, *first); err != nil {
				return err
			}
			kr = *first // what the first call decided stands
			for _, id := range strings.Split(first.get("periods"), ",") {
				if id != "" && !slices.ContainsFunc(done, func(ch Change) bool { return ch.After.SubscriptionID == id }) {
					todo = append(todo, id)
				}
			}
			out.Changes, out.Repeated = done, len(todo) == 0
		} else {
			recs, err := c.cfg.Repository.ListByUser(ctx, ur.UserID)
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				return fmt.Errorf("%w: user_id=%s has no billing periods", ErrNotFound, ur.UserID)
			}
			// The periods are chosen once every attempt in flight is
			// resolved: a charge that went through completes its period
			// and opens the next, which is then the one to change.
			if recs, err = c.resolveOpen(ctx, ur.UserID, recs); err != nil {
				return inFlightRefused(op, err)
			}
			targets, k, err := pick(recs, kr, c.cfg.Clock.Now())
			if err != nil {
				return err
			}
			if len(targets) == 0 {
				return noPeriodFor(op, ur.UserID, openPeriods(recs))
			}
			for i := range targets {
				if err := requireStatus(op, &targets[i]); err != nil {
					return fmt.Errorf("%s %s: %w", op, targets[i].SubscriptionID, err)
				}
				todo = append(todo, targets[i].SubscriptionID)
			}
			kr = k.set("periods", strings.Join(todo, ","))
		}
		ctx = context.WithValue(ctx, heldLockKey{}, leaseOf(ctx))
		ctx = context.WithValue(ctx, requestKey{}, kr.encode())
		for _, id := range todo {
			ch, err := apply(ctx, id)
			if err != nil {
				return err
			}
			out.Changes = append(out.Changes, ch)
		}
		for _, f := range then {
			if err := f(ctx, &out); err != nil {
				return err
			}
		}
		recs, err := c.cfg.Repository.ListByUser(ctx, ur.UserID)
		if err != nil {
			return err
		}
		out.Subscription = viewOf(ur.UserID, recs, c.cfg.Clock.Now())
		out.AccessUntil, _ = time.Parse(time.RFC3339Nano, kr.get("access_until"))
		if r := kr.get("refund"); r != "" {
			out.Refund, _ = ParseAmount(r)
			out.RefundPeriodID = kr.get("refund_period")
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return out, nil
}

// resolveOpen resolves the attempt in flight of each of recs, the user's
// records, and returns them read again when it resolved one. An attempt
// whose outcome stays unknown refuses the change ([*InFlightError]).
func (c *Collector) resolveOpen(ctx context.Context, userID string, recs []Period) ([]Period, error) {
	resolved := false
	for i := range recs {
		if !recs[i].InFlight() {
			continue
		}
		if _, err := c.resolve(ctx, &recs[i], &Report{}); err != nil {
			return nil, fmt.Errorf("%s: %w", recs[i].SubscriptionID, err)
		}
		resolved = true
	}
	if !resolved {
		return recs, nil
	}
	return c.cfg.Repository.ListByUser(ctx, userID)
}

// noPeriodFor is the refusal of op, a change by user of userID, when none
// of the user's open periods (open) is one op acts on: it says why, and
// what to do first.
func noPeriodFor(op opName, userID string, open []Period) error {
	what := map[opName]string{opChangeTier: "plan change", opChangeDate: "billing date move"}[op]
	if what == "" {
		what = string(op)
	}
	fix := ""
	switch {
	case len(open) == 0:
		fix = "the subscription has ended: subscribe again (Collector.Subscribe)"
	case op == opResume:
		fix = "the subscription is not paused: nothing to resume"
	case len(inStatus(open, StatusPaused)) > 0:
		fix = "the subscription is paused: resume it first (Collector.Resume)"
	case len(inStatus(open, StatusError)) > 0:
		fix = "a declined charge is owed: collect it (Periods.Repay) or waive it (Periods.Waive) first"
	case len(inStatus(open, StatusACHSent)) > 0:
		fix = "a bank debit awaits settlement: try again once it settles"
	}
	msg := fmt.Sprintf("user %s has no period a %s applies to (open: %s)", userID, what, statusesOf(open))
	if fix != "" {
		msg += ": " + fix
	}
	return refused(op, "%s", msg)
}

func statusesOf(recs []Period) string {
	var s []string
	for _, r := range recs {
		s = append(s, string(r.Status))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// firstRequest finds among a user's history rows (ascending) those that
// record request key key: the request recorded on the first, and the
// period changes they made (Before the period's row before each).
func firstRequest(rows []Period, key string) (*keyedRequest, []Change) {
	var first *keyedRequest
	var done []Change
	last := map[string]int{}
	for i, r := range rows {
		kr, ok := parseKeyedRequest(r.Request)
		if ok && kr.key() == key {
			if first == nil {
				first = &kr
			}
			ch := Change{After: r}
			if j, ok := last[r.SubscriptionID]; ok {
				ch.Before = rows[j]
			}
			done = append(done, ch)
		}
		last[r.SubscriptionID] = i
	}
	return first, done
}

// requestKey carries in a change's context the request its history row
// records ([Period.Request]).
type requestKey struct{}

// requestOf returns the request ctx carries for the history row of a
// change, "" for none.
func requestOf(ctx context.Context) string {
	s, _ := ctx.Value(requestKey{}).(string)
	return s
}

// recorded returns the request of the change by user in ctx, as its
// first call decided it (empty when none).
func recorded(ctx context.Context) keyedRequest {
	kr, _ := parseKeyedRequest(requestOf(ctx))
	return kr
}

// heldLockKey carries the lease a change by user holds, so that the period
// calls it makes run under it instead of locking the user again.
type heldLockKey struct{}

func leaseOf(ctx context.Context) Lease {
	l, _ := ctx.Value(leaseKey{}).(Lease)
	return l
}

// lock locks userID, or, within a change by user of that user, returns
// its lease, whose release is left to the change.
func (c *Collector) lock(ctx context.Context, userID string) (Lease, error) {
	if l, ok := ctx.Value(heldLockKey{}).(Lease); ok && l != nil && l.UserID() == userID {
		return heldLease{l}, nil
	}
	return c.cfg.Locker.Lock(ctx, userID)
}

// heldLease is a lease held by an outer call: released by it.
type heldLease struct{ Lease }

func (heldLease) Release(context.Context) error { return nil }

// periodIDHint adds to err, a period call's [ErrNotFound] for id, that id
// is a user's ID when the user has records: the call expects a period ID.
func (c *Collector) periodIDHint(ctx context.Context, id string, err error) error {
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	if recs, rerr := c.cfg.Repository.Recent(ctx, id, 1); rerr == nil && len(recs) > 0 {
		return fmt.Errorf("%w (%s is a user ID: this call expects a period ID; see Collector.Subscription and Repository.ListByUser, or the calls that take the user)", err, id)
	}
	return err
}

// RequestKeyError reports a request key used before, by the same user, for
// a request with other parameters. It matches [ErrRequestKeyReused].
type RequestKeyError struct {
	// UserID and RequestKey name the request.
	UserID, RequestKey string
	// Op is the operation the key was first used for ("subscribe",
	// "cancel", "pause", "resume", "change plan", "move billing date").
	Op string
	// Fields are the request's fields whose values differ from the first
	// request's, sorted ("Op" when the key was used for another operation).
	Fields []string
}

// Error implements error.
func (e *RequestKeyError) Error() string {
	return fmt.Sprintf("%s: user %s key %q was used for a %s request; differing fields: %s",
		ErrRequestKeyReused, e.UserID, e.RequestKey, e.Op, strings.Join(e.Fields, ", "))
}

// Unwrap returns [ErrRequestKeyReused].
func (e *RequestKeyError) Unwrap() error { return ErrRequestKeyReused }

// keyedRequest is what a keyed request asked, as recorded on the history
// rows it writes (billing_request): URL query text whose names starting
// with an upper-case letter are the request's fields (Op among them), and
// whose lower-case names say which request it is (key) and what the first
// call decided (periods, refund, ...). Two requests are the same when
// their fields are.
type keyedRequest struct{ v url.Values }

// newKeyedRequest starts the record of request key key of operation op.
func newKeyedRequest(op, key string) keyedRequest {
	return keyedRequest{v: url.Values{"Op": {op}, "key": {key}}}
}

// field records a field of the request; a zero value (as its text) is
// left out, so that a default and its absence are the same request.
func (r keyedRequest) field(name, value string) keyedRequest {
	if value != "" && value != "0" && value != "false" {
		r.v.Set(name, value)
	}
	return r
}

// time records a time field, as UTC text with its fraction.
func (r keyedRequest) time(name string, t time.Time) keyedRequest {
	if t.IsZero() {
		return r
	}
	return r.field(name, t.UTC().Format(time.RFC3339Nano))
}

// set records what the first call decided (a lower-case name).
func (r keyedRequest) set(name string, values ...string) keyedRequest {
	r.v[name] = values
	return r
}

func (r keyedRequest) op() string             { return r.v.Get("Op") }
func (r keyedRequest) key() string            { return r.v.Get("key") }
func (r keyedRequest) encode() string         { return r.v.Encode() }
func (r keyedRequest) get(name string) string { return r.v.Get(name) }

// parseKeyedRequest reads a history row's billing_request; ok is false for
// a row without one (or with text this library did not write).
func parseKeyedRequest(s string) (keyedRequest, bool) {
	if s == "" {
		return keyedRequest{}, false
	}
	v, err := url.ParseQuery(s)
	if err != nil || v.Get("key") == "" || v.Get("Op") == "" {
		return keyedRequest{}, false
	}
	return keyedRequest{v: v}, true
}

// differs returns the fields of r whose values differ from first's, sorted.
func (r keyedRequest) differs(first keyedRequest) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range []url.Values{r.v, first.v} {
		for name := range v {
			if seen[name] || !isField(name) {
				continue
			}
			seen[name] = true
			if !slices.Equal(r.v[name], first.v[name]) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func isField(name string) bool {
	return name != "" && unicode.IsUpper(rune(name[0]))
}

// reused returns the [*RequestKeyError] of r given again after first, or
// nil when r is the same request.
func (r keyedRequest) reused(userID string, first keyedRequest) error {
	if d := r.differs(first); len(d) > 0 {
		return &RequestKeyError{UserID: userID, RequestKey: r.key(), Op: first.op(), Fields: d}
	}
	return nil
}

// subscribeRequest is what req asked, its defaults applied.
func subscribeRequest(req SubscribeRequest) keyedRequest {
	term := req.Term
	if term == "" {
		term = TermMonthly
	}
	r := newKeyedRequest("subscribe", req.RequestKey).
		field("Tier", req.Tier).field("Term", string(term)).
		field("Interval", fmt.Sprint(max(req.Interval, 1))).
		time("FirstBillingDate", req.FirstBillingDate).
		field("AnchorDay", fmt.Sprint(req.AnchorDay)).
		field("FridayBilling", fmt.Sprint(req.FridayBilling)).
		field("FridayWeek", fmt.Sprint(req.FridayWeek)).
		field("PauseMonths", fmt.Sprint(req.PauseMonths))
	if req.Amount != 0 && req.Amount != ListPrice { // both mean the list price
		r = r.field("Amount", req.Amount.String())
	}
	if req.TrialDays != 0 || !req.TrialEnd.IsZero() { // absent on requests without, as before
		r = r.field("TrialDays", fmt.Sprint(req.TrialDays)).time("TrialEnd", req.TrialEnd).
			field("AllowRepeatTrial", fmt.Sprint(req.AllowRepeatTrial))
	}
	return r.field("CouponID", req.CouponID).field("Code", FoldCode(req.Code))
}

// checkSubscribeRepeat refuses req, a repeat of the request that created
// the period id, when that request asked for something else: it reads the
// user's history rows and compares req with the request recorded on the
// period's first row. A first row without one (written before the library
// recorded requests), no row at all, or no [Config.History] to read them
// from: the repeat is answered, as it always was.
func (c *Collector) checkSubscribeRepeat(ctx context.Context, req SubscribeRequest, id string) error {
	if c.cfg.History == nil {
		return nil
	}
	rows, err := c.cfg.History.ListByUser(ctx, req.UserID)
	if err != nil {
		return fmt.Errorf("read the history of user %s: %w", req.UserID, err)
	}
	for _, r := range rows {
		if r.SubscriptionID != id {
			continue
		}
		first, ok := parseKeyedRequest(r.Request)
		if !ok {
			return nil
		}
		return subscribeRequest(req).reused(req.UserID, first)
	}
	return nil
}
