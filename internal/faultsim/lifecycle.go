package faultsim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/calendar"
)

// The invariants of a subscription's life.
const (
	invComeBack   = "coming back on the date the paid period ends continues the subscription; a date inside it is refused"
	invRequestKey = "a request key means one request"
)

// paidRenewal accepts a user whose latest paid (COMPLETED) period is
// followed by its renewal, never attempted and billed on the date the
// paid period ends, more than two days after now: the record a
// cancellation at period end cancels.
func paidRenewal(now time.Time) func([]billing.Period) (billing.Period, bool) {
	return func(recs []billing.Period) (billing.Period, bool) {
		paid := lastPaid(recs)
		if paid == nil {
			return billing.Period{}, false
		}
		end, err := paid.Schedule().Next(paid.BillingDate)
		if paid.IsTrial() {
			end = paid.TrialEnd // a trial ends on its own date, not by the schedule
		}
		if err != nil {
			return billing.Period{}, false
		}
		for _, r := range recs {
			if r.Status == billing.StatusScheduled && r.BillingDate.Equal(end) && r.LastAttempt.Number == 0 && r.Attempt == 0 &&
				r.InitialRunDate.IsZero() && end.After(now.Add(48*time.Hour)) {
				return r, true
			}
		}
		return billing.Period{}, false
	}
}

// lastPaid is the COMPLETED period of recs billed last, or nil: a plan
// change's one-off charge is a charge, not a period of the schedule.
func lastPaid(recs []billing.Period) *billing.Period {
	var paid *billing.Period
	for i := range recs {
		if r := &recs[i]; r.Status == billing.StatusCompleted && !r.IsOneOff() && (paid == nil || r.BillingDate.After(paid.BillingDate)) {
			paid = r
		}
	}
	return paid
}

// cancelAtPeriodEnd cancels the renewal of a user whose paid period
// runs, and schedules the user's come-back before that period ends.
func (s *Sim) cancelAtPeriodEnd(ctx context.Context, h *host, d, i int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	u, renewal, ok := s.find(ctx, 25, paidRenewal(now), "cancel at period end", d, i)
	if !ok {
		return "no target"
	}
	paid := *lastPaid(s.records[u])
	if _, err := h.col.Periods().Cancel(ctx, renewal.SubscriptionID); err != nil {
		return classify(err)
	}
	end := renewal.BillingDate
	at := now.Add(between(seed, time.Hour, min(end.Sub(now)-time.Hour, 10*24*time.Hour), "come back at", u, end))
	s.at(at, s.pickHost("come back", u, end).name, "come-back of "+u, func(ctx context.Context) { s.comeBack(ctx, u, paid, renewal, 0) })
	return "ok"
}

// comeBack brings u back, by Reactivate or Subscribe, on the date its
// paid period paid ends (the billing date of renewal, the renewal it
// cancelled); sometimes first on a date inside the paid period, which
// must be refused. A refusal that may pass is tried again an hour later.
func (s *Sim) comeBack(ctx context.Context, u string, paid, renewal billing.Period, n int) {
	seed, now := s.opts.Seed, s.clock.Now()
	end := renewal.BillingDate
	for _, r := range s.records[u] {
		if !r.Status.IsTerminal() || r.BillingDate.After(end) || r.SubscriptionID == renewal.SubscriptionID && r.Status != billing.StatusCancelled {
			s.res.Ops["come back: the user moved on meanwhile"]++
			return
		}
	}
	h := s.pickHost("come back", u, end, n)
	bySubscribe := draw(seed, "come back by subscribe", u, end) < 0.5
	// One come-back, one request key: the cancelled renewal names it (a
	// user who leaves and comes back twice on one date makes two requests;
	// the same key would be answered with the first one's period).
	on := func(date time.Time, anchor bool) (billing.Period, error) {
		if !bySubscribe {
			return h.col.Reactivate(ctx, u, date)
		}
		req := billing.SubscribeRequest{RequestKey: fmt.Sprintf("come-back-%s-%s", renewal.SubscriptionID, date.Format(time.RFC3339)), UserID: u,
			Tier: renewal.ReceiptTierName, Amount: renewal.Amount, Term: renewal.Term, Interval: renewal.Interval, FirstBillingDate: date}
		if renewal.BillingWeek > 0 && calendar.FridayWeek(date) > 0 {
			req.FridayBilling = true
		} else if anchor && renewal.BillingWeek == 0 && renewal.Term != billing.TermWeekly {
			req.AnchorDay = renewal.EffectiveAnchorDay()
		}
		out, err := h.col.Subscribe(ctx, req)
		return out.Subscription, err
	}
	how := map[bool]string{false: "reactivate", true: "subscribe"}[bySubscribe]
	oldest := now.AddDate(0, 0, -28)
	if n == 0 && draw(seed, "come back inside", u, end) < 0.4 {
		from := latestOf(paid.BillingDate, oldest).Add(time.Hour)
		if end.Sub(from) > 2*time.Hour {
			inside := end.Add(-between(seed, time.Hour, end.Sub(from), "inside", u, end)).Truncate(time.Second)
			rec, err := on(inside, false)
			s.res.Checks[invComeBack]++
			s.res.Ops["come back inside the paid period ("+how+"): "+classify(err)]++
			switch {
			case err == nil:
				s.fail(invComeBack, withTrail([]string{fmt.Sprintf("user %s: %s on %s, inside the period paid by %s (until %s), was accepted: %s",
					u, how, inside.Format(time.DateTime), desc(&paid), end.Format(time.DateTime), desc(&rec))}, s.trail(ctx, u)))
				return
			case !errors.Is(err, billing.ErrInvalidDate) && !retriable(err):
				s.fail(invComeBack, withTrail([]string{fmt.Sprintf("user %s: %s on %s, inside the period paid by %s (until %s), refused without billing.ErrInvalidDate: %v",
					u, how, inside.Format(time.DateTime), desc(&paid), end.Format(time.DateTime), err)}, s.trail(ctx, u)))
				return
			}
		}
	}
	if end.Before(oldest) {
		s.res.Ops["come back: too late"]++
		return
	}
	rec, err := on(end, true)
	s.res.Ops["come back on the paid period's end ("+how+"): "+classify(err)]++
	if err != nil {
		if retriable(err) && n < 6 {
			s.at(now.Add(time.Hour), s.pickHost("come back", u, end, n+1).name, "come-back of "+u+" (again)", func(ctx context.Context) {
				s.comeBack(ctx, u, paid, renewal, n+1)
			})
			return
		}
		s.res.Checks[invComeBack]++
		s.fail(invComeBack, withTrail([]string{fmt.Sprintf("user %s: %s on %s, the end of the period paid by %s, refused: %v",
			u, how, end.Format(time.DateTime), desc(&paid), err)}, s.trail(ctx, u)))
		return
	}
	s.res.Checks[invComeBack]++
	recs, err := s.raw.ListByUser(ctx, u)
	if err != nil {
		s.fail("the store answers", []string{fmt.Sprintf("ListByUser(%s): %v", u, err)})
		return
	}
	var open []billing.Period
	for _, r := range recs {
		if r.Status == billing.StatusScheduled || r.Status == billing.StatusPaused {
			open = append(open, r)
		}
	}
	if len(open) != 1 || !open[0].BillingDate.Equal(end) || !rec.BillingDate.Equal(end) {
		var ds []string
		for _, r := range open {
			ds = append(ds, desc(&r))
		}
		s.fail(invComeBack, withTrail([]string{fmt.Sprintf("user %s: %s on %s, the end of the period paid by %s, answered %s; open periods now: %v",
			u, how, end.Format(time.DateTime), desc(&paid), desc(&rec), ds)}, s.trail(ctx, u)))
	}
}

// reprice rewrites, with Repository.AddAll, one to three users' SCHEDULED
// records as a host's batch re-reads them: a price change (the amount
// changed, every other attribute as read, last_run_date included); or,
// now and then, an upgrade whose two records (the old one CANCELLED, the
// new one SCHEDULED) carry the batch's time as last_run_date both.
func (s *Sim) reprice(ctx context.Context, h *host, d, i int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	var batch []billing.Period
	var users []string
	for j := range 1 + pick(seed, 3, "reprice users", d, i) {
		u, r, ok := s.find(ctx, 25, withStatus(func(r *billing.Period) bool { return !r.InFlight() }, billing.StatusScheduled), "reprice", d, i, j)
		if !ok || contains(users, u) {
			continue
		}
		users = append(users, u)
		if draw(seed, "reprice as upgrade", d, i, j) < 0.3 {
			old := r
			old.Status, old.CompletionDate, old.LastRunDate = billing.StatusCancelled, now, now
			up := r
			up.SubscriptionID, up.Amount, up.ReceiptTierName = nextID(r.SubscriptionID+"|reprice", now), billing.MustParseAmount("19.99"), "Premium:v2"
			up.CreatedDate, up.LastRunDate, up.IsPendingDowngrade, up.PendingTierName, up.PendingAmount = now, now, false, "", 0
			up.InitialRunDate, up.Attempt, up.LastAttempt = time.Time{}, 0, billing.Attempt{}
			batch = append(batch, old, up)
			continue
		}
		r.Amount += billing.MustParseAmount("0.50")
		batch = append(batch, r)
	}
	if len(batch) == 0 {
		return "no target"
	}
	_, err := h.repo.AddAll(ctx, batch)
	return classify(err)
}

// trialMoved follows, in the model of u's trial, a date move of r (as
// read before the move) to date: a trial period not completed yet moves
// whole, its end as far as its start; the first paid period after the
// trial, not attempted yet (paused or not: a resume charges it on its
// date), is the trial's end, so the trial now ends on date. A move of any other period leaves the trial's end as it was.
func (s *Sim) trialMoved(u string, r *billing.Period, date time.Time) {
	end, ok := s.trialEnds[u]
	if !ok || !r.InitialRunDate.IsZero() || r.LastAttempt.Number != 0 {
		return
	}
	switch {
	case r.IsTrial():
		s.trialEnds[u] = end.Add(date.Sub(r.BillingDate))
	case (r.IsAfterTrial() || !s.charged(u)) && (r.Status == billing.StatusScheduled || r.Status == billing.StatusPaused):
		// The first paid period, by its marker or, where a write dropped
		// it (a come-back reopening it), as the first the user is charged.
		s.trialEnds[u] = date
	}
}

// charged reports whether the processor holds a charge of u.
func (s *Sim) charged(u string) bool {
	for _, c := range s.proc.ledger() {
		if c.UserID == u {
			return true
		}
	}
	return false
}

// trialReactivated follows, in the model of u's trial, a reactivation
// that opened rec: a paid period on the date the host chose, which brings
// no trial (a trial cancelled before it ended is over).
func (s *Sim) trialReactivated(u string, rec *billing.Period) {
	if end, ok := s.trialEnds[u]; ok && rec.BillingDate.Before(end) {
		s.trialEnds[u] = rec.BillingDate
	}
}
