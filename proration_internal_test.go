package billing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestProrateRoundsHalfToEven: a prorated line is price × part / whole,
// rounded half to even in the currency's minor unit (a cent, or a whole
// yen), with the exact fraction kept beside it.
func TestProrateRoundsHalfToEven(t *testing.T) {
	t.Parallel()
	const s = time.Second
	cases := []struct {
		price       Amount
		part, whole time.Duration
		unit        int64
		want        Amount
		frac        string
	}{
		{1, 1 * s, 2 * s, 1, 0, "1*1/2"},                                         // 0.5 → 0
		{3, 1 * s, 2 * s, 1, 2, "3*1/2"},                                         // 1.5 → 2
		{5, 1 * s, 2 * s, 1, 2, "5*1/2"},                                         // 2.5 → 2
		{7, 1 * s, 2 * s, 1, 4, "7*1/2"},                                         // 3.5 → 4
		{1000, 1, 3 * s, 1, 0, "1000*0/3"},                                       // less than a second: nothing
		{1000, 1 * s, 3 * s, 1, 333, "1000*1/3"},                                 // 333.33…
		{1000, 2 * s, 3 * s, 1, 667, "1000*2/3"},                                 // 666.66…
		{1000, 5 * s, 3 * s, 1, 1000, "1000*5/3"},                                // never more than the whole price
		{15100, 1 * s, 2 * s, 100, 7600, "15100*1/2"},                            // ¥75.5 → ¥76
		{15300, 1 * s, 2 * s, 100, 7600, "15300*1/2"},                            // ¥76.5 → ¥76
		{15000, 1 * s, 3 * s, 100, 5000, "15000*1/3"},                            // ¥50
		{MaxAmount, 1 * s, 2 * s, 1, MaxAmount/2 + 1, "9223372036854775807*1/2"}, // …903.5 → …904, no overflow
		{0, 1 * s, 2 * s, 1, 0, "0*1/2"},
	}
	for _, tc := range cases {
		got, frac := prorate(tc.price, tc.part, tc.whole, tc.unit)
		assert.Equal(t, tc.want, got, "%s unit %d", tc.frac, tc.unit)
		assert.Equal(t, tc.frac, frac)
	}
}

// TestDueAppliesBalanceAfterLines: the charge is the plan with its
// charges, less its credits, never below zero, then less the balance; a
// credit larger than the charge adds to the balance left.
func TestDueAppliesBalanceAfterLines(t *testing.T) {
	t.Parallel()
	line := func(a Amount, credit bool) Adjustment { return Adjustment{Amount: a, Credit: credit} }
	cases := []struct {
		name               string
		p                  Period
		due, applied, left Amount
	}{
		{"plan only", Period{Amount: 999}, 999, 0, 0},
		{"upgrade", Period{Amount: 2000, Adjustments: []Adjustment{line(500, true), line(1000, false)}}, 2500, 0, 0},
		{"balance pays part", Period{Amount: 2000, Balance: 300}, 1700, 300, 0},
		{"balance pays all", Period{Amount: 500, Balance: 1917}, 0, 500, 1417},
		{"credit over the charge", Period{Amount: 500, Balance: 100, Adjustments: []Adjustment{line(2900, true), line(483, false)}}, 0, 0, 2017},
	}
	for _, tc := range cases {
		due, applied, left := tc.p.Due()
		assert.Equal(t, [3]Amount{tc.due, tc.applied, tc.left}, [3]Amount{due, applied, left}, tc.name)
	}
}
