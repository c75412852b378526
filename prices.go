package billing

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PricePlan is what a subscription buys, as a price list prices it: a tier ("Plus:v2", name and version
// together, as records carry it in ReceiptTierName) billed on a term, a
// period spanning Interval terms (3 monthly terms: quarterly).
type PricePlan struct {
	Tier string
	// Term is the billing term; the collector always sets it (a
	// subscription's default is [TermMonthly]).
	Term Term
	// Interval is how many terms a period spans; the collector always
	// sets it, 1 or more.
	Interval int
}

// String returns the plan's key in a [PriceListMap]: the tier alone for
// its monthly plan ("Plus:v2"), the tier and the term for another term
// ("Plus:v2/YEARLY"), and the interval too when a period spans several
// terms ("Plus:v2/MONTHLY/3" for quarterly).
func (p PricePlan) String() string {
	term, n := p.Term, max(p.Interval, 1)
	if term == "" {
		term = TermMonthly
	}
	switch {
	case n > 1:
		return fmt.Sprintf("%s/%s/%d", p.Tier, term, n)
	case term != TermMonthly:
		return p.Tier + "/" + string(term)
	}
	return p.Tier
}

// PriceList is the host's price list: what one period of a plan — a tier
// on a term and interval — costs, so that a yearly plan of a tier is
// priced apart from its monthly one, and a new version of a tier may cost
// something else while the records of the old one keep their price.
type PriceList interface {
	// Price returns the amount of one period of plan, or an error
	// wrapping [ErrUnknownTier] when the host does not sell that plan.
	Price(ctx context.Context, plan PricePlan) (Amount, error)
}

// PriceListMap is a [PriceList] held in memory: a plan's key
// ([PricePlan.String]) → the amount of one of its periods:
//
//	billing.PriceListMap{
//		"Plus:v2":           billing.MustParseAmount("9.99"),  // monthly
//		"Plus:v2/YEARLY":    billing.MustParseAmount("99.99"), // yearly
//		"Plus:v2/MONTHLY/3": billing.MustParseAmount("27.99"), // quarterly
//	}
//
// A plan without its key is not sold: a monthly price never stands for a
// yearly one. A host whose tier names contain "/" writes its own
// [PriceList].
type PriceListMap map[string]Amount

// Price implements [PriceList].
func (m PriceListMap) Price(_ context.Context, plan PricePlan) (Amount, error) {
	a, ok := m[plan.String()]
	if !ok {
		return 0, &FieldError{Field: "tier", Value: plan.Tier, Err: fmt.Errorf("%w: no price for plan %s", ErrUnknownTier, plan)}
	}
	return a, nil
}

// priceOf returns the amount a record of plan is to be charged: the price
// list's when the host has one (a caller's amount other than [ListPrice]
// must then be that price), else the caller's amount ([ListPrice] is then
// refused). Either way the amount must be more than zero (or zero, with
// [Config.AllowFreeTiers]) and at most [Config.MaxCharge]; anything else is
// a [*FieldError] wrapping [ErrInvalidAmount] or [ErrUnknownTier]. The tier
// name itself must be 1 to maxTierName bytes of UTF-8 without control
// characters, whoever calls (HTTP, CLI, Lambda): it is stored on the
// record and printed on receipts and notices.
func (c *Collector) priceOf(ctx context.Context, plan PricePlan, amount Amount) (Amount, error) {
	tier := plan.Tier
	if !validTierName(tier) {
		return 0, &FieldError{Field: "tier", Value: tier,
			Err: fmt.Errorf("%w: a tier name of 1 to %d bytes of UTF-8 without control characters", ErrUnknownTier, maxTierName)}
	}
	if c.cfg.Prices != nil {
		if plan.Term == "" {
			plan.Term = TermMonthly
		}
		plan.Interval = max(plan.Interval, 1)
		price, err := c.cfg.Prices.Price(ctx, plan)
		if err != nil {
			return 0, fmt.Errorf("price of plan %s: %w", plan, err)
		}
		if amount != ListPrice && amount != price {
			return 0, &FieldError{Field: "amount", Value: amount.String(),
				Err: fmt.Errorf("%w: plan %s costs %s in the price list", ErrInvalidAmount, plan, price)}
		}
		amount = price
	}
	switch {
	case amount == ListPrice:
		return 0, &FieldError{Field: "amount", Value: amount.String(),
			Err: fmt.Errorf("%w: no price list to take tier %q's price from: the amount is required", ErrInvalidAmount, tier)}
	}
	if why := c.outOfLimits(amount); why != "" {
		return 0, &FieldError{Field: "amount", Value: amount.String(), Err: fmt.Errorf("%w: %s", ErrInvalidAmount, why)}
	}
	return amount, nil
}

// outOfLimits says why amount may not be charged, or "" when it may: it
// must be more than zero (or zero, with [Config.AllowFreeTiers]) and at
// most [Config.MaxCharge]. Checked when a price is set and before every
// charge.
func (c *Collector) outOfLimits(amount Amount) string {
	switch {
	case amount < 0:
		return "must be more than zero"
	case amount == 0 && !c.cfg.AllowFreeTiers:
		return "must be more than zero: set Config.AllowFreeTiers to allow a free tier at zero"
	case amount > c.cfg.MaxCharge:
		return "more than the largest charge allowed, " + c.cfg.MaxCharge.String()
	}
	return ""
}

// maxTierName bounds a tier name, which is stored on every record.
const maxTierName = 256

// validTierName reports whether tier may name a tier: 1 to maxTierName
// bytes of valid UTF-8 without control characters.
func validTierName(tier string) bool {
	return tier != "" && len(tier) <= maxTierName && utf8.ValidString(tier) &&
		!strings.ContainsFunc(tier, unicode.IsControl)
}
