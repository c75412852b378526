package billing

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// SubscriptionStatus is the state of a subscription as a host shows it,
// derived from its open periods (see [Subscription.State]).
type SubscriptionStatus string

// The states of a subscription.
const (
	// SubscriptionActive: a SCHEDULED period (or an ACH debit awaiting
	// settlement) and nothing owed.
	SubscriptionActive SubscriptionStatus = "ACTIVE"
	// SubscriptionPastDue: an ERROR period is owed.
	SubscriptionPastDue SubscriptionStatus = "PAST_DUE"
	// SubscriptionPaused: a PAUSED period and nothing owed.
	SubscriptionPaused SubscriptionStatus = "PAUSED"
	// SubscriptionTrialing: in a trial, nothing charged yet (see
	// [SubscribeRequest.TrialDays]); the first charge is on TrialEnd.
	SubscriptionTrialing SubscriptionStatus = "TRIALING"
	// SubscriptionEnded: no open period (cancelled, stale or never
	// renewed); [Collector.Reactivate] or a new [Collector.Subscribe]
	// starts it again.
	SubscriptionEnded SubscriptionStatus = "ENDED"
)

// Subscription is a subscription as a host holds it: by its user, over
// all its billing periods. [Collector.Subscription] returns it.
type Subscription struct {
	// UserID is the user (on the single table, one subscription of an
	// account: "account#subscription#SKU").
	UserID string
	// Status sums up the open periods.
	Status SubscriptionStatus
	// Tier, Amount, Term and Interval are the plan of the latest open
	// period, or of the latest period when none is open.
	Tier     string
	Amount   Amount
	Term     Term
	Interval int
	// Open are the open periods (SCHEDULED, ERROR, ACHSENT, PAUSED),
	// ascending by billing date; Paid the COMPLETED ones.
	Open []Period
	Paid []Period
	// NextBillingDate is the billing date of the latest SCHEDULED or
	// PAUSED period (a PAUSED one is skipped, not charged, on it); zero
	// when there is none.
	NextBillingDate time.Time
	// PaidThrough is when the latest paid period ends (the billing date
	// after it by its schedule), or when a cancellation now ended the
	// access it paid for ([Period.AccessEnd]); zero when none was
	// paid. A host gating access on it grants none after it.
	PaidThrough time.Time
	// InFlight are the open periods whose attempt's outcome is not
	// recorded yet ([Period.InFlight]): no change touches them
	// before it is resolved.
	InFlight []Period
	// PendingTier and PendingAmount are a downgrade that applies from the
	// next period ("" when none is pending).
	PendingTier   string
	PendingAmount Amount
	// Trial is the user's latest trial period, if any (its TrialEnd the
	// end it was given); TrialEnd is when the trial ends now: the billing
	// date of the first paid period while it is not charged, else the
	// trial's own end. Zero when the user never had a trial.
	Trial    *Period
	TrialEnd time.Time
}

// Subscription returns the subscription of userID: its plan, state, open
// and paid periods, next billing date, in-flight attempts and pending
// downgrade, from one consistent read of the user's records. A user
// without records is [ErrNotFound]. It reads no lock and writes nothing.
func (c *Collector) Subscription(ctx context.Context, userID string) (Subscription, error) {
	recs, err := c.cfg.Repository.ListByUser(ctx, userID)
	if err != nil {
		return Subscription{}, fmt.Errorf("subscription of user %s: %w", userID, err)
	}
	if len(recs) == 0 {
		return Subscription{}, fmt.Errorf("%w: user_id=%s has no billing periods", ErrNotFound, userID)
	}
	return viewOf(userID, recs), nil
}

// viewOf builds the view of userID from its records recs (ascending).
func viewOf(userID string, recs []Period) Subscription {
	v := Subscription{UserID: userID, Status: SubscriptionEnded}
	plan := &recs[len(recs)-1]
	var owed, paused, active bool
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Status == StatusCompleted:
			v.Paid = append(v.Paid, *r)
		case !r.Status.IsTerminal():
			v.Open = append(v.Open, *r)
			plan = r
			owed = owed || r.Status == StatusError
			paused = paused || r.Status == StatusPaused
			active = active || r.Status == StatusScheduled || r.Status == StatusACHSent
			if r.Status == StatusScheduled || r.Status == StatusPaused {
				v.NextBillingDate = r.BillingDate
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
			v.Trial, v.TrialEnd = &t, r.TrialEnd
		case v.Trial != nil && requireTrialTarget(r) == nil:
			v.TrialEnd = r.BillingDate // the first paid period, moved or not
		}
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
	}
	v.Tier, v.Amount, v.Term, v.Interval = plan.ReceiptTierName, plan.Amount, plan.Term, max(plan.Interval, 1)
	if plan.IsTrial() {
		v.Amount = plan.TrialAmount
	}
	if n := len(v.Paid); n > 0 {
		last := &v.Paid[n-1]
		if end, err := followingDate(last); err == nil {
			v.PaidThrough = end
		}
		if last.IsTrial() {
			v.PaidThrough = v.TrialEnd
		}
		v.PaidThrough = accessCut(last, v.PaidThrough, recs)
	}
	return v
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
