package layout

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/dynabill/billing"
)

// This file is the codec of a period's discounts: billing_discounts, the
// coupons applied to the subscription that come off the period's charge
// (a JSON array in an S attribute).

// maxDiscounts bounds the discounts one record carries, as the root's
// maxDiscounts does.
const maxDiscounts = 8

// checkDiscounts checks the discounts of s as a store writes them: at
// most maxDiscounts, each with a coupon ID of 1 to 64 bytes, exactly one
// of PercentOff (1 to 10000 hundredths of a percent) and AmountOff (more
// than zero), and ChargesLeft of -1 (for ever) or more. It returns the
// value at fault for the error and the cause (wrapping
// billing.ErrInvalidAmount for a negative AmountOff), or a nil cause; the
// attribute is always billing_discounts.
func checkDiscounts(s *billing.Period) (value string, cause error) {
	if n := len(s.Discounts); n > maxDiscounts {
		return strconv.Itoa(n) + " discounts", fmt.Errorf("%d discounts, at most %d", n, maxDiscounts)
	}
	for i := range s.Discounts {
		d := &s.Discounts[i]
		switch {
		case d.CouponID == "" || len(d.CouponID) > 64:
			return "coupon " + strconv.Quote(d.CouponID), fmt.Errorf("discount %d: a coupon ID of 1 to 64 bytes", i)
		case d.AmountOff < 0:
			return d.AmountOff.String(), fmt.Errorf("%w: discount %d: a negative amount off", billing.ErrInvalidAmount, i)
		case (d.PercentOff != 0) == (d.AmountOff != 0):
			return "percent_off " + strconv.Itoa(d.PercentOff) + ", amount_off " + d.AmountOff.String(), fmt.Errorf("discount %d: exactly one of a percent and an amount off", i)
		case d.PercentOff < 0 || d.PercentOff > 10000:
			return strconv.Itoa(d.PercentOff), fmt.Errorf("discount %d: a percent off of 1 to 10000 hundredths", i)
		case d.ChargesLeft < -1:
			return strconv.Itoa(d.ChargesLeft), fmt.Errorf("discount %d: charges left -1 (for ever) or more", i)
		}
	}
	return "", nil
}

// encodeDiscounts is the text of billing_discounts for discounts, which
// checkDiscounts accepted: the JSON array encoding/json writes for them.
// The same discounts give the same text (stores compare encodings).
func encodeDiscounts(discounts []billing.Discount) (string, error) {
	b, err := json.Marshal(discounts)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// decodeDiscounts reads the text of billing_discounts: a JSON array of
// discounts; an empty array reads as none (nil). Fields the array's
// objects have and Discount lacks are ignored.
func decodeDiscounts(text string) ([]billing.Discount, error) {
	var discounts []billing.Discount
	if err := json.Unmarshal([]byte(text), &discounts); err != nil {
		return nil, fmt.Errorf("want a JSON array of discounts: %w", err)
	}
	if discounts == nil {
		return nil, errors.New("want a JSON array of discounts, not null")
	}
	if len(discounts) == 0 {
		return nil, nil
	}
	return discounts, nil
}
