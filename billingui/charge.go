package billingui

import (
	"fmt"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

// This file is the customer page's next charge: the customer's balance,
// the coupons that come off the next charge, the proration lines of plan
// changes waiting on it, and what it will be ([billing.Period.Due]) with
// its parts.

// nextCharge is what the customer page shows of the user's next charge:
// the period it is made from (the latest SCHEDULED or PAUSED one, as
// [billing.Subscription.NextChargeAmount] reads it) and its parts.
type nextCharge struct {
	// PeriodID is the period that carries the charge.
	PeriodID string
	// Tier and Plan are the plan's line: the tier and its amount.
	Tier string
	Plan billing.Amount
	// Discounts are the coupons applied, in the order they come off.
	Discounts []discountRow
	// Lines are the proration lines, in the order the changes made them.
	Lines []prorationRow
	// Priced reports that Due, Applied and Left are what the period will
	// charge: it is SCHEDULED and no trial's. A paused period or a trial's
	// charges otherwise (see billing.Subscription.NextChargeAmount); its
	// discounts and lines are shown without a total.
	Priced bool
	// Due is the charge; Applied what the customer's balance pays of it,
	// and Left the balance after it.
	Due, Applied, Left billing.Amount
	// Balance is the balance the period carries before the charge.
	Balance billing.Amount
}

// discountRow is a coupon on the next charge.
type discountRow struct {
	// Name is the promotion code typed, or the coupon's ID.
	Name string
	// Terms says what it takes off ("25% off", "$3.00 off"), Lasts for how
	// many charges ("this and 2 more charges", "for ever").
	Terms, Lasts string
	// Off is what it takes off this charge's plan, after the discounts
	// before it.
	Off billing.Amount
}

// prorationRow is a proration line on the next charge.
type prorationRow struct {
	billing.Adjustment
	// Signed is the line's amount as it counts in the charge: a credit
	// negative.
	Signed billing.Amount
}

// nextChargeOf returns the next charge of the view and the customer's
// balance (the latest open period's), formatting amounts with cur. The
// charge is nil when no SCHEDULED or PAUSED period is open, or when that
// period carries nothing but its plan (no discount, proration line or
// balance): the page then shows nothing more than the plan.
func nextChargeOf(v *billing.Subscription, cur currency) (*nextCharge, billing.Amount) {
	var balance billing.Amount
	if n := len(v.Open); n > 0 {
		balance = v.Open[n-1].Balance
	}
	var p *billing.Period
	for i := range v.Open {
		if st := v.Open[i].Status; st == billing.StatusScheduled || st == billing.StatusPaused {
			p = &v.Open[i]
		}
	}
	if p == nil || (len(p.Discounts) == 0 && len(p.Adjustments) == 0 && p.Balance == 0) {
		return nil, balance
	}
	nc := &nextCharge{PeriodID: p.SubscriptionID, Tier: p.ReceiptTierName, Plan: p.Amount, Balance: p.Balance,
		Priced: p.Status == billing.StatusScheduled && !p.IsTrial()}
	offs := discountsOff(p)
	for i, d := range p.Discounts {
		nc.Discounts = append(nc.Discounts, discountRow{Name: discountName(&d), Terms: discountTerms(&d, cur),
			Lasts: discountLasts(d.ChargesLeft), Off: offs[i]})
	}
	for _, a := range p.Adjustments {
		r := prorationRow{Adjustment: a, Signed: a.Amount}
		if a.Credit {
			r.Signed = -a.Amount
		}
		nc.Lines = append(nc.Lines, r)
	}
	if nc.Priced {
		nc.Due, nc.Applied, nc.Left = p.Due()
	}
	return nc, balance
}

// discountsOff returns what each discount of p takes off its plan, in
// order, by the engine's own arithmetic ([billing.Period.Due]): the plan
// with the discounts before it less the plan with it too, neither with
// lines nor balance.
func discountsOff(p *billing.Period) []billing.Amount {
	plan := billing.Period{Amount: p.Amount}
	offs := make([]billing.Amount, len(p.Discounts))
	before, _, _ := plan.Due()
	for i := range p.Discounts {
		plan.Discounts = p.Discounts[:i+1]
		after, _, _ := plan.Due()
		offs[i], before = before-after, after
	}
	return offs
}

// discountName names a discount as the customer knows it: the promotion
// code typed, else the coupon's ID.
func discountName(d *billing.Discount) string {
	if d.Code != "" {
		return d.Code
	}
	return d.CouponID
}

// discountTerms says what d takes off: "25% off", "12.5% off" (its
// percent is in hundredths), or "$3.00 off".
func discountTerms(d *billing.Discount, cur currency) string {
	if d.PercentOff > 0 {
		p := fmt.Sprint(d.PercentOff / 100)
		if r := d.PercentOff % 100; r != 0 {
			p = strings.TrimRight(fmt.Sprintf("%d.%02d", d.PercentOff/100, r), "0")
		}
		return p + "% off"
	}
	return cur.format(d.AmountOff) + " off"
}

// discountLasts says for how many charges a discount with left charges
// left (the next one included; -1 for ever) comes off.
func discountLasts(left int) string {
	switch {
	case left < 0:
		return "for ever"
	case left <= 1:
		return "this charge only"
	case left == 2:
		return "this and 1 more charge"
	}
	return fmt.Sprintf("this and %d more charges", left-1)
}

// lineSpan shows the time a proration line prorates, in loc: its start
// and its end ("2025-04-17 → 2025-05-02").
func lineSpan(a billing.Adjustment, loc *time.Location) string {
	if a.Start.IsZero() || a.End.IsZero() {
		return ""
	}
	return a.Start.In(loc).Format(dateLayout) + " → " + a.End.In(loc).Format(dateLayout)
}
