package faultsim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

// This file is the PlanChanges scenario's plan changes charged at once
// (billing.ProrateNow): an upgrade's difference is a one-off charge of
// its own (billing.Period.IsOneOff), written with the change and
// collected by the same call; declined it is owed, unknown it is in
// flight until a repeat of the request (or a run) resolves it,
// rate-limited it is left for the next run. The requests are retried
// after a fault and repeated after a success, and the one-off charges
// checked after every step.

// The invariants of the one-off charges.
const (
	invOneOffCharge = "a plan change's one-off charge is charged its Due, at most once, and its request answers it as it stands"
	invOneOffPeriod = "no period opens after a plan change's one-off charge"
)

// periodsOf returns the records of recs that are periods of the
// schedule: all but the one-off charges.
func periodsOf(recs []billing.Period) []billing.Period {
	if !slices.ContainsFunc(recs, func(r billing.Period) bool { return r.IsOneOff() }) {
		return recs
	}
	return slices.DeleteFunc(slices.Clone(recs), func(r billing.Period) bool { return r.IsOneOff() })
}

// keyedNow makes the plan change req of u, charged at once, on h; after
// a success, sometimes, its repeat (at once or up to three days later),
// which may only collect a one-off charge left uncollected; after a
// fault that may pass, most often, the client's retry, seconds to three
// hours later (a request still running at the processor finishes within
// its timeout, two hours), and again after a fault. Every answer is
// checked against the one-off charge as stored.
func (s *Sim) keyedNow(ctx context.Context, h *host, u string, req billing.ChangePlanRequest, d, i int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	kind := opChargeNow
	id := billing.OneOffChargeID(u, req.RequestKey)
	call := func(ctx context.Context, h *host) (billing.UserChange, error) { return h.col.ChangePlan(ctx, req) }
	out, err := call(ctx, h)
	s.checkChargeAnswer(ctx, u, kind, id, out, err)
	x := draw(seed, "repeat", kind, d, i)
	switch {
	case err == nil && x < 0.25:
		s.repeat(ctx, s.pickHost("repeat now", kind, d, i), u, kind, id, call)
	case err == nil && x < 0.5:
		at := now.Add(between(seed, time.Minute, 72*time.Hour, "repeat at", kind, d, i))
		h2 := s.pickHost("repeat later", kind, d, i)
		s.at(at, h2.name, kind+" of "+u+" repeated", func(ctx context.Context) { s.repeat(ctx, h2, u, kind, id, call) })
	case err != nil && retriable(err) && x < 0.85:
		s.retryNow(now, u, kind, id, call, d, i, 0)
	}
	return chargeOutcome(out, err)
}

// retryNow schedules try n+1 of a plan change charged at once that
// failed for a reason that may pass.
func (s *Sim) retryNow(now time.Time, u, kind, id string, call func(context.Context, *host) (billing.UserChange, error), d, i, n int) {
	seed := s.opts.Seed
	at := now.Add(between(seed, time.Second, 3*time.Hour, "retry now at", kind, d, i, n))
	h := s.pickHost("retry now", kind, d, i, n)
	s.at(at, h.name, kind+" of "+u+" retried", func(ctx context.Context) {
		if s.stop {
			return
		}
		out, err := call(ctx, h)
		s.res.Ops[kind+" (retried after a fault): "+chargeOutcome(out, err)]++
		s.checkChargeAnswer(ctx, u, kind+" retried", id, out, err)
		if err != nil && retriable(err) && n < 3 {
			s.retryNow(s.clock.Now(), u, kind, id, call, d, i, n+1)
		}
	})
}

// chargeOutcome names the outcome of a plan change charged at once: the
// error's, or the one-off charge's status.
func chargeOutcome(out billing.UserChange, err error) string {
	var inFlight *billing.InFlightError
	switch {
	case errors.As(err, &inFlight):
		return "unknown outcome"
	case err != nil:
		return planClassify(err)
	case out.Charge == nil:
		return "ok, nothing charged at once"
	}
	return "ok, its one-off charge " + string(out.Charge.Status)
}

// checkChargeAnswer checks the answer of a plan change of u charged at
// once, whose one-off charge (if it made one) is id: a success answers
// the one-off charge as stored, with an outcome (not in flight), or none
// when none is stored; an unknown outcome of the one-off charge leaves
// it in flight.
func (s *Sim) checkChargeAnswer(ctx context.Context, u, what, id string, out billing.UserChange, err error) {
	var inFlight *billing.InFlightError
	if err != nil && (!errors.As(err, &inFlight) || inFlight.SubscriptionID != id) {
		return
	}
	recs, rerr := s.raw.ListByUser(ctx, u)
	if rerr != nil {
		s.fail("the store answers", []string{fmt.Sprintf("ListByUser(%s): %v", u, rerr)})
		return
	}
	var stored *billing.Period
	for i := range recs {
		if recs[i].SubscriptionID == id {
			stored = &recs[i]
		}
	}
	s.res.Checks[invOneOffCharge]++
	var bad []string
	switch {
	case err != nil && (stored == nil || !stored.InFlight()):
		bad = append(bad, fmt.Sprintf("user %s: %s answered the one-off charge %s in flight (%v); it is stored as %s", u, what, id, err, descOpt(stored)))
	case err != nil:
	case stored == nil && out.Charge != nil:
		bad = append(bad, fmt.Sprintf("user %s: %s answered the one-off charge %s; none is stored", u, what, desc(out.Charge)))
	case stored == nil:
	case out.Charge == nil:
		bad = append(bad, fmt.Sprintf("user %s: %s answered no one-off charge; %s is stored", u, what, desc(stored)))
	case out.Charge.SubscriptionID != id || out.Charge.Status != stored.Status || out.Charge.InFlight() != stored.InFlight():
		bad = append(bad, fmt.Sprintf("user %s: %s answered the one-off charge %s; it is stored as %s", u, what, desc(out.Charge), desc(stored)))
	case stored.InFlight():
		bad = append(bad, fmt.Sprintf("user %s: %s succeeded, leaving its one-off charge in flight: %s", u, what, desc(stored)))
	}
	s.fail(invOneOffCharge, withTrail(bad, s.trail(ctx, u)))
}

// checkOneOffs checks u's one-off charges (records recs, ascending by
// billing date; ledger the processor's answers for u): each names a
// period of u it charges for; each charge the processor kept for one is
// its Due, and one at most; and no period was opened with a one-off
// charge's outcome (its first history row written with the row of a
// one-off charge leaving SCHEDULED: at the same last_run_date, or a
// nanosecond after when no other row is at that one), as the collector
// opens the next period with a period's outcome.
func (s *Sim) checkOneOffs(ctx context.Context, u string, recs []billing.Period, ledger []Charge) {
	oneOffs := map[string]*billing.Period{}
	ids := map[string]bool{}
	for i := range recs {
		if r := &recs[i]; r.IsOneOff() {
			oneOffs[r.SubscriptionID] = r
		} else {
			ids[r.SubscriptionID] = true
		}
	}
	if len(oneOffs) == 0 {
		return
	}
	var bad []string
	s.res.Checks[invOneOffCharge]++
	for _, id := range slices.Sorted(maps.Keys(oneOffs)) {
		if o := oneOffs[id]; !ids[o.ChargeOf] {
			bad = append(bad, fmt.Sprintf("user %s: one-off charge %s charges for %s, no period of the user", u, desc(o), o.ChargeOf))
		}
	}
	kept := map[string][]string{}
	for i := range ledger {
		c := &ledger[i]
		o := oneOffs[c.SubscriptionID]
		if o == nil || !c.Kept() {
			continue
		}
		kept[c.SubscriptionID] = append(kept[c.SubscriptionID], descCharge(c))
		if due, _, _ := o.Due(); c.Amount != due {
			bad = append(bad, fmt.Sprintf("user %s: charge %s of the one-off charge %s, whose Due is %s", u, descCharge(c), desc(o), due))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(kept)) {
		if cs := kept[id]; len(cs) > 1 {
			bad = append(bad, fmt.Sprintf("user %s: one-off charge %s charged %d times: %s", u, desc(oneOffs[id]), len(cs), strings.Join(cs, ", ")))
		}
	}
	s.fail(invOneOffCharge, withTrail(bad, s.trail(ctx, u)))

	s.res.Checks[invOneOffPeriod]++
	rows, err := s.hist.ListByUser(ctx, u)
	if err != nil {
		s.fail("the store answers", []string{fmt.Sprintf("History.ListByUser(%s): %v", u, err)})
		return
	}
	first := map[string]*billing.Period{}
	byTime := map[time.Time][]*billing.Period{}
	for i := range rows {
		r := &rows[i]
		if f, ok := first[r.SubscriptionID]; !ok || r.LastRunDate.Before(f.LastRunDate) {
			first[r.SubscriptionID] = r
		}
		byTime[r.LastRunDate] = append(byTime[r.LastRunDate], r)
	}
	var opened []string
	for _, id := range slices.Sorted(maps.Keys(first)) {
		f := first[id]
		if f.IsOneOff() {
			continue
		}
		for _, t := range []time.Time{f.LastRunDate, f.LastRunDate.Add(-time.Nanosecond)} {
			var from []*billing.Period
			for _, r := range byTime[t] {
				if r.SubscriptionID != id && r.Status != billing.StatusScheduled && r.Status != billing.StatusPaused {
					from = append(from, r)
				}
			}
			if len(from) == 0 {
				continue
			}
			if !slices.ContainsFunc(from, func(r *billing.Period) bool { return !r.IsOneOff() }) {
				opened = append(opened, fmt.Sprintf("user %s: period %s was opened with the outcome of the one-off charge %s", u, desc(f), desc(from[0])))
			}
			break
		}
	}
	s.fail(invOneOffPeriod, withTrail(opened, s.trail(ctx, u)))
}

// descOpt is desc of r, or "none".
func descOpt(r *billing.Period) string {
	if r == nil {
		return "none"
	}
	return desc(r)
}
