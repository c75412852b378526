package faultsim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// The invariants of the scenarios of this file.
const (
	invTrialPause = "a pause asked during a trial pushes the first charge by its months"
	invPaidMove   = "a date move into the paid period is refused and charges nothing"
)

// trialDates is the state of the TrialPauses and PaidDateMoves
// scenarios.
type trialDates struct {
	// reserved are the users of TrialPauses: no other operation picks
	// them, so that their first charge is the pause's to tell.
	reserved map[string]bool
}

// planTrialDates schedules day d's steps of the TrialPauses and
// PaidDateMoves scenarios.
func (s *Sim) planTrialDates(d int) {
	seed := s.opts.Seed
	day := s.opts.Start.AddDate(0, 0, d)
	if s.trialDates == nil {
		s.trialDates = &trialDates{reserved: map[string]bool{}}
	}
	if !s.opts.without(TrialPauses) && draw(seed, "trial pause", d) < 0.4 {
		t := day.Add(opsAt + between(seed, 0, 110*time.Minute, "trial pause at", d))
		h := s.pickHost("trial pause", d)
		s.at(t, h.name, "pause asked during a trial", func(ctx context.Context) {
			s.res.Ops["pause asked during a trial: "+s.trialPause(ctx, h, d)]++
		})
	}
	if !s.opts.without(PaidDateMoves) && draw(seed, "paid date move", d) < 0.5 {
		t := day.Add(afternoonAt + between(seed, 0, 7*time.Hour, "paid date move at", d))
		h := s.pickHost("paid date move", d)
		s.at(t, h.name, "date move into the paid period", func(ctx context.Context) {
			s.res.Ops["date move into the paid period: "+s.paidDateMove(ctx, h, d)]++
		})
	}
}

// reservedUser reports whether u belongs to a scenario that no other
// operation may pick.
func (s *Sim) reservedUser(u string) bool {
	return s.trialDates != nil && s.trialDates.reserved[u]
}

// trialPause signs a new user up with a trial starting within three days
// and, before the trial's period is completed, pauses the subscription
// for one to three months, by the user (Pause) or an operator
// (Pause). The first charge must come on the pause's resume date counted
// from the trial's end ([billing.Schedule.AfterPause]), not before: the model
// of the user's trial ends there, and a check after that date's runs
// looks at the first period charged.
func (s *Sim) trialPause(ctx context.Context, h *host, d int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	u := fmt.Sprintf("tp%03d", d)
	if s.opts.Store.Layout == LayoutSingleTable {
		acct := s.accounts[pick(seed, len(s.accounts), "trial pause account", d)]
		u = layout.SubscriptionRef{AccountID: acct, SubscriptionID: fmt.Sprintf("sub-tp%03d", d), SKU: skus[pick(seed, len(skus), "trial pause sku", d)]}.UserID()
	}
	start := now.Add(between(seed, time.Hour, 72*time.Hour, "trial start", d)).Truncate(time.Minute)
	req := billing.SubscribeRequest{RequestKey: "trial-pause-" + u, UserID: u, Tier: "Plus:v2", Amount: billing.MustParseAmount("9.99"),
		FirstBillingDate: start, TrialDays: trialDays}
	if draw(seed, "trial pause yearly", d) < 0.2 {
		req.Term, req.Amount = billing.TermYearly, billing.MustParseAmount("99.99")
	}
	s.trialDates.reserved[u] = true
	s.addUser(u)
	sub, err := h.col.Subscribe(ctx, req)
	if err != nil {
		return "subscribe: " + classify(err)
	}
	trial := sub.Subscription
	s.trialEnds[u] = trial.TrialEnd
	months := 1 + pick(seed, 3, "trial pause months", d)
	byUser := draw(seed, "trial pause by user", d) < 0.5
	if byUser {
		_, err = h.col.Pause(ctx, billing.PauseRequest{UserRequest: billing.UserRequest{UserID: u, RequestKey: "pause-" + u}, Months: months})
	} else {
		_, err = h.col.Periods().Pause(ctx, trial.SubscriptionID, months)
	}
	if err != nil {
		// The pause may have been written before the fault: the trial's
		// own end stays the bound, which holds either way.
		return "pause: " + classify(err)
	}
	resume, err := trial.Schedule().AfterPause(trial.TrialEnd, months)
	if err != nil {
		s.fail(invTrialPause, []string{fmt.Sprintf("user %s: PauseResumeDate(%s, %d months): %v", u, trial.TrialEnd.Format(time.DateTime), months, err)})
		return "resume date"
	}
	s.trialEnds[u] = resume
	s.res.Checks[invTrialPause]++
	// PAUSED, or, while the trial's own time runs on, TRIALING with the
	// pause pending (PauseAt).
	if v, err := h.col.Subscription(ctx, u); err == nil && v.Status != billing.SubscriptionPaused &&
		(v.Status != billing.SubscriptionTrialing || v.PauseAt.IsZero()) {
		s.fail(invTrialPause, withTrail([]string{fmt.Sprintf("user %s: paused for %d months during the trial ending %s, the view says %s",
			u, months, trial.TrialEnd.Format(time.DateTime), v.Status)}, s.trail(ctx, u)))
	}
	at := resume.Truncate(24*time.Hour).AddDate(0, 0, 1).Add(strictAt)
	s.at(at, "-", "check the first charge of "+u+" after its trial's pause", func(ctx context.Context) {
		s.checkTrialPause(ctx, u, trial, months, resume)
	})
	return fmt.Sprintf("ok (%d months)", months)
}

// checkTrialPause checks, after the runs of the day after resume, that
// u (subscribed with trial, paused during it for months months) was
// charged for no period billed before resume, and that the period on
// resume is open or was charged (unless the pause runs have not reached
// it yet: abandoned runs).
func (s *Sim) checkTrialPause(ctx context.Context, u string, trial billing.Period, months int, resume time.Time) {
	if s.stop {
		return
	}
	recs, err := s.raw.ListByUser(ctx, u)
	if err != nil {
		s.fail("the store answers", []string{fmt.Sprintf("ListByUser(%s): %v", u, err)})
		return
	}
	s.res.Checks[invTrialPause]++
	byID := map[string]billing.Period{}
	on := false
	for _, r := range recs {
		byID[r.SubscriptionID] = r
		on = on || r.BillingDate.Equal(resume)
	}
	var bad []string
	for _, c := range s.proc.ledger() {
		if r, ok := byID[c.SubscriptionID]; c.UserID == u && ok && r.BillingDate.Before(resume) {
			bad = append(bad, fmt.Sprintf("user %s: charge %s for %s, billed before the pause's end %s", u, descCharge(&c), desc(&r), resume.Format(time.DateTime)))
		}
	}
	latest := recs[len(recs)-1]
	if !on && !(latest.Status == billing.StatusPaused && latest.BillingDate.Before(resume)) {
		bad = append(bad, fmt.Sprintf("user %s: trial %s paused for %d months: no period on the pause's end %s; latest %s",
			u, desc(&trial), months, resume.Format(time.DateTime), desc(&latest)))
	}
	if !on {
		s.res.Ops["pause asked during a trial: not advanced at the check"]++
	}
	s.fail(invTrialPause, withTrail(bad, s.trail(ctx, u)))
}

// paidDateMove asks, by the user (MoveBillingDate) or an operator
// (ChangeBillingDate), to move the renewal of a user whose last period
// is paid to a date inside that paid period: the move must be refused
// with a [*billing.DateMoveError] (or an error that may pass), nothing
// written, the renewal still on its date.
func (s *Sim) paidDateMove(ctx context.Context, h *host, d int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	var paidEnd time.Time
	u, r, ok := s.find(ctx, 25, func(recs []billing.Period) (billing.Period, bool) {
		if recs = periodsOf(recs); len(recs) < 2 {
			return billing.Period{}, false
		}
		r, prev := recs[len(recs)-1], recs[len(recs)-2]
		if r.Status != billing.StatusScheduled || r.InFlight() || r.LastAttempt.Number != 0 || !r.InitialRunDate.IsZero() ||
			prev.Status != billing.StatusCompleted || prev.Amount <= 0 || prev.IsTrial() {
			return billing.Period{}, false
		}
		end, err := prev.Schedule().Next(prev.BillingDate)
		if err != nil || r.BillingDate.Before(end) || end.Sub(latestOf(prev.BillingDate, now.AddDate(0, 0, -20))) < 4*time.Hour {
			return billing.Period{}, false
		}
		paidEnd = end
		return r, true
	}, "paid date move", d)
	if !ok {
		return "no target"
	}
	recs := periodsOf(s.records[u])
	prev := recs[len(recs)-2]
	lo := latestOf(prev.BillingDate, now.AddDate(0, 0, -20)).Add(time.Hour)
	date := lo.Add(between(seed, 0, paidEnd.Sub(lo)-time.Hour, "paid date move to", d)).Truncate(time.Second)
	if r.BillingWeek != 0 {
		// A Friday plan moves to a Friday only (another day is refused
		// for that): the Friday inside the paid period nearest the date.
		for date.Weekday() != time.Friday {
			date = date.AddDate(0, 0, 1)
		}
		if !date.Before(paidEnd) {
			date = date.AddDate(0, 0, -7)
		}
		if !date.After(lo) {
			return "no Friday inside the paid period"
		}
	}
	byUser := draw(seed, "paid date move by user", d) < 0.5
	var err error
	if byUser {
		// Without proration, as Periods.Move: a prorated move into the
		// paid period is accepted, with a credit (PlanChanges moves so).
		_, err = h.col.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: billing.UserRequest{UserID: u, RequestKey: fmt.Sprintf("move-in-%d", d)},
			Date: date, Proration: billing.ProrateNone})
	} else {
		_, err = h.col.Periods().Move(ctx, r.SubscriptionID, date)
	}
	s.res.Checks[invPaidMove]++
	what := fmt.Sprintf("user %s: move of %s to %s, inside the period paid by %s (until %s)", u, desc(&r), date.Format(time.DateTime), desc(&prev), paidEnd.Format(time.DateTime))
	var dme *billing.DateMoveError
	switch {
	case err == nil:
		s.fail(invPaidMove, withTrail([]string{what + ": accepted"}, s.trail(ctx, u)))
		return "accepted"
	case retriable(err):
		return classify(err)
	case !errors.As(err, &dme) || dme.PaidThrough.IsZero() && !dme.Later && dme.PeriodID == prev.SubscriptionID:
		s.fail(invPaidMove, withTrail([]string{fmt.Sprintf("%s: refused without a *billing.DateMoveError naming the paid period: %v", what, err)}, s.trail(ctx, u)))
		return classify(err)
	case !dme.PaidThrough.IsZero() && !dme.PaidThrough.Equal(paidEnd):
		s.fail(invPaidMove, withTrail([]string{fmt.Sprintf("%s: refused as paid through %s", what, dme.PaidThrough.Format(time.DateTime))}, s.trail(ctx, u)))
		return classify(err)
	}
	after, err := s.raw.ListByUser(ctx, u)
	if err != nil {
		s.fail("the store answers", []string{fmt.Sprintf("ListByUser(%s): %v", u, err)})
		return "store"
	}
	for _, a := range after {
		if a.SubscriptionID == r.SubscriptionID && !a.BillingDate.Equal(r.BillingDate) {
			s.fail(invPaidMove, withTrail([]string{fmt.Sprintf("%s: refused, but the renewal is now %s", what, desc(&a))}, s.trail(ctx, u)))
		}
	}
	return "refused"
}
