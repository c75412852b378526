package faultsim

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

// This file is the PlanChanges scenario's invariants, checked after
// every step (the money invariant, checkMoney, holds every charge to its
// record's Due), and the faults of its coupon store.

// checkPlanUser checks u's records (ascending by billing date): no
// balance negative; for every paid period P, P's plan after its discounts
// plus the proration charges for P less the credits for P (the lines
// whose PeriodID is P, as the latest record carrying them has them) is
// within 0 .. the highest price P had (its plan, or the plan a charge
// line moved it to), each credit at most what was paid or owed for P and
// not credited before it; and each discount comes off at most as many
// charges as its coupon lasts.
func (s *Sim) checkPlanUser(ctx context.Context, u string, recs []billing.Period) {
	var neg, pro, disc []string
	for i := range recs {
		if r := &recs[i]; r.Balance < 0 {
			neg = append(neg, fmt.Sprintf("user %s: record %s carries a negative balance %s", u, desc(r), r.Balance))
		}
	}
	neg = append(neg, s.checkCarry(ctx, u, recs)...)
	s.res.Checks[invBalance]++
	s.fail(invBalance, withTrail(neg, s.trail(ctx, u)))

	// The lines of each paid period that are in effect, wherever they
	// are: on a charge to be made, owed, pending or made (a paused one
	// too), waived or given up (a forgiven charge counts as paid, its
	// credits went to the balance), or cancelled (kept for a come-back on
	// its date); none of a month a pause skipped (it passed its lines on
	// whole); and those of
	// the plan changes charged at once for it, the one-off charges whose
	// ChargeOf it is, but for those closed unpaid.
	type carried struct {
		on    []*billing.Period
		lines []billing.Adjustment
	}
	byPeriod := map[string]*carried{}
	for i := range recs {
		r := &recs[i]
		switch {
		case r.IsOneOff():
			switch r.Status {
			case billing.StatusCancelled, billing.StatusWaived, billing.StatusStale:
				continue
			}
		case r.Status == billing.StatusPausedSkipped:
			continue
		}
		seen := map[string]bool{}
		for _, a := range r.Adjustments {
			c := byPeriod[a.PeriodID]
			if c == nil {
				c = &carried{}
				byPeriod[a.PeriodID] = c
			}
			if !seen[a.PeriodID] {
				seen[a.PeriodID] = true
				c.on = append(c.on, r)
			}
			c.lines = append(c.lines, a)
		}
	}
	for i := range recs {
		p := &recs[i]
		if (p.Status != billing.StatusCompleted && p.Status != billing.StatusRefunded) || p.IsTrial() || p.IsOneOff() {
			continue
		}
		s.res.Checks[invProration]++
		var all []billing.Adjustment
		var on []string
		if c := byPeriod[p.SubscriptionID]; c != nil {
			for _, r := range c.on {
				on = append(on, desc(r))
			}
			all = slices.Clone(c.lines)
		}
		// In the order the changes were made.
		slices.SortStableFunc(all, func(a, b billing.Adjustment) int { return a.Start.Compare(b.Start) })
		paid := discountedAmount(p.Amount, p.Discounts)
		top, credited := paid, billing.Amount(0)
		for _, a := range all {
			if !a.Credit {
				paid += a.Amount
				top = max(top, a.Price)
				continue
			}
			if a.Amount > paid-credited {
				pro = append(pro, fmt.Sprintf("user %s: period %s: a credit of %s (%s) on %s, more than the %s paid or owed for it and not credited before",
					u, desc(p), a.Amount, a.Fraction, strings.Join(on, ", "), paid-credited))
			}
			credited += a.Amount
		}
		if net := paid - credited; net < 0 || net > top {
			pro = append(pro, fmt.Sprintf("user %s: period %s: its plan with its proration lines on %s comes to %s, outside 0 .. %s (lines: %s)",
				u, desc(p), strings.Join(on, ", "), net, top, descLines(all)))
		}
	}
	s.fail(invProration, withTrail(pro, s.trail(ctx, u)))

	// Each discount (a coupon applied by a request) comes off the charges
	// of the records carrying it that were charged (or completed at
	// zero): at most as many as its coupon lasts.
	type applied struct{ coupon, request string }
	charges := map[applied]int{}
	for i := range recs {
		r := &recs[i]
		switch {
		case r.IsTrial():
			continue // a trial charges nothing: it does not use a coupon up
		case r.Status == billing.StatusCompleted, r.Status == billing.StatusACHSent, r.Status == billing.StatusRefunded:
		default:
			continue
		}
		for _, d := range r.Discounts {
			charges[applied{d.CouponID, d.Request}]++
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(charges), func(a, b applied) int {
		return cmp.Or(strings.Compare(a.coupon, b.coupon), strings.Compare(a.request, b.request))
	}) {
		s.res.Checks[invDiscount]++
		c, ok := s.plan.coupons[k.coupon]
		if !ok {
			disc = append(disc, fmt.Sprintf("user %s: a discount of coupon %s, which the host never offered", u, k.coupon))
			continue
		}
		n := -1
		switch c.Duration {
		case billing.CouponOnce:
			n = 1
		case billing.CouponRepeating:
			n = c.Periods
		}
		if n >= 0 && charges[k] > n {
			disc = append(disc, fmt.Sprintf("user %s: coupon %s (%s, %d periods) applied by %s came off %d charges", u, k.coupon, c.Duration, c.Periods, k.request, charges[k]))
		}
	}
	s.fail(invDiscount, withTrail(disc, s.trail(ctx, u)))
}

// checkCoupons checks the coupon store's counts: no coupon or code
// redeemed past its maximum; and, once every user is read (all), each
// coupon's count is its users' redemptions.
func (s *Sim) checkCoupons(ctx context.Context, all bool) {
	st := s.opts.Store.Coupons
	var bad []string
	s.res.Checks[invCouponMax]++
	redeemed := map[string]int64{}
	for _, id := range s.plan.ids {
		c, err := st.Coupon(ctx, id)
		if err != nil {
			s.fail("the store answers", []string{fmt.Sprintf("Coupon(%s): %v", id, err)})
			return
		}
		redeemed[id] = c.Redeemed
		if c.MaxRedemptions > 0 && c.Redeemed > c.MaxRedemptions {
			bad = append(bad, fmt.Sprintf("coupon %s redeemed %d times, at most %d", id, c.Redeemed, c.MaxRedemptions))
		}
	}
	for _, p := range s.plan.codes {
		c, err := st.PromotionCode(ctx, p.Code)
		if err != nil {
			s.fail("the store answers", []string{fmt.Sprintf("PromotionCode(%s): %v", p.Code, err)})
			return
		}
		if c.MaxRedemptions > 0 && c.Redeemed > c.MaxRedemptions {
			bad = append(bad, fmt.Sprintf("promotion code %s redeemed %d times, at most %d", p.Code, c.Redeemed, c.MaxRedemptions))
		}
	}
	if all {
		users := map[string]int64{}
		for _, u := range s.users {
			rs, err := st.Redemptions(ctx, u)
			if err != nil {
				s.fail("the store answers", []string{fmt.Sprintf("Redemptions(%s): %v", u, err)})
				return
			}
			for _, r := range rs {
				users[r.CouponID]++
			}
		}
		for _, id := range s.plan.ids {
			c := s.plan.coupons[id]
			if n := users[id]; n != redeemed[id] || c.MaxRedemptions > 0 && n > c.MaxRedemptions {
				bad = append(bad, fmt.Sprintf("coupon %s: %d redemptions by users, counted %d, at most %d", id, n, redeemed[id], c.MaxRedemptions))
			}
		}
	}
	s.fail(invCouponMax, bad)
}

// discountedAmount is amount less discounts, as billing applies them
// (each percent of what the ones before left, rounded half to even; an
// amount off at most what is left): what a period's plan was charged at.
func discountedAmount(amount billing.Amount, discounts []billing.Discount) billing.Amount {
	p := billing.Period{Amount: amount, Discounts: discounts}
	due, _, _ := p.Due()
	return due
}

// userSnapshot is what the store, its history, the processor and the
// coupon store hold of a user: a preview or a repeat must leave it as it
// was.
type userSnapshot struct {
	recs, rows []billing.Period
	// charges counts the processor's answers by subscription ID.
	charges     map[string]int
	redemptions int
	counts      map[string]int64
}

// record is the record id of the snapshot, or nil.
func (a userSnapshot) record(id string) *billing.Period {
	for i := range a.recs {
		if id != "" && a.recs[i].SubscriptionID == id {
			return &a.recs[i]
		}
	}
	return nil
}

// without is the snapshot without the record id: its record, history
// rows and charges.
func (a userSnapshot) without(id string) userSnapshot {
	drop := func(rs []billing.Period) []billing.Period {
		return slices.DeleteFunc(slices.Clone(rs), func(r billing.Period) bool { return r.SubscriptionID == id })
	}
	a.recs, a.rows = drop(a.recs), drop(a.rows)
	a.charges = maps.Clone(a.charges)
	delete(a.charges, id)
	return a
}

func (s *Sim) snapshotUser(ctx context.Context, u string) (userSnapshot, error) {
	var sn userSnapshot
	var err error
	if sn.recs, err = s.raw.ListByUser(ctx, u); err != nil {
		return sn, fmt.Errorf("ListByUser(%s): %w", u, err)
	}
	if sn.rows, err = s.hist.ListByUser(ctx, u); err != nil {
		return sn, fmt.Errorf("History.ListByUser(%s): %w", u, err)
	}
	sn.charges = map[string]int{}
	for _, c := range s.proc.ledger() {
		if c.UserID == u {
			sn.charges[c.SubscriptionID]++
		}
	}
	st := s.opts.Store.Coupons
	rs, err := st.Redemptions(ctx, u)
	if err != nil {
		return sn, fmt.Errorf("Redemptions(%s): %w", u, err)
	}
	sn.redemptions = len(rs)
	sn.counts = map[string]int64{}
	for _, id := range s.plan.ids {
		c, err := st.Coupon(ctx, id)
		if err != nil {
			return sn, fmt.Errorf("Coupon(%s): %w", id, err)
		}
		sn.counts[id] = c.Redeemed
	}
	return sn, nil
}

// diff describes what changed from a to b; "" when nothing did.
func (a userSnapshot) diff(b userSnapshot) string {
	var out []string
	if len(a.recs) != len(b.recs) {
		out = append(out, fmt.Sprintf("its records (%d, now %d)", len(a.recs), len(b.recs)))
	} else {
		for i := range a.recs {
			if !sameItem(&a.recs[i], &b.recs[i]) {
				out = append(out, fmt.Sprintf("record %s to %s", desc(&a.recs[i]), desc(&b.recs[i])))
			}
		}
	}
	if len(a.rows) != len(b.rows) {
		out = append(out, fmt.Sprintf("its history (%d rows, now %d)", len(a.rows), len(b.rows)))
	}
	if !maps.Equal(a.charges, b.charges) {
		out = append(out, fmt.Sprintf("the processor's charges (%v, now %v)", a.charges, b.charges))
	}
	if a.redemptions != b.redemptions {
		out = append(out, fmt.Sprintf("its redemptions (%d, now %d)", a.redemptions, b.redemptions))
	}
	for id, n := range a.counts {
		if b.counts[id] != n {
			out = append(out, fmt.Sprintf("coupon %s's count (%d, now %d)", id, n, b.counts[id]))
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprint(out)
}

// faultyCoupons is a host's view of the coupon store, behind faults drawn
// like the repository's on stormy days: a read fails before it reads; a
// redemption fails before it applies, or applies and then fails (its
// answer lost).
type faultyCoupons struct {
	inner billing.Coupons
	sim   *Sim
	host  string
	calls *counter
}

var _ billing.Coupons = (*faultyCoupons)(nil)

func (c *faultyCoupons) fault(op, id string, write bool) faultKind {
	e := c.sim.env
	if !e.stormy() {
		return noFault
	}
	n := c.calls.next(op + "|" + id)
	switch u := draw(e.seed, "coupons", c.host, op, id, n); {
	case u < 0.01:
		e.faults.add("coupons: throttled")
		return throttled
	case u < 0.03:
		e.faults.add("coupons: failed before applying")
		return failBefore
	case write && u < 0.06:
		e.faults.add("coupons: applied, then failed")
		return failAfter
	}
	return noFault
}

func (c *faultyCoupons) PutCoupon(ctx context.Context, cp billing.Coupon) error {
	return c.inner.PutCoupon(ctx, cp)
}

func (c *faultyCoupons) PutPromotionCode(ctx context.Context, p billing.PromotionCode) error {
	return c.inner.PutPromotionCode(ctx, p)
}

func (c *faultyCoupons) Coupon(ctx context.Context, id string) (billing.Coupon, error) {
	if err := faultErr(c.fault("Coupon", id, false), "Coupon", id); err != nil {
		return billing.Coupon{}, err
	}
	return c.inner.Coupon(ctx, id)
}

func (c *faultyCoupons) PromotionCode(ctx context.Context, code string) (billing.PromotionCode, error) {
	if err := faultErr(c.fault("PromotionCode", code, false), "PromotionCode", code); err != nil {
		return billing.PromotionCode{}, err
	}
	return c.inner.PromotionCode(ctx, code)
}

func (c *faultyCoupons) Redeem(ctx context.Context, r billing.Redemption) (billing.Redemption, error) {
	id := r.UserID + "|" + r.RequestKey
	k := c.fault("Redeem", id, true)
	if k == throttled || k == failBefore {
		return billing.Redemption{}, faultErr(k, "Redeem", id)
	}
	out, err := c.inner.Redeem(ctx, r)
	if err == nil && k == failAfter {
		return billing.Redemption{}, faultErr(k, "Redeem", id)
	}
	return out, err
}

func (c *faultyCoupons) Redemptions(ctx context.Context, userID string) ([]billing.Redemption, error) {
	if err := faultErr(c.fault("Redemptions", userID, false), "Redemptions", userID); err != nil {
		return nil, err
	}
	return c.inner.Redemptions(ctx, userID)
}

// checkCarry checks the balance each period of u opened with (its first
// history row) against the period it was opened after: the row written
// in the same transaction (the same last_run_date, or a nanosecond
// before for a period gone stale) that took that period out of SCHEDULED.
// Charged (or attempted: a declined first attempt applied the balance
// too), it passes on what its charge left of the balance (Period.Due);
// waived, stale or cancelled unpaid, its balance and its credit lines;
// skipped by a pause, its balance (its lines go on whole).
func (s *Sim) checkCarry(ctx context.Context, u string, recs []billing.Period) []string {
	rows, err := s.hist.ListByUser(ctx, u)
	if err != nil {
		return []string{fmt.Sprintf("History.ListByUser(%s): %v", u, err)}
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
	var bad []string
	for i := range recs {
		f := first[recs[i].SubscriptionID]
		if f == nil {
			continue
		}
		var from []*billing.Period
		for _, t := range []time.Time{f.LastRunDate, f.LastRunDate.Add(-time.Nanosecond)} {
			for _, r := range byTime[t] {
				if r.SubscriptionID != f.SubscriptionID && r.Status != billing.StatusScheduled && r.Status != billing.StatusPaused {
					from = append(from, r)
				}
			}
		}
		if len(from) != 1 {
			continue // opened by a sign-up, a come-back, or ambiguous
		}
		cur := from[0]
		var want billing.Amount
		switch cur.Status {
		case billing.StatusCompleted, billing.StatusError, billing.StatusACHSent:
			_, _, want = cur.Due()
		case billing.StatusPausedSkipped:
			want = cur.Balance
		case billing.StatusStale, billing.StatusWaived, billing.StatusCancelled:
			want = cur.Balance
			for _, a := range cur.Adjustments {
				if a.Credit {
					want += a.Amount
				}
			}
		default:
			continue
		}
		s.res.Checks[invBalance]++
		if f.Balance != want {
			bad = append(bad, fmt.Sprintf("user %s: period %s opened with a balance of %s; the period it follows, %s, passed on %s",
				u, desc(f), f.Balance, desc(cur), want))
		}
	}
	return bad
}
