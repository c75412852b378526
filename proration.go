package billing

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// This file is proration: what a plan change made during a paid period
// bills for the rest of that period, and the customer's balance that a
// credit larger than the next charge goes to.
//
// A change now at instant t, in a period P paid from S to E, makes two
// lines, by the second:
//
//	credit = what P's plan was charged × (E − t) / (E − S)
//	charge = the new plan's price     × (E − t) / (E − S)
//
// each rounded half to even in the currency's minor unit, the exact
// fraction kept on the line (and so on the history row of the period that
// carries it). The lines are added to the next charge, the period after P
// ([Period.Adjustments]): its invoice shows them. When the credit is more
// than that charge, the rest goes to the customer's balance
// ([Period.Balance]), which comes off later charges: no charge and no
// invoice is ever negative, and nothing is refunded.

// Proration says how [Collector.ChangePlan] bills a plan change made now
// ([ChangeNow]) during a paid period.
type Proration string

// How a plan change during a paid period is billed.
const (
	// ProrateNextCharge credits the old plan's unused time and charges the
	// new plan's price for it, both on the next charge (lines of its
	// invoice); a credit larger than that charge goes to the customer's
	// balance. The default.
	ProrateNextCharge Proration = "NEXT_CHARGE"
	// ProrateNone applies the new plan from the next charge on, with no
	// credit or charge for the rest of the current period.
	ProrateNone Proration = "NONE"
	// ProrateNow makes the same lines as ProrateNextCharge, and when
	// they charge more than they credit (an upgrade) charges that
	// difference at once: a one-off charge of its own ([Period.IsOneOff]),
	// recorded with the change and collected by the same call, under the
	// request's key. A difference that credits more (a downgrade), or
	// one above [Config.MaxCharge], rides on the next charge as with
	// ProrateNextCharge.
	ProrateNow Proration = "NOW"
)

// oneOffNamespace makes the IDs of the one-off charges of [ProrateNow].
var oneOffNamespace = uuid.MustParse("0d6c2a8e-93b1-4f53-8f3e-5b7a1c4e2f90")

// OneOffChargeID is the ID (subscription_id) of the one-off charge a plan
// change of userID under requestKey makes with [ProrateNow]: a name-based
// UUID, so that a repeat of the request finds it.
func OneOffChargeID(userID, requestKey string) string {
	return uuid.NewSHA1(oneOffNamespace, []byte(userID+"\x00"+requestKey)).String()
}

// oneOff is the one-off charge of the lines of a plan change of the
// period next to tier, made at instant at under the user's records recs:
// dated at that second (or the first one after it no record of the user
// has), charging the lines' difference.
func oneOff(id string, next *Period, tier string, lines []Adjustment, at time.Time, recs []Period) *Period {
	d := at.UTC().Truncate(time.Second)
	for slices.ContainsFunc(recs, func(r Period) bool { return sameSecond(r.BillingDate, d) }) {
		d = d.Add(time.Second)
	}
	return &Period{
		UserID: next.UserID, BillingDate: d, SubscriptionID: id, Status: StatusScheduled,
		BillingPeriod: BillingPeriod(d), Process: ProcessNotIdentified, Term: next.Term, Interval: next.Interval,
		AnchorDay: next.EffectiveAnchorDay(), ReceiptTierName: tier,
		Adjustments: slices.Clone(lines), ChargeOf: lines[0].PeriodID,
	}
}

// chargeNow names the one-off charge a plan change with [ProrateNow]
// writes: its ID and billing date, as the change's request recorded them.
type chargeNow struct {
	id   string
	date time.Time
}

// difference is what lines charge more than they credit (negative: less).
func difference(lines []Adjustment) Amount {
	var d Amount
	for _, a := range lines {
		if a.Credit {
			d -= a.Amount
		} else {
			d += a.Amount
		}
	}
	return d
}

// Adjustment is a line a period's charge carries besides its plan: the
// credit for the old plan's unused time, or the charge for the new plan's,
// of a plan change made during the period before ([ProrateNextCharge]).
// The next charge is the period's Amount plus its charges less its
// credits, less the customer's balance ([Period.Due]).
type Adjustment struct {
	// Request is the request key of the change that made the line.
	Request string `json:"request"`
	// Description names the line on the invoice ("Unused time on Basic",
	// "Remaining time on Plus").
	Description string `json:"description"`
	// Tier is the plan prorated: the old one for a credit, the new one
	// for a charge.
	Tier string `json:"tier,omitempty"`
	// PeriodID is the paid period whose time is prorated; Start and End
	// are that time (the change's instant and the period's end), and
	// Length the whole period's, in seconds.
	PeriodID string    `json:"period"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Length   int64     `json:"length"`
	// Price is the full period's price of Tier, after the discounts the
	// prorated period had.
	Price Amount `json:"price"`
	// Amount is Price × (End − Start) / Length, rounded half to even in
	// the currency's minor unit (after a clamp, see [Collector.ChangePlan]).
	Amount Amount `json:"amount"`
	// Credit is set on a credit: Amount comes off the charge.
	Credit bool `json:"credit,omitempty"`
	// EndsPeriod is set on the credit of a move into the paid period or a
	// change of term: once the period carrying the credit is charged, the
	// paid period ends at Start, where that period starts
	// ([Subscription.PaidThrough] and the come-back rules count it so).
	// Until then (and if it is cancelled, waived or given up) the paid
	// period runs to its end.
	EndsPeriod bool `json:"ends_period,omitempty"`
	// Fraction is the exact amount before rounding, in cents and seconds:
	// "2000*1296000/2592000".
	Fraction string `json:"fraction"`
}

// maxAdjustments bounds the lines one period carries: every plan change
// during a period adds two.
const maxAdjustments = 64

// Due returns what the period's charge is: its Amount less its discounts
// ([Period.Discounts], never below zero), with its adjustments
// ([Period.Adjustments]: charges added, credits taken off), never below
// zero, plus its tax when the prices exclude it ([Period.Tax]), less what
// the customer's balance ([Period.Balance]) pays of it. Applied is that
// part of the balance, and Left the balance after this charge, which the
// next period carries: a credit larger than the charge adds to it. The
// charge is never negative.
func (s *Period) Due() (due, applied, left Amount) {
	total := s.taxable()
	if total < 0 {
		return 0, 0, s.Balance - total
	}
	total += s.Tax.added()
	applied = min(s.Balance, total)
	return total - applied, applied, s.Balance - applied
}

// charged reports whether s carries more than its plan: adjustments, a
// balance or discounts, so that what it charges is not its Amount.
func (s *Period) charged() bool {
	return len(s.Adjustments) > 0 || s.Balance != 0 || len(s.Discounts) > 0
}

// checkAdjustments checks the adjustments, tax and balance of s as a
// store writes them: at most [maxAdjustments] lines, amounts, the tax and
// the balance in 0..[MaxAmount], and a charge (see [Period.Due]) that does
// not overflow.
func (s *Period) checkAdjustments() error {
	if len(s.Adjustments) > maxAdjustments {
		return fmt.Errorf("%w: %d adjustments, at most %d", ErrInvalidAmount, len(s.Adjustments), maxAdjustments)
	}
	if s.Balance < 0 {
		return fmt.Errorf("%w: balance %s is negative", ErrInvalidAmount, s.Balance)
	}
	sum := new(big.Int).SetInt64(int64(s.Amount))
	for i, a := range s.Adjustments {
		if a.Amount < 0 || a.Price < 0 {
			return fmt.Errorf("%w: adjustment %d: a negative amount", ErrInvalidAmount, i)
		}
		if a.Credit {
			sum.Sub(sum, big.NewInt(int64(a.Amount)))
		} else {
			sum.Add(sum, big.NewInt(int64(a.Amount)))
		}
	}
	if s.Tax.Amount < 0 {
		return fmt.Errorf("%w: tax %s is negative", ErrInvalidAmount, s.Tax.Amount)
	}
	sum.Abs(sum).Add(sum, big.NewInt(int64(s.Balance))).Add(sum, big.NewInt(int64(s.Tax.Amount)))
	if !sum.IsInt64() {
		return fmt.Errorf("%w: the adjustments, tax and balance overflow", ErrInvalidAmount)
	}
	return nil
}

// prorate returns price × part / whole, both in whole seconds, rounded
// half to even in a minor unit of unit cents (100 for a currency without
// one, such as JPY), and the exact fraction.
func prorate(price Amount, part, whole time.Duration, unit int64) (Amount, string) {
	p, w := int64(part/time.Second), int64(whole/time.Second)
	frac := strconv.FormatInt(int64(price), 10) + "*" + strconv.FormatInt(p, 10) + "/" + strconv.FormatInt(w, 10)
	if w <= 0 || p <= 0 || price <= 0 {
		return 0, frac
	}
	return share(price, min(p, w), w, unit), frac
}

// share returns amount × part / whole (part at most whole), rounded half
// to even in a minor unit of unit cents.
func share(amount Amount, part, whole, unit int64) Amount {
	num := new(big.Int).Mul(big.NewInt(int64(amount)), big.NewInt(part))
	den := new(big.Int).Mul(big.NewInt(whole), big.NewInt(unit))
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	switch r.Lsh(r, 1).Cmp(den) {
	case 1:
		q.Add(q, big.NewInt(1))
	case 0:
		if q.Bit(0) == 1 {
			q.Add(q, big.NewInt(1))
		}
	}
	return Amount(q.Int64() * unit)
}

// centsPerMinorUnit is how many cents make the minor unit of currency:
// 100 for one without a minor unit (JPY), else 1 (a currency with three
// decimals is prorated to the cent, the precision of an [Amount]).
func centsPerMinorUnit(currency string) int64 {
	if d, ok := currencyDigits(currency); ok && d == 0 {
		return 100
	}
	return 1
}

// planChange is the proration of a plan change at an instant: the paid
// period it prorates and the lines it adds to the next charge.
type planChange struct {
	paid  *Period // nil: nothing to prorate
	end   time.Time
	lines []Adjustment
}

// errNoProration says why a change is not prorated (for a preview).
var errNoProration = errors.New("nothing to prorate")

// prorateChange prorates the change of next (the SCHEDULED period that
// will be charged next) to tier at price, at instant at, among the user's
// records recs: it finds the paid period running at that instant, and
// returns the credit for its plan's unused time and the charge for the new
// plan's. Nothing is prorated (the zero planChange) when no paid period
// runs then: during a trial, before the first charge, after an owed
// period, or at the period's end.
//
// The credit is at the price in force: the paid period's amount, or the
// plan an earlier change in the same period moved to (its charge line on
// next). Both prices are after the discounts the paid period had
// ([Period.Discounts]): the lines are not discounted again. Two clamps keep any sequence of changes inside one period
// between zero and the highest plan's full price for it, whatever the
// rounding: a credit is at most what was paid or is owed for the period
// and not credited yet, and a charge at most what takes the period to the
// highest price it had.
func prorateChange(recs []Period, next *Period, tier string, price Amount, at time.Time, unit int64) (planChange, error) {
	var paid *Period
	for i := range recs {
		r := &recs[i]
		if r.Status != StatusCompleted || r.IsTrial() || r.IsOneOff() || !r.AccessEnd.IsZero() ||
			r.BillingDate.After(at) || !r.BillingDate.Before(next.BillingDate) {
			continue
		}
		if paid == nil || r.BillingDate.After(paid.BillingDate) {
			paid = r
		}
	}
	if paid == nil {
		return planChange{}, fmt.Errorf("%w: no paid period runs at %s", errNoProration, at.UTC().Format(time.RFC3339))
	}
	natural, err := followingDate(paid)
	if err != nil {
		return planChange{}, err
	}
	// The time after a move or a term change started a new period in it
	// is credited there already (an EndsPeriod line, on a record charged,
	// pending or still to be charged; a waived one's credit went to the
	// balance): it is not credited again.
	end := natural
	for i := range recs {
		if recs[i].Status == StatusCancelled {
			continue
		}
		for _, a := range recs[i].Adjustments {
			if a.EndsPeriod && a.PeriodID == paid.SubscriptionID && a.Start.Before(end) {
				end = a.Start
			}
		}
	}
	if !at.Before(end) {
		return planChange{}, fmt.Errorf("%w: the paid period %s ended at %s", errNoProration, paid.SubscriptionID, end.UTC().Format(time.RFC3339))
	}
	for i := range recs {
		// What an earlier change charged at once is what a credit now may
		// give back: it must be paid first (or given up on).
		if o := &recs[i]; o.IsOneOff() && o.ChargeOf == paid.SubscriptionID && !o.Status.IsTerminal() {
			return planChange{}, fmt.Errorf("%w: the one-off charge %s of an earlier plan change in period %s is %s, not paid yet: change again once it is paid, or waive it",
				ErrNotCollectible, o.SubscriptionID, paid.SubscriptionID, o.Status)
		}
	}
	// What the period was paid (or owes) at, and what was credited, by
	// earlier changes in it.
	// Prices after the discounts the period had: the proration lines carry
	// them, and are not discounted again.
	paidAt, _ := discounted(paid.Amount, paid.Discounts)
	price, _ = discounted(price, paid.Discounts)
	inForce, inForceTier, top := paidAt, paid.ReceiptTierName, paidAt
	paidFor, credited := paidAt, Amount(0)
	earlier := earlierLines(recs, paid.SubscriptionID)
	if n := len(earlier); n > 0 && earlier[n-1].Start.After(at) {
		// The lines from then on price the period as changed: a credit
		// from before it would count that time at the wrong plan.
		return planChange{}, &FieldError{Field: "billing_date", Value: at.UTC().Format(time.RFC3339), Err: fmt.Errorf(
			"%w: a change on %s prorated the period %s from then already: choose an instant on or after it",
			ErrInvalidDate, earlier[n-1].Start.UTC().Format(time.RFC3339), paid.SubscriptionID)}
	}
	for _, a := range earlier {
		if a.Credit {
			credited += a.Amount
			continue
		}
		paidFor += a.Amount
		inForce, inForceTier, top = a.Price, a.Tier, max(top, a.Price)
	}
	top = max(top, price)
	length, left := natural.Sub(paid.BillingDate), end.Sub(at)
	credit, cfrac := prorate(inForce, left, length, unit)
	credit = min(credit, max(paidFor-credited, 0))
	charge, chfrac := prorate(price, left, length, unit)
	charge = min(charge, max(top-(paidFor-credited-credit), 0))
	line := func(desc, tier string, p, amount Amount, credit bool, frac string) Adjustment {
		return Adjustment{Description: desc, Tier: tier, PeriodID: paid.SubscriptionID,
			Start: at.UTC(), End: end.UTC(), Length: int64(length / time.Second),
			Price: p, Amount: amount, Credit: credit, Fraction: frac}
	}
	return planChange{paid: paid, end: end, lines: []Adjustment{
		line("Unused time on "+tierLabel(inForceTier), inForceTier, inForce, credit, true, cfrac),
		line("Remaining time on "+tierLabel(tier), tier, price, charge, false, chfrac),
	}}, nil
}

// earlierLines returns the lines earlier changes made for the paid period
// id that are in effect, in the order made, wherever they are among the
// user's records recs: on the charge they ride on (to be charged, owed,
// pending or charged, paused with it, waived or given up: a forgiven
// charge counts as paid, and its credits went to the customer's balance;
// or cancelled, which keeps them for a come-back on its date), or on a
// one-off charge paid ([ProrateNow]). Those of a one-off charge not paid
// count for nothing (one not paid yet refuses the change: see
// [prorateChange]); a month a pause skipped passed its lines on. So a
// later change credits no more than was paid (or forgiven) and not
// credited before.
func earlierLines(recs []Period, id string) []Adjustment {
	var out []Adjustment
	for i := range recs {
		r := &recs[i]
		switch {
		case r.IsOneOff():
			if r.Status != StatusCompleted {
				continue
			}
		case r.Status == StatusPausedSkipped:
			continue
		}
		for _, a := range r.Adjustments {
			if a.PeriodID == id {
				out = append(out, a)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Adjustment) int { return a.Start.Compare(b.Start) })
	return out
}

// tierLabel is a tier's name for a line, as the plan line names it (the
// name without its version), or "the plan" when the record names none.
func tierLabel(tier string) string {
	if name, _ := splitTier(tier); name != "" {
		return name
	}
	return "the plan"
}

// carry says what the period opened after a record takes from it.
type carry int

const (
	// carryCharged: the record was charged (or completed at zero): it
	// keeps its adjustments and the part of the balance it applied, and
	// the next period gets the balance left ([Period.Due]) and the
	// discounts with charges left after this one.
	carryCharged carry = iota
	// carryForgiven: the record is given up on (waived, stale): its
	// charges go with it, and its balance and credits go on as balance,
	// its discounts as they were.
	carryForgiven
	// carryDeferred: the record is skipped (a pause month): the next
	// period charges what it would have, adjustments, discounts and all.
	carryDeferred
)

// carryTo sets on f, the period opened after cur, the adjustments and
// balance cur passes on (see [carry]).
func carryTo(f, cur *Period, how carry) {
	switch how {
	case carryCharged:
		_, _, f.Balance = cur.Due()
		for _, d := range cur.Discounts {
			if d.ChargesLeft > 0 && !cur.IsTrial() { // a trial charges nothing
				d.ChargesLeft--
			}
			if d.ChargesLeft != 0 {
				f.Discounts = append(f.Discounts, d)
			}
		}
		return
	case carryForgiven:
		f.Balance = cur.Balance
		for _, a := range cur.Adjustments {
			if a.Credit {
				f.Balance += a.Amount
			}
		}
	case carryDeferred:
		f.Balance, f.Adjustments = cur.Balance, slices.Clone(cur.Adjustments)
	}
	f.Discounts = slices.Clone(cur.Discounts) // not used by this charge
}

// ChangePreview is what a plan change would bill, as
// [Collector.PreviewChangePlan] answers.
type ChangePreview struct {
	// Adjustments are the lines the change would add to the next charge
	// (see [UserChange.Adjustments]).
	Adjustments []Adjustment
	// NextChargeDate and NextChargeAmount are the next charge with them,
	// as [Subscription] would say after the change: before tax, which is
	// fixed only when the charge is attempted ([Config.Tax]).
	NextChargeDate   time.Time
	NextChargeAmount Amount
	// Balance is the customer's balance after that charge: what is left
	// of a credit larger than it, and of the balance before.
	Balance Amount
	// ChargeNow is, with [ProrateNow], the difference the change would
	// charge at once (the lines are then not on the next charge); zero
	// when the lines ride on the next charge.
	ChargeNow Amount
}

// PreviewChangePlan answers what [Collector.ChangePlan] with req would
// bill were it made at instant at (zero: now), within the paid period
// running then (Stripe's proration date), and changes nothing: no lock,
// no write, and req.RequestKey is not used. It is refused as ChangePlan
// would refuse the change ([ErrNoChange], [ErrPlanChangeRefused], a
// [*FieldError]).
func (c *Collector) PreviewChangePlan(ctx context.Context, req ChangePlanRequest, at time.Time) (ChangePreview, error) {
	fail := func(err error) (ChangePreview, error) {
		return ChangePreview{}, fmt.Errorf("preview plan change %s: %w", req.UserID, err)
	}
	when, given, prorate, err := c.checkPlanChange(ctx, req)
	if err != nil {
		return fail(err)
	}
	if at.IsZero() {
		at = c.cfg.Clock.Now()
	}
	recs, err := c.cfg.Repository.ListByUser(ctx, req.UserID)
	if err != nil {
		return fail(err)
	}
	if len(recs) == 0 {
		return fail(fmt.Errorf("%w: user_id=%s has no billing periods", ErrNotFound, req.UserID))
	}
	down := when == ChangeAtNextPeriod
	targets, price, lines, err := c.planChangeTargets(ctx, req, given, down, prorate, recs, at)
	if err != nil {
		return fail(err)
	}
	if len(targets) == 0 {
		return fail(noPeriodFor(opChangeTier, req.UserID, openPeriods(recs)))
	}
	next := targets[0].Clone()
	if term, interval, ok := termChange(req, recs, at); ok && !next.IsTrial() && !firstAfterTrial(&next) {
		// A new full period from at, less the paid period's unused time.
		next.ReceiptTierName, next.Amount, next.Term, next.Interval = req.Tier, price, term, interval
		moveTo(&next, at)
		line, ok, err := c.unusedCredit(recs, &targets[0], at, req.RequestKey, prorate)
		if err != nil {
			return fail(err)
		}
		if ok {
			lines = []Adjustment{line}
			next.Adjustments = append(next.Adjustments, line)
		}
		out := ChangePreview{Adjustments: lines}
		out.NextChargeDate, out.NextChargeAmount = nextCharge(&next)
		_, _, out.Balance = next.Due()
		return out, nil
	}
	var now Amount // charged at once
	switch {
	case next.IsTrial():
		next.TrialAmount = price
	case down && !firstAfterTrial(&next):
		next.IsPendingDowngrade, next.PendingTierName, next.PendingAmount = true, req.Tier, price
	default:
		next.ReceiptTierName, next.Amount = req.Tier, price
		next.IsPendingDowngrade = false
		if d := difference(lines); req.Proration == ProrateNow && d > 0 && c.outOfLimits(d) == "" {
			now = difference(lines)
			break
		}
		next.Adjustments = append(next.Adjustments, lines...)
	}
	out := ChangePreview{Adjustments: lines, ChargeNow: now}
	out.NextChargeDate, out.NextChargeAmount = nextCharge(&next)
	_, _, out.Balance = next.Due()
	return out, nil
}

// emitBalance tells the host of a balance the next period (created, if
// any, as written) carries other than cur's ([EventBalanceChanged]).
func (c *Collector) emitBalance(ctx context.Context, cur *Period, created []*Period, at time.Time) {
	if len(created) == 0 || created[0].Balance == cur.Balance {
		return
	}
	e := eventFor(EventBalanceChanged, created[0], at)
	e.Amount = created[0].Balance
	c.emit(ctx, e)
}
