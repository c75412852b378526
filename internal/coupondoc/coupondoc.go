// Package coupondoc holds what every coupon store shares: the checks of
// what a store is given, the rules that make a coupon or a promotion code
// refuse a redemption at an instant, the check that a repeated redemption
// asks for the same thing, and the order of a user's redemptions. The
// stores keep the conditions (a mutex, a transaction); this package says
// what they mean, so that the stores refuse alike.
package coupondoc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/timefmt"
)

// Bounds of a redemption's user ID and request key, as billing's
// subscribe requests bound them.
const (
	MaxUserID     = 1024
	MaxRequestKey = 256
)

// OpRedeem names a redemption on a [*billing.RequestKeyError].
const OpRedeem = "redeem coupon"

// ValidID reports whether s may name a coupon or a promotion code (the
// rule of [billing.Coupon.Validate], asked of it).
func ValidID(s string) bool {
	p := billing.PromotionCode{Code: s, CouponID: s}
	return p.Validate() == nil
}

// CheckCoupon checks c as PutCoupon takes it: [billing.Coupon.Validate],
// and RedeemBy within the years a store writes (0000–9999). The error is
// a [*billing.FieldError] wrapping [billing.ErrInvalidRequest].
func CheckCoupon(c *billing.Coupon) error {
	if err := c.Validate(); err != nil {
		return err
	}
	return checkTime("RedeemBy", c.ID, c.RedeemBy)
}

// CheckCode checks p as PutPromotionCode takes it:
// [billing.PromotionCode.Validate], and ExpiresAt within the years a
// store writes.
func CheckCode(p *billing.PromotionCode) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return checkTime("ExpiresAt", p.Code, p.ExpiresAt)
}

// CheckRedemption checks r as Redeem takes it: a user ID (1 to MaxUserID
// bytes of UTF-8 without control characters), a request key (1 to
// MaxRequestKey bytes of UTF-8), a coupon ID and, when given, a code that
// may name one, and an instant At (not zero, years 0000–9999).
func CheckRedemption(r *billing.Redemption) error {
	bad := func(field, v, why string) error {
		return &billing.FieldError{Field: field, Value: v, Key: r.RequestKey, Err: fmt.Errorf("%w: %s", billing.ErrInvalidRequest, why)}
	}
	switch {
	case r.UserID == "" || len(r.UserID) > MaxUserID || !utf8.ValidString(r.UserID) || strings.ContainsFunc(r.UserID, unicode.IsControl):
		return bad("UserID", r.UserID, fmt.Sprintf("1 to %d bytes of UTF-8 without control characters", MaxUserID))
	case r.RequestKey == "" || len(r.RequestKey) > MaxRequestKey || !utf8.ValidString(r.RequestKey):
		return bad("RequestKey", r.RequestKey, fmt.Sprintf("1 to %d bytes of UTF-8", MaxRequestKey))
	case !ValidID(r.CouponID):
		return bad("CouponID", r.CouponID, "1 to 64 bytes of UTF-8 without control characters")
	case r.Code != "" && !ValidID(r.Code):
		return bad("Code", r.Code, "empty, or 1 to 64 bytes of UTF-8 without control characters")
	case r.At.IsZero():
		return bad("At", "", "the instant of the redemption is required")
	}
	return checkTime("At", r.RequestKey, r.At)
}

func checkTime(field, key string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if err := timefmt.Check(t); err != nil {
		return &billing.FieldError{Field: field, Value: t.String(), Key: key, Err: fmt.Errorf("%w: %w", billing.ErrInvalidRequest, err)}
	}
	return nil
}

// CouponRefusal is why coupon c may not be redeemed at at (nil when it
// may): its maximum reached, or at after RedeemBy. The error wraps
// [billing.ErrCouponNotRedeemable].
func CouponRefusal(c *billing.Coupon, at time.Time) error {
	switch {
	case c.MaxRedemptions > 0 && c.Redeemed >= c.MaxRedemptions:
		return fmt.Errorf("%w: coupon %s is used up (%d of %d redemptions)", billing.ErrCouponNotRedeemable, c.ID, c.Redeemed, c.MaxRedemptions)
	case !c.RedeemBy.IsZero() && at.After(c.RedeemBy):
		return fmt.Errorf("%w: coupon %s could be redeemed until %s, not at %s", billing.ErrCouponNotRedeemable, c.ID,
			c.RedeemBy.UTC().Format(time.RFC3339Nano), at.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// CodeRefusal is why promotion code p may not be redeemed with coupon
// couponID at at (nil when it may): it applies another coupon, its own
// maximum is reached, or at is after ExpiresAt. The error wraps
// [billing.ErrCouponNotRedeemable].
func CodeRefusal(p *billing.PromotionCode, couponID string, at time.Time) error {
	switch {
	case p.CouponID != couponID:
		return fmt.Errorf("%w: promotion code %s applies coupon %s, not %s", billing.ErrCouponNotRedeemable, p.Code, p.CouponID, couponID)
	case p.MaxRedemptions > 0 && p.Redeemed >= p.MaxRedemptions:
		return fmt.Errorf("%w: promotion code %s is used up (%d of %d redemptions)", billing.ErrCouponNotRedeemable, p.Code, p.Redeemed, p.MaxRedemptions)
	case !p.ExpiresAt.IsZero() && at.After(p.ExpiresAt):
		return fmt.Errorf("%w: promotion code %s expired at %s, before %s", billing.ErrCouponNotRedeemable, p.Code,
			p.ExpiresAt.UTC().Format(time.RFC3339Nano), at.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Repeat answers a redemption r whose user and key found stored: stored
// itself when r asks for the same coupon and code (codes compared by
// [billing.FoldCode]), else a [*billing.RequestKeyError] naming the fields
// that differ.
func Repeat(stored, r billing.Redemption) (billing.Redemption, error) {
	var fields []string
	if stored.CouponID != r.CouponID {
		fields = append(fields, "CouponID")
	}
	if billing.FoldCode(stored.Code) != billing.FoldCode(r.Code) {
		fields = append(fields, "Code")
	}
	if len(fields) > 0 {
		slices.Sort(fields)
		return billing.Redemption{}, &billing.RequestKeyError{UserID: r.UserID, RequestKey: r.RequestKey, Op: OpRedeem, Fields: fields}
	}
	return stored, nil
}

// SortRedemptions orders a user's redemptions oldest first (by At, then
// by request key, so that the order of equal instants is the same in
// every store).
func SortRedemptions(rs []billing.Redemption) {
	slices.SortFunc(rs, func(a, b billing.Redemption) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.RequestKey, b.RequestKey))
	})
}
