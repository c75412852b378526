package faultsim

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

// invCancelNow is the invariant of the CancelNowComeBacks scenario.
const invCancelNow = "a cancellation now ends access at the cancel, refunds the unused share once, and a come-back that day is charged from that day"

// cancelNowModel is what the CancelNowComeBacks scenario knows of its
// users: the instants their cancellations now ended access at, and the
// users whose cancellation failed part-way for good (their records may
// carry an end of access the model never saw: they are no longer
// checked).
type cancelNowModel struct {
	ends    map[string][]time.Time
	unknown map[string]bool
	// view reads the library's view of a user from the store itself,
	// without the hosts' faults.
	view *billing.Collector
}

func (s *Sim) cancelNowModel() *cancelNowModel {
	if s.cancelNow == nil {
		col, err := billing.NewCollector(billing.Config{Repository: s.raw, History: s.hist, Clock: s.clock,
			Locker: billingtest.NewLocker(s.clock, time.Minute), Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: s.clock})})
		if err != nil {
			panic(err)
		}
		s.cancelNow = &cancelNowModel{ends: map[string][]time.Time{}, unknown: map[string]bool{}, view: col}
	}
	return s.cancelNow
}

// planCancelNow schedules, on some days, a cancellation now with a
// refund of a user whose paid period runs, followed the same day by the
// user's come-back (CancelNowComeBacks).
func (s *Sim) planCancelNow(d int) {
	seed := s.opts.Seed
	if s.opts.without(CancelNowComeBacks) || draw(seed, "cancel now", d) >= 0.6 {
		return
	}
	day := s.opts.Start.AddDate(0, 0, d)
	t := day.Add(opsAt + between(seed, 0, 110*time.Minute, "cancel now at", d))
	s.at(t, s.pickHost("cancel now", d).name, "cancel now with a refund", func(ctx context.Context) {
		s.res.Ops["cancel now: "+s.cancelNowStart(ctx, d)]++
	})
}

// paidRunning accepts a user whose latest paid period (not a trial's, of
// a positive amount) runs at now, and whose open periods, at least one,
// are SCHEDULED or PAUSED with no attempt in flight: a user a
// cancellation now may act on and owes a refund to. It returns the
// latest open period (the plan a come-back takes again).
func paidRunning(now time.Time) func([]billing.Period) (billing.Period, bool) {
	return func(recs []billing.Period) (billing.Period, bool) {
		paid := lastPaid(recs)
		if paid == nil || paid.IsTrial() || paid.Amount <= 0 || paid.BillingDate.After(now) {
			return billing.Period{}, false
		}
		if end, err := paid.Schedule().Next(paid.BillingDate); err != nil || !now.Before(end) {
			return billing.Period{}, false
		}
		var plan *billing.Period
		for i := range recs {
			r := &recs[i]
			if r.Status.IsTerminal() {
				continue
			}
			if r.Status != billing.StatusScheduled && r.Status != billing.StatusPaused || r.InFlight() {
				return billing.Period{}, false
			}
			plan = r
		}
		if plan == nil {
			return billing.Period{}, false
		}
		return *plan, true
	}
}

// cancelNowStart picks the user of day d's cancellation now and makes it.
func (s *Sim) cancelNowStart(ctx context.Context, d int) string {
	m := s.cancelNowModel()
	u, plan, ok := s.find(ctx, 25, func(recs []billing.Period) (billing.Period, bool) {
		if len(recs) == 0 || m.unknown[recs[0].UserID] {
			return billing.Period{}, false
		}
		return paidRunning(s.clock.Now())(recs)
	}, "cancel now", d)
	if !ok {
		return "no target"
	}
	return s.cancelNowTry(ctx, u, fmt.Sprintf("cancel-now-%s-d%d", u, d), plan, 0)
}

// cancelNowTry makes try n of the cancellation now of u with key, plan
// being the plan of its latest open period as read before the first
// try; a failure that may pass is tried again an hour later with the
// same key. It checks the answer, the view, and schedules the come-back.
func (s *Sim) cancelNowTry(ctx context.Context, u, key string, plan billing.Period, n int) string {
	m, now := s.cancelNowModel(), s.clock.Now()
	before := s.records[u]
	h := s.pickHost("cancel now try", u, key, n)
	out, err := h.col.Cancel(ctx, billing.CancelRequest{
		UserRequest: billing.UserRequest{UserID: u, RequestKey: key}, When: billing.CancelNow})
	switch {
	case err != nil && retriable(err) && n < 6:
		m.unknown[u] = true // until the repeat answers: it may have written part of it
		s.at(now.Add(time.Hour), h.name, "cancel now of "+u+" (again)", func(ctx context.Context) {
			s.res.Ops["cancel now (again): "+s.cancelNowTry(ctx, u, key, plan, n+1)]++
		})
		return classify(err)
	case err != nil:
		if n == 0 {
			delete(m.unknown, u) // refused before anything was written
		}
		return classify(err)
	}
	delete(m.unknown, u)
	s.res.Checks[invCancelNow]++
	at, after := out.AccessUntil, s.clock.Now()
	var bad []string
	if at.IsZero() || at.After(after) || n == 0 && at.Before(now) {
		bad = append(bad, fmt.Sprintf("user %s: cancel now at %s answered access until %s", u, now.Format(time.DateTime), at.Format(time.RFC3339Nano)))
	}
	for _, ch := range out.Changes {
		if ch.After.Status != billing.StatusCancelled || !ch.After.AccessEnd.Equal(at) {
			bad = append(bad, fmt.Sprintf("user %s: cancel now left %s with access end %s, want CANCELLED with %s",
				u, desc(&ch.After), ch.After.AccessEnd.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano)))
		}
	}
	// The refund: the unused share of the latest paid period, by the
	// second, up to the end of access the model knows for it (a period
	// already cut by an earlier cancellation now owes nothing again),
	// with the unused share of what the plan changes charged at once for
	// it (their one-off charges, paid), rounded down once.
	if n == 0 {
		if paid := lastPaid(before); paid != nil {
			end := s.paidThrough(u, paid)
			exact := unusedShare(paid, end, at)
			for i := range before {
				if o := &before[i]; o.IsOneOff() && o.Status == billing.StatusCompleted && o.ChargeOf == paid.SubscriptionID {
					exact.Add(exact, unusedLines(o, end, at))
				}
			}
			want := billing.Amount(0)
			if exact.Sign() > 0 {
				want = billing.Amount(new(big.Int).Quo(exact.Num(), exact.Denom()).Int64())
			}
			if out.Refund != want || want > 0 && out.RefundPeriodID != paid.SubscriptionID {
				bad = append(bad, fmt.Sprintf("user %s: cancel now at %s refunds %s for %q, want %s for %s (paid until %s)",
					u, at.Format(time.DateTime), out.Refund, out.RefundPeriodID, want, desc(paid), end.Format(time.DateTime)))
			}
		}
	}
	m.ends[u] = append(m.ends[u], at)
	want := billing.SubscriptionEnded
	if out.Repeated {
		want = "" // the first try did it all: the user may have come back since
	}
	bad = append(bad, s.checkAccess(ctx, u, want)...)
	if len(bad) > 0 {
		s.fail(invCancelNow, withTrail(bad, s.trail(ctx, u)))
		return "ok (broken)"
	}
	// The come-back, the same day.
	dayEnd := now.Truncate(24 * time.Hour).Add(24*time.Hour - time.Minute)
	if back := now.Add(between(s.opts.Seed, 5*time.Minute, max(dayEnd.Sub(now), 6*time.Minute), "come back after cancel now", u, key)); back.Before(dayEnd) {
		s.at(back, s.pickHost("come back after cancel now", u, key).name, "come-back of "+u+" after cancel now", func(ctx context.Context) {
			s.res.Ops["come back after cancel now: "+s.cancelNowComeBack(ctx, u, at, plan, 0)]++
		})
	}
	return "ok"
}

// cancelNowComeBack brings u back at the clock's time, by Subscribe or
// Reactivate, after its cancellation now at at: it must be accepted and
// billed from now, the one open period, access still ending at the
// cancel until it is paid.
func (s *Sim) cancelNowComeBack(ctx context.Context, u string, at time.Time, plan billing.Period, n int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	for _, r := range s.records[u] {
		if !r.Status.IsTerminal() {
			return "the user came back meanwhile"
		}
	}
	h := s.pickHost("come back after cancel now", u, at, n)
	bySubscribe := draw(seed, "come back after cancel now by subscribe", u, at) < 0.5
	var rec billing.Period
	var err error
	if bySubscribe {
		var out billing.Subscribed
		out, err = h.col.Subscribe(ctx, billing.SubscribeRequest{RequestKey: fmt.Sprintf("back-after-cancel-now-%s-%d", u, at.UnixNano()),
			UserID: u, Tier: plan.ReceiptTierName, Amount: plan.Amount, Term: plan.Term, Interval: plan.Interval})
		rec = out.Subscription
	} else {
		rec, err = h.col.Reactivate(ctx, u, now)
	}
	how := map[bool]string{false: "reactivate", true: "subscribe"}[bySubscribe]
	switch {
	case err != nil && retriable(err) && n < 6:
		s.at(now.Add(time.Hour), h.name, "come-back of "+u+" after cancel now (again)", func(ctx context.Context) {
			s.res.Ops["come back after cancel now (again): "+s.cancelNowComeBack(ctx, u, at, plan, n+1)]++
		})
		return how + ": " + classify(err)
	case errors.Is(err, billing.ErrInvalidDate):
		s.res.Checks[invCancelNow]++
		s.fail(invCancelNow, withTrail([]string{fmt.Sprintf("user %s: %s at %s, after a cancellation now at %s, refused: %v",
			u, how, now.Format(time.DateTime), at.Format(time.DateTime), err)}, s.trail(ctx, u)))
		return how + ": refused (broken)"
	case err != nil:
		return how + ": " + classify(err)
	}
	s.res.Checks[invCancelNow]++
	var bad []string
	after := s.clock.Now()
	if rec.BillingDate.Before(at.Truncate(time.Second)) || rec.BillingDate.After(after) || n == 0 && rec.BillingDate.Before(now.Truncate(time.Second)) {
		bad = append(bad, fmt.Sprintf("user %s: %s at %s, after a cancellation now at %s, opened %s: not billed from the come-back",
			u, how, now.Format(time.DateTime), at.Format(time.DateTime), desc(&rec)))
	}
	bad = append(bad, s.checkAccess(ctx, u, "")...)
	if len(bad) > 0 {
		s.fail(invCancelNow, withTrail(bad, s.trail(ctx, u)))
		return how + ": ok (broken)"
	}
	for i := 1; i <= 3; i++ {
		s.at(now.Truncate(24*time.Hour).AddDate(0, 0, i).Add(23*time.Hour), "-", "check the come-back of "+u+" after cancel now", func(ctx context.Context) {
			s.res.Checks[invCancelNow]++
			bad := s.checkAccess(ctx, u, "")
			bad = append(bad, s.checkRefundedUnpaid(u, at)...)
			if len(bad) > 0 {
				s.fail(invCancelNow, withTrail(bad, s.trail(ctx, u)))
			}
		})
	}
	return how + ": ok"
}

// paidThrough is when the model says paid, the latest paid period of u,
// ends: by its schedule, or at the earliest end of access of a
// cancellation now made after it was charged (the processor's charge of
// its transaction, else its completion: a free period). A charge whose
// outcome came after the cancellation (a bank debit settled late) was
// asked before it: the cancellation ended that access too.
func (s *Sim) paidThrough(u string, paid *billing.Period) time.Time {
	end, err := paid.Schedule().Next(paid.BillingDate)
	if err != nil {
		return time.Time{}
	}
	charged := paid.CompletionDate
	for _, c := range s.proc.ledger() {
		if c.Kept() && paid.TransactionID != "" && c.Result.TransactionID == paid.TransactionID {
			charged = c.At
		}
	}
	for _, at := range s.cancelNowModel().ends[u] {
		if !charged.After(at) && at.Before(end) {
			end = at
		}
	}
	return end
}

// checkAccess compares the library's view of u with the model: the
// paid time ends where the model says (never after a cancellation now
// for a period paid before it), one open period (SCHEDULED or PAUSED)
// at most, and the state want when given.
func (s *Sim) checkAccess(ctx context.Context, u string, want billing.SubscriptionStatus) []string {
	m := s.cancelNowModel()
	if m.unknown[u] {
		return nil
	}
	v, err := m.view.Subscription(ctx, u)
	if err != nil {
		return []string{fmt.Sprintf("user %s: the view: %v", u, err)}
	}
	var bad []string
	if want != "" && v.Status != want {
		bad = append(bad, fmt.Sprintf("user %s: the view says %s, want %s", u, v.Status, want))
	}
	open := 0
	for _, r := range v.Open {
		if (r.Status == billing.StatusScheduled || r.Status == billing.StatusPaused) && !r.IsOneOff() {
			open++ // a plan change's one-off charge is no period
		}
	}
	if open > 1 {
		bad = append(bad, fmt.Sprintf("user %s: %d open periods", u, open))
	}
	// The latest period completed, a free one included (the view's
	// PaidThrough runs to its end; Paid lists the charged ones only).
	var paid *billing.Period
	for i := range v.Periods {
		if r := &v.Periods[i]; r.Status == billing.StatusCompleted && !r.IsOneOff() && (paid == nil || !r.BillingDate.Before(paid.BillingDate)) {
			paid = r
		}
	}
	if paid != nil && !paid.IsTrial() {
		if end := s.paidThrough(u, paid); !v.PaidThrough.Equal(end) {
			bad = append(bad, fmt.Sprintf("user %s: the view says paid through %s, want %s (paid by %s; cancellations now at %v)",
				u, v.PaidThrough.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano), desc(paid), m.ends[u]))
		}
	}
	return bad
}

// checkRefundedUnpaid: no charge the processor kept for u after its
// cancellation now at at is on a period billed before at (the refunded
// period, or the renewal the cancellation closed).
func (s *Sim) checkRefundedUnpaid(u string, at time.Time) []string {
	billed := map[string]time.Time{}
	for _, r := range s.records[u] {
		billed[r.SubscriptionID] = r.BillingDate
	}
	var bad []string
	for _, c := range s.proc.ledger() {
		if c.UserID != u || !c.Kept() || !c.At.After(at) {
			continue
		}
		if d, ok := billed[c.SubscriptionID]; ok && d.Before(at.Truncate(time.Second)) {
			bad = append(bad, fmt.Sprintf("user %s: charge %s after the cancellation now at %s is on a period billed %s",
				u, descCharge(&c), at.Format(time.DateTime), d.Format(time.DateTime)))
		}
	}
	return bad
}

// unusedShare is the share of what p was charged for its plan (its
// amount less its discounts) for the time from now to end, at the rate of
// its whole period, by the second, exact: what a cancellation now
// refunds, rounded down.
func unusedShare(p *billing.Period, end, now time.Time) *big.Rat {
	if end.IsZero() || !now.Before(end) {
		return new(big.Rat)
	}
	start := p.BillingDate
	if now.Before(start) {
		now = start
	}
	whole := end
	if natural, err := p.Schedule().Next(p.BillingDate); err == nil && natural.After(end) {
		whole = natural
	}
	plan := *p // the plan less its discounts: no lines, no balance
	plan.Adjustments, plan.Balance = nil, 0
	paid, _, _ := plan.Due()
	share := new(big.Int).Mul(big.NewInt(int64(paid)), big.NewInt(int64(end.Sub(now)/time.Second)))
	return new(big.Rat).SetFrac(share, big.NewInt(max(int64(whole.Sub(start)/time.Second), 1)))
}

// unusedLines is the share of what the one-off charge o was paid for its
// lines (charges less credits), each at the rate of the time it prorates,
// for the part of that time from now to end, exact.
func unusedLines(o *billing.Period, end, now time.Time) *big.Rat {
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
