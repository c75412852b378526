package layout

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/dynabill/billing"
)

// This file is the codec's check of a period's tax ([billing.Period.Tax]):
// billing_tax (an amount like billing_amount), billing_tax_inclusive (BOOL
// true, omitted when false) and billing_tax_description (S). All three are
// absent when the tax is not fixed (the zero Tax); a fixed tax always has
// billing_tax and billing_tax_description, even at zero.

// maxTaxDescription bounds billing_tax_description, as the root does.
const maxTaxDescription = 256

// checkTax checks the tax of s as a store writes it: a fixed tax (any but
// the zero Tax) has a description of 1 to maxTaxDescription bytes and an
// amount not negative, and the charge with it (billing_amount with the
// adjustments, the balance and the tax) does not overflow. It returns the
// attribute at fault, its value for the error and the cause, or a nil
// cause.
func checkTax(s *billing.Period) (field, value string, cause error) {
	t := s.Tax
	switch {
	case !t.Fixed():
		return "", "", nil
	case t.Description == "":
		return AttrTaxDescription, "", errors.New("a tax needs its description")
	case len(t.Description) > maxTaxDescription:
		return AttrTaxDescription, t.Description, fmt.Errorf("%d bytes, at most %d", len(t.Description), maxTaxDescription)
	case t.Amount < 0:
		return AttrTax, t.Amount.String(), fmt.Errorf("%w: the tax is negative", billing.ErrInvalidAmount)
	}
	sum := new(big.Int).SetInt64(int64(s.Amount))
	for i := range s.Adjustments {
		if a := &s.Adjustments[i]; a.Credit {
			sum.Sub(sum, big.NewInt(int64(a.Amount)))
		} else {
			sum.Add(sum, big.NewInt(int64(a.Amount)))
		}
	}
	sum.Abs(sum).Add(sum, big.NewInt(int64(s.Balance))).Add(sum, big.NewInt(int64(t.Amount)))
	if !sum.IsInt64() {
		return AttrTax, t.Amount.String(), fmt.Errorf("%w: the adjustments, balance and tax overflow", billing.ErrInvalidAmount)
	}
	return "", "", nil
}

// checkTaxRead checks that an item read has all of its tax or none:
// billing_tax and billing_tax_description together, and
// billing_tax_inclusive only with them (seen holds the attributes read).
func checkTaxRead(s *billing.Period, seen attrSet) (field, value string, cause error) {
	hasTax, hasDesc := seen&(1<<aTax) != 0, s.Tax.Description != ""
	switch {
	case hasTax && !hasDesc:
		return AttrTaxDescription, "", errors.New("missing beside billing_tax")
	case hasDesc && !hasTax:
		return AttrTax, "", errors.New("missing beside billing_tax_description")
	case s.Tax.Inclusive && !hasTax:
		return AttrTax, "", errors.New("missing beside billing_tax_inclusive")
	}
	return checkTax(s)
}
