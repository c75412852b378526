package billing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDueWithTax: an exclusive tax is added after the discounts and the
// clamp at zero, and before the balance, which pays what it can of the
// taxed total; an inclusive one adds nothing. The balance left is what
// the taxed total did not use.
func TestDueWithTax(t *testing.T) {
	t.Parallel()
	vat := func(a Amount, incl bool) Tax { return Tax{Amount: a, Inclusive: incl, Description: "VAT"} }
	quarter := []Discount{{CouponID: "q", PercentOff: 2500, ChargesLeft: 1}}
	cases := []struct {
		name               string
		p                  Period
		due, applied, left Amount
	}{
		{"exclusive", Period{Amount: 1000, Tax: vat(200, false)}, 1200, 0, 0},
		{"inclusive", Period{Amount: 1000, Tax: vat(167, true)}, 1000, 0, 0},
		{"after a discount", Period{Amount: 1000, Discounts: quarter, Tax: vat(150, false)}, 900, 0, 0},
		{"balance pays part of the tax", Period{Amount: 1000, Balance: 1100, Tax: vat(200, false)}, 100, 1100, 0},
		{"balance pays all", Period{Amount: 1000, Balance: 1500, Tax: vat(200, false)}, 0, 1200, 300},
		{"fixed at zero", Period{Amount: 1000, Tax: vat(0, false)}, 1000, 0, 0},
	}
	for _, tc := range cases {
		due, applied, left := tc.p.Due()
		assert.Equal(t, [3]Amount{tc.due, tc.applied, tc.left}, [3]Amount{due, applied, left}, tc.name)
	}
}

// TestCheckTax: what a tax engine's answer must be to be charged.
func TestCheckTax(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		tax     Tax
		taxable Amount
		unit    int64
		ok      bool
	}{
		{"exclusive", Tax{Amount: 200}, 1000, 1, true},
		{"zero", Tax{}, 1000, 1, true},
		{"inclusive, all of it", Tax{Amount: 1000, Inclusive: true}, 1000, 1, true},
		{"negative", Tax{Amount: -1}, 1000, 1, false},
		{"inclusive, more than the price", Tax{Amount: 1001, Inclusive: true}, 1000, 1, false},
		{"overflows", Tax{Amount: MaxAmount - 999}, 1000, 1, false},
		{"the largest that fits", Tax{Amount: MaxAmount - 1000}, 1000, 1, true},
		{"cents in yen", Tax{Amount: 150}, 1000, 100, false},
		{"whole yen", Tax{Amount: 200}, 1000, 100, true},
		{"a long description", Tax{Amount: 1, Description: string(make([]byte, maxTaxDescription+1))}, 1000, 1, false},
	} {
		err := checkTax(tc.tax, tc.taxable, tc.unit)
		if tc.ok {
			assert.NoError(t, err, tc.name)
		} else {
			require.ErrorIs(t, err, ErrInvalidAmount, tc.name)
		}
	}
}
