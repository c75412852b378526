package faultsim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dynabill/billing"
)

// This file is the Dunning scenario's card updates (a declined customer
// gives a new card: Collector.PaymentMethodUpdated with a request key,
// sometimes repeated) and the invariants checked on every user read.

// Ways a declined customer recovers (drawn per user).
const (
	recoverByCard    = "a new card"
	recoverOnSession = "on session"
	recoverNever     = "never"
)

// recoveryOf draws how user u's declines end: a new card given some
// days into the dunning, on session (recovery.go confirms declines on
// session), or never.
func (s *Sim) recoveryOf(u string) string {
	switch x := draw(s.opts.Seed, "dunning recovery", u); {
	case x < 0.45:
		return recoverByCard
	case x < 0.65:
		return recoverOnSession
	}
	return recoverNever
}

// planDunning schedules day d's card updates: a user whose period is in
// dunning and who recovers by a new card gives it on a day drawn from 1
// to 18 days after the dunning started (some after the final action),
// at a drawn time. And of a third of the periods entering dunning, the
// next period is moved (Periods.Move) to be due within the dunning: the
// runs must hold it.
func (s *Sim) planDunning(d int) {
	if s.dun == nil {
		return
	}
	seed := s.opts.Seed
	day := s.opts.Start.AddDate(0, 0, d)
	for _, u := range s.users {
		for _, r := range s.records[u] {
			dn := &r.Dunning
			if r.Status != billing.StatusError || !dn.Started() {
				continue
			}
			if draw(seed, "hold", r.SubscriptionID) < 0.35 && dayOf(dn.Since, 1+pick(seed, 5, "hold after", r.SubscriptionID)).Equal(day) {
				t := day.Add(between(seed, 0, 23*time.Hour, "hold at", u, d))
				h := s.pickHost("hold", u, d)
				s.at(t, h.name, "next period of "+u+" moved into its dunning", func(ctx context.Context) { s.moveIntoDunning(ctx, h, u, d) })
			}
			if s.recoveryOf(u) != recoverByCard {
				continue
			}
			after := 1 + pick(seed, 18, "card after", r.SubscriptionID)
			if !dayOf(dn.Since, after).Equal(day) {
				continue
			}
			key := fmt.Sprintf("card-%s-%d", u, d)
			t := day.Add(between(seed, 0, 23*time.Hour, "card at", u, d))
			h := s.pickHost("card", u, d)
			s.at(t, h.name, "new card of "+u, func(ctx context.Context) { s.cardUpdated(ctx, h, u, key, d) })
			break
		}
	}
}

// moveIntoDunning moves u's SCHEDULED period to a date within days
// (Periods.Move, as an operator would): due while the period before it
// is in dunning, the runs must hold it.
func (s *Sim) moveIntoDunning(ctx context.Context, h *host, u string, d int) {
	now := s.clock.Now()
	for _, r := range s.records[u] {
		if r.Status != billing.StatusScheduled || r.InFlight() || r.IsOneOff() {
			continue
		}
		date := now.Add(between(s.opts.Seed, time.Hour, 6*24*time.Hour, "hold to", u, d)).Truncate(time.Second)
		_, err := h.col.Periods().Move(ctx, r.SubscriptionID, date)
		s.res.Ops["next period moved into its dunning: "+classify(err)]++
		return
	}
	s.res.Ops["next period moved into its dunning: no target"]++
}

// cardUpdated is user u's new card: the processor charges it from now
// on; the host tells the collector with key, and sometimes repeats the
// call with it (at once on another host, or minutes to days later), or
// retries it after a fault that may pass.
func (s *Sim) cardUpdated(ctx context.Context, h *host, u, key string, d int) {
	seed, now := s.opts.Seed, s.clock.Now()
	s.dun.mu.Lock()
	if _, ok := s.dun.carded[u]; !ok {
		s.dun.carded[u] = now
	}
	s.dun.mu.Unlock()
	req := billing.UserRequest{UserID: u, RequestKey: key}
	out, err := h.col.PaymentMethodUpdated(ctx, req)
	s.res.Ops["payment method updated: "+dunOutcome(out, err)]++
	x := draw(seed, "card repeat", u, d)
	switch {
	case err == nil && x < 0.25:
		s.cardRepeat(ctx, s.pickHost("card repeat now", u, d), u, req)
	case err == nil && x < 0.5:
		h2 := s.pickHost("card repeat later", u, d)
		s.at(now.Add(between(seed, time.Minute, 72*time.Hour, "card repeat at", u, d)), h2.name, "new card of "+u+" told again",
			func(ctx context.Context) { s.cardRepeat(ctx, h2, u, req) })
	case err != nil && retriable(err) && x < 0.7:
		h2 := s.pickHost("card retry", u, d)
		s.at(now.Add(between(seed, time.Second, 10*time.Minute, "card retry at", u, d)), h2.name, "new card of "+u+" retried after a fault",
			func(ctx context.Context) {
				out, err := h2.col.PaymentMethodUpdated(ctx, req)
				s.res.Ops["payment method updated (retried after a fault): "+dunOutcome(out, err)]++
			})
	}
}

// cardRepeat repeats a card update that succeeded, with its request key:
// when no attempt of the user was left in flight, the processor must act
// on nothing for the user.
func (s *Sim) cardRepeat(ctx context.Context, h *host, u string, req billing.UserRequest) {
	if s.stop {
		return
	}
	inFlight := false
	recs, err := s.raw.ListByUser(ctx, u)
	if err != nil {
		s.fail("the store answers", []string{err.Error()})
		return
	}
	for _, r := range recs {
		inFlight = inFlight || r.InFlight()
	}
	before := len(s.proc.ledgerOf(u))
	out, err := h.col.PaymentMethodUpdated(ctx, req)
	s.res.Ops["payment method updated (repeated): "+dunOutcome(out, err)]++
	if inFlight {
		return
	}
	s.res.Checks[invDunRepeat]++
	if after := s.proc.ledgerOf(u); len(after) != before {
		var bad []string
		for _, c := range after[before:] {
			bad = append(bad, fmt.Sprintf("user %s: the card update with key %s, repeated, charged %s", u, req.RequestKey, descCharge(&c)))
		}
		s.fail(invDunRepeat, withTrail(bad, s.trail(ctx, u)))
	}
}

// dunOutcome names what a card update did.
func dunOutcome(out billing.PaymentMethodUpdate, err error) string {
	if err != nil {
		return classify(err)
	}
	if out.Repeated {
		return "repeated"
	}
	if len(out.Periods) == 0 {
		return "nothing owed"
	}
	return fmt.Sprintf("%d periods, last %s", len(out.Periods), out.Periods[len(out.Periods)-1].Outcome)
}

// ledgerOf returns copies of the answers acted on for user, in order.
func (p *Processor) ledgerOf(user string) []Charge {
	var out []Charge
	for _, c := range p.ledger() {
		if c.UserID == user {
			out = append(out, c)
		}
	}
	return out
}

// checkDunningUser checks u's records and history: a paid period whose
// dunning started has it ended; a period's end, once written, is never
// rewritten (every later history row keeps it).
func (s *Sim) checkDunningUser(ctx context.Context, u string, recs []billing.Period) {
	var rec, fin []string
	for i := range recs {
		r := &recs[i]
		if r.Status == billing.StatusCompleted && r.Dunning.Started() && r.Dunning.Ended.IsZero() {
			rec = append(rec, fmt.Sprintf("user %s: %s is paid, its dunning not ended", u, descDunning(r)))
		}
	}
	s.res.Checks[invDunRecovered]++
	rows, err := s.hist.ListByUser(ctx, u)
	if err != nil {
		s.fail("the store answers", []string{fmt.Sprintf("History.ListByUser(%s): %v", u, err)})
		return
	}
	slices.SortStableFunc(rows, func(a, b billing.Period) int { return a.LastRunDate.Compare(b.LastRunDate) })
	ended := map[string]*billing.Period{}
	for i := range rows {
		r := &rows[i]
		first, ok := ended[r.SubscriptionID]
		switch {
		case ok && (!r.Dunning.Ended.Equal(first.Dunning.Ended) || r.Dunning.End != first.Dunning.End):
			fin = append(fin, fmt.Sprintf("user %s: the dunning of %s ended %s at %s; a later history row has it %q at %s",
				u, r.SubscriptionID, first.Dunning.End, first.Dunning.Ended.Format(time.DateTime), r.Dunning.End, r.Dunning.Ended.Format(time.DateTime)))
		case !ok && !r.Dunning.Ended.IsZero():
			ended[r.SubscriptionID] = r
		}
	}
	s.res.Checks[invDunFinal]++
	if len(rec)+len(fin) > 0 {
		trail := s.trail(ctx, u)
		rec, fin = withTrail(rec, trail), withTrail(fin, trail)
	}
	s.fail(invDunRecovered, rec)
	s.fail(invDunFinal, fin)
}

// dunningStrict is what the strict checks expect of r, a record of u's
// (recs), under dunning at the retry run of retry: a retry the schedule
// allowed that day made (or another retry made by that run), a final action due applied; a SCHEDULED period
// held by an earlier one in dunning is not due. It returns whether r is
// judged here, and the problems.
func dunningStrict(u string, recs []billing.Period, r *billing.Period, retry time.Time) (bool, []string) {
	switch r.Status {
	case billing.StatusScheduled:
		for i := range recs {
			e := &recs[i]
			if e.BillingDate.Before(r.BillingDate) && e.Status == billing.StatusError && e.Dunning.Active() {
				return true, nil // held
			}
		}
		return false, nil
	case billing.StatusError:
	default:
		return false, nil
	}
	d := &r.Dunning
	if !d.Started() {
		return false, nil
	}
	if r.InFlight() || r.NoRetry && !d.Active() {
		return true, nil
	}
	var bad []string
	// One retry a run: a retry made late leaves the next entry due, for
	// the next run.
	retried := r.LastAttempt.Process == billing.ProcessRetry && !r.LastAttempt.Started.Before(retry)
	if days := retryDays(d.Kind); d.Active() && !r.NoRetry && !retried && d.Retries < len(days) {
		day := dayOf(d.Since, days[d.Retries])
		if !retry.Before(day) && !retry.After(dayOf(d.Since, dunFinalDay)) {
			bad = append(bad, fmt.Sprintf("user %s: retry %d due %s not made by the retry run of %s: %s",
				u, d.Retries+1, day.Format(time.DateOnly), retry.Format(time.DateTime), descDunning(r)))
		}
	}
	if d.Active() && !retry.Before(dayOf(d.Since, dunFinalDay)) {
		bad = append(bad, fmt.Sprintf("user %s: final action due %s not applied by the retry run of %s: %s",
			u, dayOf(d.Since, dunFinalDay).Format(time.DateOnly), retry.Format(time.DateTime), descDunning(r)))
	}
	return true, bad
}
