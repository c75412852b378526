package billing

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxCharge is the default [Config.MaxCharge]: 10,000.00.
const DefaultMaxCharge = Amount(1_000_000)

// PriceList is the host's price list: what one period of a tier costs.
// A tier is the name a record carries in ReceiptTierName, name and
// version together ("Plus:v2"), so that a new version of a plan may cost
// something else while the records of the old one keep their price.
type PriceList interface {
	// Price returns the amount of one period of tier, or an error
	// wrapping [ErrUnknownTier] when the host does not sell it.
	Price(ctx context.Context, tier string) (Amount, error)
}

// PriceListMap is a [PriceList] held in memory: tier → amount.
type PriceListMap map[string]Amount

// Price implements [PriceList].
func (m PriceListMap) Price(_ context.Context, tier string) (Amount, error) {
	a, ok := m[tier]
	if !ok {
		return 0, &FieldError{Field: "tier", Value: tier, Err: ErrUnknownTier}
	}
	return a, nil
}

// ListPrice, given as the amount of [Collector.ChangeTier], asks for the
// tier's price in [Config.Prices]. It is no amount (amounts are never
// negative), so a caller's zero always means zero.
const ListPrice Amount = -1

// priceOf returns the amount a record of tier is to be charged: the price
// list's when the host has one (a caller's amount other than [ListPrice]
// must then be that price), else the caller's amount ([ListPrice] is then
// refused). Either way the amount must be more than zero (or zero, with
// [Config.AllowFreeTiers]) and at most [Config.MaxCharge]; anything else is
// a [*FieldError] wrapping [ErrInvalidAmount] or [ErrUnknownTier]. The tier
// name itself must be 1 to maxTierName bytes of UTF-8 without control
// characters, whoever calls (HTTP, CLI, Lambda): it is stored on the
// record and printed on receipts and notices.
func (c *Collector) priceOf(ctx context.Context, tier string, amount Amount) (Amount, error) {
	if !validTierName(tier) {
		return 0, &FieldError{Field: "tier", Value: tier,
			Err: fmt.Errorf("%w: a tier name of 1 to %d bytes of UTF-8 without control characters", ErrUnknownTier, maxTierName)}
	}
	if c.cfg.Prices != nil {
		price, err := c.cfg.Prices.Price(ctx, tier)
		if err != nil {
			return 0, fmt.Errorf("price of tier %q: %w", tier, err)
		}
		if amount != ListPrice && amount != price {
			return 0, &FieldError{Field: "amount", Value: amount.String(),
				Err: fmt.Errorf("%w: tier %q costs %s in the price list", ErrInvalidAmount, tier, price)}
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
	case amount < 0, amount == 0 && !c.cfg.AllowFreeTiers:
		return "must be more than zero"
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
