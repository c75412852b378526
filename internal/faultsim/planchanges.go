package faultsim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

// This file is the PlanChanges scenario: hosts change their users'
// plans now (prorated onto the next charge, charged at once, or not) and
// at the next period, change terms (monthly<->yearly, quarterly), move billing dates
// (into the paid period, which credits its unused time, and later),
// preview changes, and apply coupons by ID or promotion code, each by
// user with a request key that is sometimes repeated, at once or days
// later. Its invariants are in planchecks.go.

// The invariants of the PlanChanges scenario.
const (
	invBalance   = "no customer balance negative; a period opens with the balance the one before passed on"
	invProration = "a paid period's plan with its proration lines is within 0 .. its highest price; no credit more than paid and not credited"
	invCouponMax = "a coupon's redemptions never pass its maximum"
	invDiscount  = "a discount of N charges comes off at most N charges"
	invPreview   = "a preview writes nothing and answers what the change then does"
	invRepeat    = "a change by user repeated with its request key changes nothing more"
)

// planPrice is one plan of the scenario's price list.
type planPrice struct {
	tier     string
	term     billing.Term
	interval int
	price    billing.Amount
}

// planPrices is the scenario's price list: monthly, quarterly and yearly
// plans, a $0 one among them. The records the other operations write
// (the seeded plans, 19.99 upgrades) are on prices of their own.
var planPrices = []planPrice{
	{"Free:v1", billing.TermMonthly, 1, 0},
	{"Basic:v1", billing.TermMonthly, 1, billing.MustParseAmount("4.99")},
	{"Plus:v2", billing.TermMonthly, 1, billing.MustParseAmount("9.99")},
	{"Premium:v1", billing.TermMonthly, 1, billing.MustParseAmount("14.99")},
	{"Premium:v2", billing.TermMonthly, 1, billing.MustParseAmount("19.99")},
	{"Plus:v2", billing.TermMonthly, 3, billing.MustParseAmount("27.99")},
	{"Basic:v1", billing.TermYearly, 1, billing.MustParseAmount("49.99")},
	{"Plus:v2", billing.TermYearly, 1, billing.MustParseAmount("99.99")},
	{"Premium:v2", billing.TermYearly, 1, billing.MustParseAmount("199.99")},
}

// plansOf returns the plans of the price list on term and interval.
func plansOf(term billing.Term, interval int) []planPrice {
	if term == "" {
		term = billing.TermMonthly
	}
	var out []planPrice
	for _, p := range planPrices {
		if p.term == term && p.interval == max(interval, 1) {
			out = append(out, p)
		}
	}
	return out
}

// planModel is the state of the PlanChanges scenario: the coupons and
// promotion codes the host offers, as set up.
type planModel struct {
	coupons map[string]billing.Coupon
	ids     []string
	codes   []billing.PromotionCode
}

// setupPlanChanges stores the scenario's coupons and promotion codes
// (without faults) and starts its model.
func (s *Sim) setupPlanChanges(ctx context.Context) error {
	st := s.opts.Store.Coupons
	if st == nil {
		return errors.New("the PlanChanges scenario needs Store.Coupons")
	}
	start := s.opts.Start
	m := &planModel{coupons: map[string]billing.Coupon{}}
	for _, c := range []billing.Coupon{
		{ID: "PCT20-ONCE", PercentOff: 2000, Duration: billing.CouponOnce, MaxRedemptions: 10},
		{ID: "PCT15-REP3", PercentOff: 1500, Duration: billing.CouponRepeating, Periods: 3, MaxRedemptions: 25},
		{ID: "PCT50-FOREVER", PercentOff: 5000, Duration: billing.CouponForever, MaxRedemptions: 3},
		{ID: "OFF3-REP2", AmountOff: billing.MustParseAmount("3.00"), Duration: billing.CouponRepeating, Periods: 2},
		{ID: "OFF20-ONCE", AmountOff: billing.MustParseAmount("20.00"), Duration: billing.CouponOnce, MaxRedemptions: 8},
		{ID: "PCT100-ONCE", PercentOff: 10000, Duration: billing.CouponOnce, MaxRedemptions: 5, RedeemBy: start.AddDate(0, 0, 60)},
		{ID: "PCT33-REP2", PercentOff: 3333, Duration: billing.CouponRepeating, Periods: 2, MaxRedemptions: 12},
	} {
		if err := st.PutCoupon(ctx, c); err != nil {
			return fmt.Errorf("coupon %s: %w", c.ID, err)
		}
		m.coupons[c.ID] = c
		m.ids = append(m.ids, c.ID)
	}
	for _, p := range []billing.PromotionCode{
		{Code: "Welcome", CouponID: "PCT20-ONCE", FirstTimeOnly: true},
		{Code: "SPRING", CouponID: "OFF3-REP2", MinAmount: billing.MustParseAmount("9.99"), MaxRedemptions: 6, ExpiresAt: start.AddDate(0, 0, 40)},
		{Code: "vip", CouponID: "PCT50-FOREVER"},
		{Code: "HALF2", CouponID: "PCT33-REP2", MaxRedemptions: 4},
	} {
		if err := st.PutPromotionCode(ctx, p); err != nil {
			return fmt.Errorf("promotion code %s: %w", p.Code, err)
		}
		m.codes = append(m.codes, p)
	}
	s.plan = m
	return nil
}

// The operations of the scenario, with their weights.
const (
	opChangeNow = "plan change now"
	// opChargeNow is a share of opChangeNow's draws: charged at once
	// (billing.ProrateNow), reported apart.
	opChargeNow  = "plan change now, charged at once"
	opChangeNone = "plan change now, not prorated"
	opChangeNext = "plan change at the next period"
	opTermChange = "term change"
	opMoveIn     = "billing date move into the paid period"
	opMoveLater  = "billing date move later"
	opPreview    = "plan change preview"
	opCoupon     = "coupon"
)

var planOps = []struct {
	name   string
	weight int
}{
	{opChangeNow, 24}, {opChangeNone, 8}, {opChangeNext, 6}, {opTermChange, 10},
	{opMoveIn, 9}, {opMoveLater, 5}, {opPreview, 12}, {opCoupon, 16},
}

// planPlanChanges schedules day d's operations of the scenario: two to
// five, in the morning, just before the scheduled run or in the
// afternoon.
func (s *Sim) planPlanChanges(d int) {
	if s.plan == nil {
		return
	}
	seed := s.opts.Seed
	day := s.opts.Start.AddDate(0, 0, d)
	total := 0
	for _, k := range planOps {
		total += k.weight
	}
	for i := range 2 + pick(seed, 4, "plan ops", d) {
		var t time.Time
		switch w := draw(seed, "plan op window", d, i); {
		case w < 0.45:
			t = day.Add(opsAt + between(seed, 0, 110*time.Minute, "plan op at", d, i))
		case w < 0.6:
			t = day.Add(scheduledAt - between(seed, time.Second, 5*time.Minute, "plan op at", d, i))
		default:
			t = day.Add(afternoonAt + between(seed, 0, 9*time.Hour, "plan op at", d, i))
		}
		n, kind := pick(seed, total, "plan op kind", d, i), planOps[0].name
		for _, k := range planOps {
			if n < k.weight {
				kind = k.name
				break
			}
			n -= k.weight
		}
		h := s.pickHost("plan op", d, i)
		s.at(t, h.name, kind, func(ctx context.Context) {
			s.res.Ops[kind+": "+s.planOp(ctx, h, kind, d, i)]++
		})
	}
}

// planOp runs operation kind of the scenario and names its outcome.
func (s *Sim) planOp(ctx context.Context, h *host, kind string, d, i int) string {
	key := fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(kind, " ", "-"), d, i)
	switch kind {
	case opMoveIn, opMoveLater:
		return s.planMove(ctx, h, kind, key, d, i)
	case opCoupon:
		u, _, ok := s.find(ctx, 25, withStatus(nil, billing.StatusScheduled), kind, d, i)
		if !ok {
			return "no target"
		}
		req := s.couponRequest(u, key, d, i)
		return s.keyed(ctx, h, u, kind, d, i, func(ctx context.Context, h *host) (billing.UserChange, error) {
			return h.col.ApplyCoupon(ctx, req)
		})
	}
	u, r, ok := s.find(ctx, 25, withStatus(nil, billing.StatusScheduled), kind, d, i)
	if !ok {
		return "no target"
	}
	what := kind
	if kind == opPreview {
		what = []string{opChangeNow, opChangeNone, opTermChange}[pick(s.opts.Seed, 3, "preview of", d, i)]
	}
	req, ok := s.planRequest(u, &r, what, key, d, i)
	if !ok {
		return "no plan on its term"
	}
	if kind == opPreview {
		return s.preview(ctx, h, u, req, d, i)
	}
	if req.Proration == billing.ProrateNow {
		// The one-off charge the change makes, if an upgrade: its
		// answers, retries and repeats are checked (oneoff.go).
		return s.keyedNow(ctx, h, u, req, d, i)
	}
	return s.keyed(ctx, h, u, kind, d, i, func(ctx context.Context, h *host) (billing.UserChange, error) {
		return h.col.ChangePlan(ctx, req)
	})
}

// planRequest draws the plan change of kind for u, whose next period r
// is: another plan of its term (or, for a term change, a plan of the
// other term), at its price in the list.
func (s *Sim) planRequest(u string, r *billing.Period, kind, key string, d, i int) (billing.ChangePlanRequest, bool) {
	seed := s.opts.Seed
	req := billing.ChangePlanRequest{UserRequest: billing.UserRequest{UserID: u, RequestKey: key}}
	term, interval := r.Term, max(r.Interval, 1)
	if term == "" {
		term = billing.TermMonthly
	}
	if kind == opTermChange {
		switch {
		case term == billing.TermYearly:
			term, interval = billing.TermMonthly, 1
			if draw(seed, "quarterly", d, i) < 0.25 {
				interval = 3
			}
		case interval == 3:
			term, interval = billing.TermMonthly, 1
		default:
			term = billing.TermYearly
		}
		req.Term, req.Interval = term, interval
		if draw(seed, "term change not prorated", d, i) < 0.25 {
			req.Proration = billing.ProrateNone
		}
	}
	var plans []planPrice
	for _, p := range plansOf(term, interval) {
		if kind == opTermChange || p.tier != r.ReceiptTierName || p.price != r.Amount {
			plans = append(plans, p)
		}
	}
	if len(plans) == 0 {
		return req, false
	}
	p := plans[pick(seed, len(plans), "plan", kind, d, i)]
	req.Tier, req.Amount = p.tier, p.price
	switch kind {
	case opChangeNow:
		if draw(seed, "explicit proration", d, i) < 0.5 {
			req.Proration = billing.ProrateNextCharge
		}
		if draw(seed, "prorate now", d, i) < 0.4 {
			req.Proration = billing.ProrateNow
		}
	case opChangeNone:
		req.Proration = billing.ProrateNone
	case opChangeNext:
		req.When = billing.ChangeAtNextPeriod
		if draw(seed, "next period not prorated", d, i) < 0.3 {
			req.Proration = billing.ProrateNone
		}
	}
	return req, true
}

// couponRequest draws the coupon u applies: by ID, or a promotion code
// typed in some case.
func (s *Sim) couponRequest(u, key string, d, i int) billing.ApplyCouponRequest {
	seed, m := s.opts.Seed, s.plan
	req := billing.ApplyCouponRequest{UserRequest: billing.UserRequest{UserID: u, RequestKey: key}}
	if draw(seed, "by code", d, i) < 0.4 {
		code := m.codes[pick(seed, len(m.codes), "code", d, i)].Code
		switch pick(seed, 3, "code case", d, i) {
		case 0:
			code = strings.ToLower(code)
		case 1:
			code = strings.ToUpper(code)
		}
		req.Code = code
		return req
	}
	req.CouponID = m.ids[pick(seed, len(m.ids), "coupon", d, i)]
	return req
}

// planMove moves the billing date of a user's next period: into the
// period paid before it (prorated, or refused without proration), or
// later.
func (s *Sim) planMove(ctx context.Context, h *host, kind, key string, d, i int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	var paidEnd time.Time
	u, r, ok := s.find(ctx, 25, func(recs []billing.Period) (billing.Period, bool) {
		if recs = periodsOf(recs); len(recs) == 0 {
			return billing.Period{}, false
		}
		r := recs[len(recs)-1]
		if r.Status != billing.StatusScheduled || r.InFlight() {
			return billing.Period{}, false
		}
		if kind == opMoveLater {
			return r, true
		}
		if len(recs) < 2 {
			return billing.Period{}, false
		}
		prev := recs[len(recs)-2]
		if prev.Status != billing.StatusCompleted || prev.IsTrial() {
			return billing.Period{}, false
		}
		end, err := prev.Schedule().Next(prev.BillingDate)
		if err != nil || end.Sub(latestOf(prev.BillingDate, now.AddDate(0, 0, -20))) < 4*time.Hour {
			return billing.Period{}, false
		}
		paidEnd = end
		return r, true
	}, kind, d, i)
	if !ok {
		return "no target"
	}
	var date time.Time
	if kind == opMoveLater {
		date = r.BillingDate.Add(between(seed, 24*time.Hour, 10*24*time.Hour, "move later by", d, i)).Truncate(time.Second)
	} else {
		recs := periodsOf(s.records[u])
		prev := recs[len(recs)-2]
		lo := latestOf(prev.BillingDate, now.AddDate(0, 0, -20)).Add(time.Hour)
		date = lo.Add(between(seed, 0, paidEnd.Sub(lo)-time.Hour, "move into paid to", d, i)).Truncate(time.Second)
	}
	if r.BillingWeek != 0 {
		// A Friday plan moves to a Friday (another day is refused).
		for date.Weekday() != time.Friday {
			date = date.AddDate(0, 0, 1)
		}
	}
	req := billing.MoveBillingDateRequest{UserRequest: billing.UserRequest{UserID: u, RequestKey: key}, Date: date}
	if draw(seed, "move not prorated", d, i) < 0.2 {
		req.Proration = billing.ProrateNone
	}
	return s.keyed(ctx, h, u, kind, d, i, func(ctx context.Context, h *host) (billing.UserChange, error) {
		return h.col.MoveBillingDate(ctx, req)
	})
}

// keyed makes a change by user with call on h, and then, sometimes, its
// repeat with the same request key: at once on another host, or minutes
// to days later. After a success the repeat must change nothing; after a
// fault that may pass, the repeat is the client's retry, which may
// complete what the first call began.
func (s *Sim) keyed(ctx context.Context, h *host, u, kind string, d, i int, call func(context.Context, *host) (billing.UserChange, error)) string {
	seed, now := s.opts.Seed, s.clock.Now()
	_, err := call(ctx, h)
	outcome := planClassify(err)
	x := draw(seed, "repeat", kind, d, i)
	switch {
	case err == nil && x < 0.25:
		s.repeat(ctx, s.pickHost("repeat now", kind, d, i), u, kind, "", call)
	case err == nil && x < 0.45:
		at := now.Add(between(seed, time.Minute, 72*time.Hour, "repeat at", kind, d, i))
		h2 := s.pickHost("repeat later", kind, d, i)
		s.at(at, h2.name, kind+" of "+u+" repeated", func(ctx context.Context) { s.repeat(ctx, h2, u, kind, "", call) })
	case err != nil && retriable(err) && x < 0.6:
		at := now.Add(between(seed, time.Second, 10*time.Minute, "retry at", kind, d, i))
		h2 := s.pickHost("retry", kind, d, i)
		s.at(at, h2.name, kind+" of "+u+" retried", func(ctx context.Context) {
			_, err := call(ctx, h2)
			s.res.Ops[kind+" (retried after a fault): "+planClassify(err)]++
		})
	}
	return outcome
}

// repeat repeats a change by user that succeeded, with its request key:
// it must answer Repeated and write nothing (records, history, charges,
// redemptions), or fail for a reason that may pass, writing nothing. A
// plan change that made the one-off charge oneOff (billing.ProrateNow)
// left not collected (a rate limit) or in flight collects it again on a
// repeat: that record, its rows and its charge may change then, nothing
// else (its charge is counted by checkOneOffs).
func (s *Sim) repeat(ctx context.Context, h *host, u, kind, oneOff string, call func(context.Context, *host) (billing.UserChange, error)) {
	if s.stop {
		return
	}
	before, err := s.snapshotUser(ctx, u)
	if err != nil {
		s.fail("the store answers", []string{err.Error()})
		return
	}
	out, err := call(ctx, h)
	s.res.Ops[kind+" (repeated): "+planClassify(err)]++
	after, err2 := s.snapshotUser(ctx, u)
	if err2 != nil {
		s.fail("the store answers", []string{err2.Error()})
		return
	}
	if o := before.record(oneOff); o != nil && o.Status == billing.StatusScheduled {
		before, after = before.without(oneOff), after.without(oneOff)
	}
	if oneOff != "" {
		s.checkChargeAnswer(ctx, u, kind+" repeated", oneOff, out, err)
	}
	s.res.Checks[invRepeat]++
	var bad []string
	switch {
	case err != nil && !retriable(err):
		bad = append(bad, fmt.Sprintf("user %s: %s repeated with its request key after it succeeded: refused: %v", u, kind, err))
	case err == nil && !out.Repeated:
		bad = append(bad, fmt.Sprintf("user %s: %s repeated with its request key after it succeeded: not answered as a repeat (%d changes)", u, kind, len(out.Changes)))
	}
	if diff := before.diff(after); diff != "" {
		bad = append(bad, fmt.Sprintf("user %s: %s repeated with its request key changed %s", u, kind, diff))
	}
	s.fail(invRepeat, withTrail(bad, s.trail(ctx, u)))
}

// preview asks what req would bill: it must write nothing; asked for
// now, of a user with nothing in flight, and then made at once (the same
// instant), the change must add the lines the preview answered.
func (s *Sim) preview(ctx context.Context, h *host, u string, req billing.ChangePlanRequest, d, i int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	var at time.Time
	switch x := draw(seed, "preview at", d, i); {
	case x < 0.2:
		at = now.Add(between(seed, 0, 5*24*time.Hour, "preview later", d, i))
	case x < 0.35:
		at = now.Add(-between(seed, 0, 3*time.Hour, "preview earlier", d, i))
	}
	before, err := s.snapshotUser(ctx, u)
	if err != nil {
		s.fail("the store answers", []string{err.Error()})
		return "store"
	}
	p, perr := h.col.PreviewChangePlan(ctx, req, at)
	after, err := s.snapshotUser(ctx, u)
	if err != nil {
		s.fail("the store answers", []string{err.Error()})
		return "store"
	}
	s.res.Checks[invPreview]++
	if diff := before.diff(after); diff != "" {
		s.fail(invPreview, withTrail([]string{fmt.Sprintf("user %s: a preview of %s changed %s", u, descPlan(req), diff)}, s.trail(ctx, u)))
		return "wrote"
	}
	outcome := "preview " + planClassify(perr)
	inFlight := false
	for _, r := range before.recs {
		inFlight = inFlight || r.InFlight()
	}
	if perr != nil || !at.IsZero() || inFlight || draw(seed, "change after preview", d, i) >= 0.5 {
		return outcome
	}
	out, err := h.col.ChangePlan(ctx, req)
	outcome += ", then the change " + planClassify(err)
	if err != nil || out.Repeated {
		return outcome
	}
	s.res.Checks[invPreview]++
	if got, want := descLines(out.Adjustments), descLines(p.Adjustments); got != want {
		s.fail(invPreview, withTrail([]string{fmt.Sprintf("user %s: %s previewed at %s with lines [%s], made at that instant with [%s]",
			u, descPlan(req), now.Format(time.DateTime), want, got)}, s.trail(ctx, u)))
	}
	// Charged at once (billing.ProrateNow): the preview's ChargeNow is
	// what the change's one-off charge charges (none: zero).
	var charged billing.Amount
	if out.Charge != nil {
		charged, _, _ = out.Charge.Due()
	}
	if p.ChargeNow != charged {
		s.fail(invPreview, withTrail([]string{fmt.Sprintf("user %s: %s previewed at %s to charge %s at once; made at that instant, its one-off charge %s charges %s",
			u, descPlan(req), now.Format(time.DateTime), p.ChargeNow, descOpt(out.Charge), charged)}, s.trail(ctx, u)))
	}
	return outcome
}

func descPlan(req billing.ChangePlanRequest) string {
	d := fmt.Sprintf("a change to %s at %s", req.Tier, req.Amount)
	if req.Term != "" {
		d += fmt.Sprintf(" (%s, interval %d)", req.Term, req.Interval)
	}
	if req.When != "" {
		d += " " + string(req.When)
	}
	if req.Proration != "" {
		d += " proration " + string(req.Proration)
	}
	return d
}

// descLines describes proration lines: their period, kind and amount.
func descLines(lines []billing.Adjustment) string {
	var out []string
	for _, l := range lines {
		kind := "charge"
		if l.Credit {
			kind = "credit"
		}
		out = append(out, fmt.Sprintf("%s %s %s of %s", kind, l.Amount, l.Tier, l.PeriodID))
	}
	return strings.Join(out, ", ")
}

// planClassify names an outcome, the refusals of these operations
// included.
func planClassify(err error) string {
	switch {
	case err == nil || retriable(err):
		return classify(err)
	case errors.Is(err, billing.ErrNoChange):
		return "no change"
	case errors.Is(err, billing.ErrPlanChangeRefused):
		return "plan change refused"
	case errors.Is(err, billing.ErrCouponNotRedeemable):
		return "coupon not redeemable"
	case errors.Is(err, billing.ErrDateMove):
		return "date move refused"
	case errors.Is(err, billing.ErrInvalidDate):
		return "invalid date"
	case errors.Is(err, billing.ErrRequestKeyReused):
		return "request key reused"
	case errors.Is(err, billing.ErrInvalidAmount):
		return "invalid amount"
	}
	return classify(err)
}
