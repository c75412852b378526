package dynamostore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/timefmt"
)

// Keys of the coupon items, on either layout (key attributes pk, sk in
// the invoices table; PK, SK on the single table):
//
//	COUPON#<id>         COUPON           a coupon: its terms and redeemed, its count
//	PROMO#<folded code> PROMO            a promotion code (billing.FoldCode): its rules and count
//	<user's partition>  REDEEM#…<key>    a redemption, by user and request key
//
// The user's partition is the one of the user's invoices: USER#<user>
// in the invoices table, with sort key REDEEM#<key>; on the single table
// the account's (AccountPrefix + the account of a subscription's user
// ID), with sort key REDEEM#<hash of the user>#<key> (userSegment), so
// that an account's users (the account, each subscription) keep apart.
const (
	pkCouponPrefix = "COUPON#"
	skCoupon       = "COUPON"
	pkCodePrefix   = "PROMO#"
	skCode         = "PROMO"
	skRedemption   = "REDEEM#"
)

// Attribute names of the coupon items (new names of their own, on either
// layout).
const (
	attrCouponID       = "coupon_id"
	attrRedeemed       = "redeemed"
	attrMaxRedemptions = "max_redemptions"
	attrRedeemBy       = "redeem_by"
	attrExpiresAt      = "expires_at"
)

// couponItem is the wire form of a coupon. Redeemed is written by
// redemptions only (PutCoupon sets it when absent).
type couponItem struct {
	Entity         string `dynamodbav:"entity"`
	ID             string `dynamodbav:"coupon_id"`
	PercentOff     int    `dynamodbav:"percent_off,omitempty"`
	AmountOff      int64  `dynamodbav:"amount_off,omitempty"`
	Currency       string `dynamodbav:"currency,omitempty"`
	Duration       string `dynamodbav:"duration"`
	Periods        int    `dynamodbav:"periods,omitempty"`
	MaxRedemptions int64  `dynamodbav:"max_redemptions"`
	RedeemBy       string `dynamodbav:"redeem_by,omitempty"`
	Redeemed       int64  `dynamodbav:"redeemed"`
}

// couponOptional are the attributes of couponItem a put removes when the
// coupon has none.
var couponOptional = []string{"percent_off", "amount_off", "currency", "periods", attrRedeemBy}

// codeItem is the wire form of a promotion code.
type codeItem struct {
	Entity         string `dynamodbav:"entity"`
	Code           string `dynamodbav:"code"`
	CouponID       string `dynamodbav:"coupon_id"`
	ExpiresAt      string `dynamodbav:"expires_at,omitempty"`
	MinAmount      int64  `dynamodbav:"min_amount,omitempty"`
	FirstTimeOnly  bool   `dynamodbav:"first_time_only,omitempty"`
	MaxRedemptions int64  `dynamodbav:"max_redemptions"`
	Redeemed       int64  `dynamodbav:"redeemed"`
}

var codeOptional = []string{attrExpiresAt, "min_amount", "first_time_only"}

// redemptionItem is the wire form of a redemption.
type redemptionItem struct {
	Entity     string `dynamodbav:"entity"`
	UserID     string `dynamodbav:"user_id"`
	RequestKey string `dynamodbav:"request_key"`
	CouponID   string `dynamodbav:"coupon_id"`
	Code       string `dynamodbav:"code,omitempty"`
	At         string `dynamodbav:"redeemed_at"`
}

// couponTime writes t as the library writes timestamps (timefmt.Nanos, so
// that string order is time order in the conditions that compare them);
// the zero time is "". coupondoc checked every time a store is given.
func couponTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	s, err := timefmt.Nanos(t)
	if err != nil {
		panic("billing: coupon time unchecked: " + err.Error())
	}
	return s
}

func marshalCoupon(v any) map[string]types.AttributeValue {
	m, err := attributevalue.MarshalMap(v)
	if err != nil {
		panic("billing: encode coupon item: " + err.Error()) // plain strings, numbers and booleans: cannot fail
	}
	return m
}

func encodeCoupon(c *billing.Coupon) map[string]types.AttributeValue {
	return marshalCoupon(couponItem{Entity: "Coupon", ID: c.ID, PercentOff: c.PercentOff, AmountOff: int64(c.AmountOff),
		Currency: c.Currency, Duration: string(c.Duration), Periods: c.Periods, MaxRedemptions: c.MaxRedemptions,
		RedeemBy: couponTime(c.RedeemBy), Redeemed: c.Redeemed})
}

func encodeCode(p *billing.PromotionCode) map[string]types.AttributeValue {
	return marshalCoupon(codeItem{Entity: "PromotionCode", Code: p.Code, CouponID: p.CouponID, ExpiresAt: couponTime(p.ExpiresAt),
		MinAmount: int64(p.MinAmount), FirstTimeOnly: p.FirstTimeOnly, MaxRedemptions: p.MaxRedemptions, Redeemed: p.Redeemed})
}

func encodeRedemption(r *billing.Redemption) map[string]types.AttributeValue {
	return marshalCoupon(redemptionItem{Entity: "CouponRedemption", UserID: r.UserID, RequestKey: r.RequestKey,
		CouponID: r.CouponID, Code: r.Code, At: couponTime(r.At)})
}

// couponItemError is the error of an undecodable coupon item: a
// [*billing.FieldError] wrapping [billing.ErrInvalidItem].
func couponItemError(field, key string, err error) error {
	return &billing.FieldError{Field: field, Key: key, Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, err)}
}

func parseCouponTime(field, key, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := timefmt.Parse(s)
	if err != nil {
		return time.Time{}, &billing.FieldError{Field: field, Value: s, Key: key,
			Err: fmt.Errorf("%w: %w: %w", billing.ErrInvalidItem, billing.ErrInvalidDate, err)}
	}
	return t, nil
}

func decodeCoupon(m map[string]types.AttributeValue, key string) (billing.Coupon, error) {
	var it couponItem
	if err := attributevalue.UnmarshalMap(m, &it); err != nil {
		return billing.Coupon{}, couponItemError("coupon", key, err)
	}
	c := billing.Coupon{ID: it.ID, PercentOff: it.PercentOff, AmountOff: billing.Amount(it.AmountOff), Currency: it.Currency,
		Duration: billing.CouponDuration(it.Duration), Periods: it.Periods, MaxRedemptions: it.MaxRedemptions, Redeemed: it.Redeemed}
	var err error
	c.RedeemBy, err = parseCouponTime(attrRedeemBy, key, it.RedeemBy)
	return c, err
}

func decodeCode(m map[string]types.AttributeValue, key string) (billing.PromotionCode, error) {
	var it codeItem
	if err := attributevalue.UnmarshalMap(m, &it); err != nil {
		return billing.PromotionCode{}, couponItemError("promotion code", key, err)
	}
	p := billing.PromotionCode{Code: it.Code, CouponID: it.CouponID, MinAmount: billing.Amount(it.MinAmount),
		FirstTimeOnly: it.FirstTimeOnly, MaxRedemptions: it.MaxRedemptions, Redeemed: it.Redeemed}
	var err error
	p.ExpiresAt, err = parseCouponTime(attrExpiresAt, key, it.ExpiresAt)
	return p, err
}

func decodeRedemption(m map[string]types.AttributeValue, key string) (billing.Redemption, error) {
	var it redemptionItem
	if err := attributevalue.UnmarshalMap(m, &it); err != nil {
		return billing.Redemption{}, couponItemError("redemption", key, err)
	}
	r := billing.Redemption{UserID: it.UserID, RequestKey: it.RequestKey, CouponID: it.CouponID, Code: it.Code}
	var err error
	if r.At, err = parseCouponTime("redeemed_at", key, it.At); err == nil && r.At.IsZero() {
		err = couponItemError("redeemed_at", key, fmt.Errorf("a redemption without its instant"))
	}
	return r, err
}

// userSegment is a user ID as the single table's redemption sort keys
// hold it: the first 16 bytes of its SHA-256 in hex, a fixed width
// without "#" (so one user's prefix is no other's) that keeps the sort key
// within DynamoDB's 1,024 bytes whatever the user ID's length.
func userSegment(userID string) string {
	h := sha256.Sum256([]byte(userID))
	return hex.EncodeToString(h[:16])
}
