package billing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// This file is discounts: the coupons a host offers, the promotion codes
// its customers type, and how a coupon applied to a subscription comes
// off its charges.

// Coupon is a discount a host offers: a percent or an amount off each
// charge of the subscription it is applied to, for one charge, a number
// of them, or all. The host stores its coupons in a [Coupons] store, which
// also counts their redemptions.
type Coupon struct {
	// ID names the coupon ("WELCOME20"): 1 to 64 bytes of UTF-8 without
	// control characters, compared exactly.
	ID string
	// PercentOff is the discount in hundredths of a percent, 1 to 10000
	// (2000 is 20 %); or AmountOff is an amount off each charge, in
	// Currency. Exactly one of them is set.
	PercentOff int
	AmountOff  Amount
	// Currency is AmountOff's ISO 4217 code: the coupon applies only to
	// charges in that currency ([Invoicing.Currency]). Defaults to "USD".
	Currency string
	// Duration says for how many charges the discount lasts; Periods is
	// that number for [CouponRepeating].
	Duration CouponDuration
	Periods  int
	// MaxRedemptions bounds how many times the coupon may be redeemed,
	// by all customers together (0: no bound); RedeemBy is the last
	// instant it may be (zero: no end).
	MaxRedemptions int64
	RedeemBy       time.Time
	// Redeemed is how many times it was redeemed; the store keeps it.
	Redeemed int64
}

// CouponDuration says for how many charges a [Coupon]'s discount lasts.
type CouponDuration string

// The durations of a coupon.
const (
	CouponOnce      CouponDuration = "ONCE"
	CouponRepeating CouponDuration = "REPEATING"
	CouponForever   CouponDuration = "FOREVER"
)

// PromotionCode is a code a customer types to apply a coupon, with rules
// of its own.
type PromotionCode struct {
	// Code is what the customer types; matched without regard to case
	// (Unicode simple folding): "welcome" finds "WELCOME". 1 to 64 bytes.
	Code string
	// CouponID is the coupon it applies.
	CouponID string
	// ExpiresAt is the last instant it may be redeemed (zero: no end).
	ExpiresAt time.Time
	// MinAmount is the least the next charge (before discounts) must be
	// for the code to apply (zero: any).
	MinAmount Amount
	// FirstTimeOnly lets only a customer never charged before redeem it.
	FirstTimeOnly bool
	// MaxRedemptions bounds the code's own redemptions (0: no bound);
	// Redeemed counts them, kept by the store.
	MaxRedemptions int64
	Redeemed       int64
}

// Redemption is one redemption of a coupon by a customer: counted once
// per user and request key.
type Redemption struct {
	UserID, RequestKey string
	CouponID           string
	// Code is the promotion code typed, as stored ("" when the coupon was
	// applied by its ID).
	Code string
	At   time.Time
}

// Coupons stores a host's coupons and promotion codes and counts their
// redemptions. Every redemption is one conditional write (a transaction
// with the count), so concurrent customers never take a coupon past its
// maximum, and a redemption repeated after a crash counts once.
//
// Implementations: the Coupons of package memory and of dynamostore (both
// layouts); each passes billingtest.RunCouponConformance.
type Coupons interface {
	// PutCoupon stores a coupon, or replaces its terms (Redeemed is
	// kept). PutPromotionCode stores a code of a stored coupon.
	PutCoupon(ctx context.Context, c Coupon) error
	PutPromotionCode(ctx context.Context, p PromotionCode) error
	// Coupon returns the coupon id; PromotionCode the code (any case);
	// [ErrNotFound] when there is none.
	Coupon(ctx context.Context, id string) (Coupon, error)
	PromotionCode(ctx context.Context, code string) (PromotionCode, error)
	// Redeem counts r, at r.At: one more redemption of its coupon (and of
	// its code, when it has one), conditional on each staying within its
	// maximum and on r.At being at or before RedeemBy and ExpiresAt, and
	// the redemption itself, in one transaction. A redemption of the same
	// user and key with the same coupon and code is returned as stored
	// (counted once); with another it is a [*RequestKeyError]. One past a
	// maximum or a date is an error wrapping [ErrCouponNotRedeemable].
	Redeem(ctx context.Context, r Redemption) (Redemption, error)
	// Redemptions returns the user's redemptions, oldest first.
	Redemptions(ctx context.Context, userID string) ([]Redemption, error)
}

// ErrCouponNotRedeemable reports a coupon or promotion code that may not
// be redeemed: used up, past its date, for another currency, or a rule of
// the code unmet (first time only, a minimum amount).
var ErrCouponNotRedeemable = errors.New("billing: coupon not redeemable")

// Validate checks the coupon's terms: an ID, exactly one of PercentOff
// (1 to 10000) and AmountOff (more than zero), a known currency, a
// duration (Periods 1 to 1200 with CouponRepeating, 0 otherwise) and
// MaxRedemptions not negative. The error is a [*FieldError] wrapping
// [ErrInvalidRequest].
func (c *Coupon) Validate() error {
	bad := func(field string, v any, why string) error {
		return &FieldError{Field: field, Value: fmt.Sprint(v), Key: c.ID, Err: fmt.Errorf("%w: %s", ErrInvalidRequest, why)}
	}
	switch {
	case !validCode(c.ID):
		return bad("ID", c.ID, "1 to 64 bytes of UTF-8 without control characters")
	case (c.PercentOff != 0) == (c.AmountOff != 0):
		return bad("PercentOff", c.PercentOff, "exactly one of PercentOff and AmountOff")
	case c.PercentOff < 0 || c.PercentOff > 10000:
		return bad("PercentOff", c.PercentOff, "1 to 10000 hundredths of a percent")
	case c.AmountOff < 0:
		return bad("AmountOff", c.AmountOff, "more than zero")
	case c.MaxRedemptions < 0:
		return bad("MaxRedemptions", c.MaxRedemptions, "not negative")
	}
	if _, ok := currencyDigits(c.currency()); !ok {
		return bad("Currency", c.Currency, "not an ISO 4217 code")
	}
	switch c.Duration {
	case CouponOnce, CouponForever:
		if c.Periods != 0 {
			return bad("Periods", c.Periods, "only with "+string(CouponRepeating))
		}
	case CouponRepeating:
		if c.Periods < 1 || c.Periods > 1200 {
			return bad("Periods", c.Periods, "1 to 1200 with "+string(CouponRepeating))
		}
	default:
		return bad("Duration", c.Duration, fmt.Sprintf("%s, %s or %s", CouponOnce, CouponRepeating, CouponForever))
	}
	return nil
}

// Validate checks the code's rules: a code and a coupon ID, MinAmount and
// MaxRedemptions not negative. The error is a [*FieldError] wrapping
// [ErrInvalidRequest].
func (p *PromotionCode) Validate() error {
	bad := func(field string, v any, why string) error {
		return &FieldError{Field: field, Value: fmt.Sprint(v), Key: p.Code, Err: fmt.Errorf("%w: %s", ErrInvalidRequest, why)}
	}
	switch {
	case !validCode(p.Code):
		return bad("Code", p.Code, "1 to 64 bytes of UTF-8 without control characters")
	case !validCode(p.CouponID):
		return bad("CouponID", p.CouponID, "1 to 64 bytes of UTF-8 without control characters")
	case p.MinAmount < 0:
		return bad("MinAmount", p.MinAmount, "not negative")
	case p.MaxRedemptions < 0:
		return bad("MaxRedemptions", p.MaxRedemptions, "not negative")
	}
	return nil
}

// FoldCode is the form a promotion code is matched in: its Unicode simple
// case folding (upper case, then lower), so that a customer's "welcome"
// finds "WELCOME". Stores key codes by it.
func FoldCode(code string) string {
	return strings.ToLower(strings.ToUpper(code))
}

func (c *Coupon) currency() string {
	if c.Currency == "" {
		return "USD"
	}
	return c.Currency
}

// validCode reports whether s may name a coupon or a code.
func validCode(s string) bool {
	if s == "" || len(s) > 64 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// Discount is a coupon applied to a subscription, as its periods carry it
// ([Period.Discounts]): it comes off the plan of each charge while
// ChargesLeft lasts.
type Discount struct {
	// CouponID is the coupon applied, Code the promotion code typed
	// ("" when none), Request the request key that applied it.
	CouponID string `json:"coupon"`
	Code     string `json:"code,omitempty"`
	Request  string `json:"request"`
	// PercentOff (hundredths of a percent) or AmountOff are the coupon's,
	// as they were when it was applied.
	PercentOff int    `json:"percent_off,omitempty"`
	AmountOff  Amount `json:"amount_off,omitempty"`
	// ChargesLeft is how many charges it still comes off, the one of the
	// period carrying it included; -1 for ever.
	ChargesLeft int `json:"charges_left"`
}

// maxDiscounts bounds the discounts one subscription carries.
const maxDiscounts = 8
