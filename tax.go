package billing

import (
	"context"
	"fmt"
	"math/big"
	"time"
)

// This file is the tax of a charge: the port to the host's tax engine and
// the step that fixes a period's tax before the period is attempted.
//
// A charge is totalled in one order: the plan, its discounts, the
// proration lines, clamped at zero (the taxable amount), then the tax,
// then the customer's balance ([Period.Due]). The tax is asked for once
// per period, just before its first attempt, and kept on the period
// ([Period.Tax]): the invoice is numbered with it, and every later
// attempt of the period (a retry after a decline, a replay of an
// attempt whose outcome is unknown) charges the same.

// TaxProvider computes the tax of a charge: the host's tax engine (Stripe
// Tax, Avalara, a table of rates by country). Set it as [Config.Tax].
//
// The collector calls it before it records a period's first attempt, with
// the period's taxable amount, and keeps the answer on the period. An
// error leaves the period as it was, with no attempt and nothing charged;
// the run reports it and the next run asks again. The provider is not
// asked again for a period whose tax is fixed: a retry after a decline and
// a replay of an attempt in flight charge the tax the period has.
type TaxProvider interface {
	Tax(ctx context.Context, req TaxRequest) (Tax, error)
}

// TaxRequest is what the collector asks a [TaxProvider] to tax: one
// period's charge.
type TaxRequest struct {
	// UserID and SubscriptionID name the user and the period charged.
	UserID, SubscriptionID string
	// Tier is the period's receipt_tier_name ("Plus:v2"): the product, for
	// an engine that taxes products at different rates.
	Tier string
	// BillingDate is the period's billing date: the date of the supply.
	BillingDate time.Time
	// Amount is the taxable amount: the plan less its discounts, with the
	// proration lines the charge carries, never negative and never zero
	// (a charge of zero is not taxed). The customer's balance is not taken
	// off: it pays the taxed total.
	Amount Amount
	// Currency is the invoices' currency ([Invoicing.Currency]); "" when
	// the collector issues no invoices ([Config.Invoices] not set).
	Currency string
}

// Tax is the tax of one period's charge, as a [TaxProvider] answers it and
// as the period keeps it ([Period.Tax]).
type Tax struct {
	// Amount is the tax, zero or more. With a currency that has no minor
	// unit (JPY) it is a whole number of that currency.
	Amount Amount
	// Inclusive says the prices include the tax: Amount is part of the
	// taxable amount, shown on the invoice but not added to what is
	// charged. Otherwise (exclusive prices) Amount is added to the charge.
	Inclusive bool
	// Description names the tax on the invoice line ("VAT 20%"). Defaults
	// to "Tax". A period's tax is fixed when it has one: the zero Tax is
	// no tax asked for yet, and a tax of zero that was asked for keeps its
	// description.
	Description string
}

// defaultTaxDescription names a tax whose provider gave no description.
const defaultTaxDescription = "Tax"

// maxTaxDescription bounds a tax's description, which is stored on the
// period.
const maxTaxDescription = 256

// Fixed reports whether t is a tax asked for and kept ([Period.Tax]):
// any but the zero Tax.
func (t Tax) Fixed() bool { return t != Tax{} }

// added is what t adds to the charge: its amount with exclusive prices,
// nothing with inclusive ones.
func (t Tax) added() Amount {
	if t.Inclusive {
		return 0
	}
	return t.Amount
}

// TaxError reports a period not attempted because its tax could not be
// fixed: the [TaxProvider] failed, or answered a tax that cannot be
// charged (negative, larger than an inclusive price, overflowing with an
// exclusive one, with cents in a currency that has none). Nothing was
// written or charged; the next run asks again. It wraps the provider's
// error, or [ErrInvalidAmount] for a tax refused.
type TaxError struct {
	// UserID and SubscriptionID name the period; Taxable is the amount
	// the provider was asked to tax.
	UserID, SubscriptionID string
	Taxable                Amount
	// Tax is the provider's answer when it was refused (zero on a
	// provider error).
	Tax Tax
	// Err is the provider's error, or why its answer was refused.
	Err error
}

func (e *TaxError) Error() string {
	return fmt.Sprintf("billing: tax of %s (user %s, taxable %s) not fixed: %v", e.SubscriptionID, e.UserID, e.Taxable, e.Err)
}

// Unwrap returns the provider's error, or the reason its answer was refused.
func (e *TaxError) Unwrap() error { return e.Err }

// taxable is the amount of s's charge before its tax and balance: the
// plan less its discounts ([Period.Discounts]), plus the charges and less
// the credits of its adjustments ([Period.Adjustments]). It is negative
// when the credits are more than the rest: [Period.Due] clamps it at zero
// (the difference goes to the balance), and only an amount above zero is
// taxed.
func (s *Period) taxable() Amount {
	total, _ := discounted(s.Amount, s.Discounts)
	return total + difference(s.Adjustments)
}

// checkTax checks t as the tax of a charge of taxable: not negative, at
// most taxable when inclusive, not overflowing with it when exclusive,
// and a whole number of the currency's minor unit (unit cents, see
// [centsPerMinorUnit]).
func checkTax(t Tax, taxable Amount, unit int64) error {
	switch {
	case t.Amount < 0:
		return fmt.Errorf("%w: tax %s is negative", ErrInvalidAmount, t.Amount)
	case t.Inclusive && t.Amount > taxable:
		return fmt.Errorf("%w: tax %s included in a price of %s is more than the price", ErrInvalidAmount, t.Amount, taxable)
	case !t.Inclusive && !new(big.Int).Add(big.NewInt(int64(taxable)), big.NewInt(int64(t.Amount))).IsInt64():
		return fmt.Errorf("%w: tax %s on %s overflows", ErrInvalidAmount, t.Amount, taxable)
	case int64(t.Amount)%unit != 0:
		return fmt.Errorf("%w: tax %s has a fraction of the currency's minor unit", ErrInvalidAmount, t.Amount)
	case len(t.Description) > maxTaxDescription:
		return fmt.Errorf("%w: a tax description of %d bytes, at most %d", ErrInvalidAmount, len(t.Description), maxTaxDescription)
	}
	return nil
}

// fixTax returns cur with its tax fixed: a copy of cur with the
// [TaxProvider]'s answer ([Config.Tax]) on it, or cur itself when there is
// nothing to ask: no provider, a tax already fixed (a retry, a rerun after
// a withdrawn attempt), a trial, or a taxable amount of zero. It writes
// nothing: the caller's next write of the period (the attempt, or the
// completion of a charge the balance covers) stores the tax with it. An
// error is a [*TaxError].
func (c *Collector) fixTax(ctx context.Context, cur *Period) (*Period, error) {
	taxable := cur.taxable()
	if c.cfg.Tax == nil || cur.Tax.Fixed() || cur.IsTrial() || cur.InFlight() || taxable <= 0 {
		return cur, nil
	}
	currency := ""
	if c.cfg.Invoices != nil {
		currency = c.cfg.Invoicing.Currency
	}
	fail := func(t Tax, err error) (*Period, error) {
		return nil, &TaxError{UserID: cur.UserID, SubscriptionID: cur.SubscriptionID, Taxable: taxable, Tax: t, Err: err}
	}
	t, err := c.cfg.Tax.Tax(ctx, TaxRequest{UserID: cur.UserID, SubscriptionID: cur.SubscriptionID, Tier: cur.ReceiptTierName,
		BillingDate: cur.BillingDate, Amount: taxable, Currency: currency})
	if err != nil {
		return fail(Tax{}, err)
	}
	if err := checkTax(t, taxable, centsPerMinorUnit(currency)); err != nil {
		return fail(t, err)
	}
	if t.Description == "" {
		t.Description = defaultTaxDescription
	}
	taxed := cur.Clone()
	taxed.Tax = t
	return &taxed, nil
}
