package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// Currency is the code of the charges it comes off: a percent is
	// rounded half to even in its minor unit (whole yen for JPY).
	Currency string `json:"currency,omitempty"`
	// ChargesLeft is how many charges it still comes off, the one of the
	// period carrying it included; -1 for ever.
	ChargesLeft int `json:"charges_left"`
}

// off returns what d takes off left, the plan's amount that earlier
// discounts left: a percent of it rounded half to even in the currency's
// minor unit, or the amount off, at most left.
func (d *Discount) off(left Amount) Amount {
	if left <= 0 {
		return 0
	}
	if d.PercentOff > 0 {
		return min(share(left, int64(d.PercentOff), 10000, centsPerMinorUnit(d.Currency)), left)
	}
	return min(d.AmountOff, left)
}

// discounted returns amount less discounts, applied in order (each
// percent of what the ones before left), never below zero, and what each
// took off.
func discounted(amount Amount, discounts []Discount) (Amount, []Amount) {
	offs := make([]Amount, len(discounts))
	for i := range discounts {
		offs[i] = discounts[i].off(amount)
		amount -= offs[i]
	}
	return max(amount, 0), offs
}

// label names d on an invoice line: "WELCOME20 (20% off)".
func (d *Discount) label() string {
	name := d.CouponID
	if d.Code != "" {
		name = d.Code
	}
	if d.PercentOff > 0 {
		p := fmt.Sprintf("%d", d.PercentOff/100)
		if r := d.PercentOff % 100; r != 0 {
			p = strings.TrimRight(fmt.Sprintf("%d.%02d", d.PercentOff/100, r), "0")
		}
		return name + " (" + p + "% off)"
	}
	return name + " (" + d.AmountOff.String() + " off)"
}

// maxDiscounts bounds the discounts one subscription carries.
const maxDiscounts = 8

// ApplyCouponRequest is what [Collector.ApplyCoupon] takes.
type ApplyCouponRequest struct {
	UserRequest
	// CouponID names the coupon, or Code is a promotion code the customer
	// typed (any case). Exactly one is required.
	CouponID string
	Code     string
}

// ApplyCoupon applies a coupon to the user's subscription, by its ID or
// a promotion code: it comes off the plan of the next charge (the user's
// first SCHEDULED period), and of the ones after while it lasts
// ([Coupon.Duration]), in the order coupons were applied, each a percent
// of what the ones before left ([Period.Due]). It is a change by user
// (see [Collector.ChangePlan] for what they share), with [Config.Coupons]
// required.
//
// Before anything is written the coupon is checked: its currency is the
// collector's ([Invoicing.Currency]), it is not past RedeemBy nor the code
// past ExpiresAt, the next charge's plan is at least the code's MinAmount,
// and a FirstTimeOnly code finds no period of the user that was charged.
// Then the redemption is counted ([Coupons.Redeem]: within the maxima,
// once per user and request key, so a repeat after a crash counts it
// once) and the discount written on the period with its history row
// ([EventCouponApplied]). A refusal wraps [ErrCouponNotRedeemable]; a
// coupon the subscription has already, [ErrNoChange].
func (c *Collector) ApplyCoupon(ctx context.Context, req ApplyCouponRequest) (UserChange, error) {
	fail := func(err error) (UserChange, error) {
		return UserChange{}, fmt.Errorf("apply coupon %s: %w", req.UserID, err)
	}
	if c.cfg.Coupons == nil {
		return fail(fmt.Errorf("%w: Config.Coupons is required", ErrInvalidRequest))
	}
	if (req.CouponID == "") == (req.Code == "") {
		return fail(requestField("CouponID", req.CouponID, "exactly one of CouponID and Code"))
	}
	kr := newKeyedRequest("apply coupon", req.RequestKey).field("CouponID", req.CouponID).field("Code", FoldCode(req.Code))
	return c.byUser(ctx, req.UserRequest, kr, opCoupon, func(recs []Period, kr keyedRequest, now time.Time) ([]Period, keyedRequest, error) {
		next := inStatus(recs, StatusScheduled)
		if len(next) == 0 {
			return nil, kr, nil
		}
		d, err := c.redeem(ctx, req, recs, &next[0], now)
		if err != nil {
			return nil, kr, err
		}
		b, err := json.Marshal(d)
		if err != nil {
			return nil, kr, err
		}
		return next[:1], kr.set("discount", string(b)), nil
	}, func(ctx context.Context, id string) (Change, error) {
		kr := recorded(ctx)
		var d Discount
		if err := json.Unmarshal([]byte(kr.get("discount")), &d); err != nil {
			return Change{}, fmt.Errorf("the recorded discount of %s: %w", id, err)
		}
		return c.admin(ctx, opCoupon, id, func(_ context.Context, cur, next *Period, _ time.Time) ([]*Period, error) {
			if slices.ContainsFunc(cur.Discounts, func(o Discount) bool { return o.CouponID == d.CouponID }) {
				return nil, fmt.Errorf("%w: %s has coupon %s already", ErrNoChange, id, d.CouponID)
			}
			if len(cur.Discounts) >= maxDiscounts {
				return nil, fmt.Errorf("%w: %s has %d coupons, at most %d", ErrCouponNotRedeemable, id, len(cur.Discounts), maxDiscounts)
			}
			next.Discounts = append(slices.Clone(cur.Discounts), d)
			return nil, nil
		})
	})
}

// redeem checks the coupon req names against the rules, for the user's
// records recs and its next charge next, and counts its redemption: the
// discount to write.
func (c *Collector) redeem(ctx context.Context, req ApplyCouponRequest, recs []Period, next *Period, now time.Time) (Discount, error) {
	refuse := func(format string, args ...any) (Discount, error) {
		return Discount{}, fmt.Errorf("%w: %s", ErrCouponNotRedeemable, fmt.Sprintf(format, args...))
	}
	id, code := req.CouponID, ""
	first := next.Amount // the plan of the next charge: after a trial, its first
	if next.IsTrial() {
		first = next.TrialAmount
	}
	if req.Code != "" {
		p, err := c.cfg.Coupons.PromotionCode(ctx, req.Code)
		if err != nil {
			return Discount{}, fmt.Errorf("promotion code %q: %w", req.Code, err)
		}
		switch {
		case !p.ExpiresAt.IsZero() && now.After(p.ExpiresAt):
			return refuse("code %s expired at %s", p.Code, p.ExpiresAt.UTC().Format(time.RFC3339))
		case first < p.MinAmount:
			return refuse("code %s needs a charge of %s at least, the next is %s", p.Code, p.MinAmount, first)
		case p.FirstTimeOnly && slices.ContainsFunc(recs, func(r Period) bool { return r.TransactionID != "" }):
			return refuse("code %s is for a first purchase, and %s has paid before", p.Code, req.UserID)
		}
		id, code = p.CouponID, p.Code
	}
	cp, err := c.cfg.Coupons.Coupon(ctx, id)
	if err != nil {
		return Discount{}, fmt.Errorf("coupon %q: %w", id, err)
	}
	switch {
	case cp.currency() != c.cfg.Invoicing.Currency:
		return refuse("coupon %s is in %s, charges are in %s", cp.ID, cp.currency(), c.cfg.Invoicing.Currency)
	case !cp.RedeemBy.IsZero() && now.After(cp.RedeemBy):
		return refuse("coupon %s could be redeemed until %s", cp.ID, cp.RedeemBy.UTC().Format(time.RFC3339))
	case slices.ContainsFunc(next.Discounts, func(o Discount) bool { return o.CouponID == cp.ID }):
		return Discount{}, fmt.Errorf("%w: %s has coupon %s already", ErrNoChange, req.UserID, cp.ID)
	}
	if _, err := c.cfg.Coupons.Redeem(ctx, Redemption{UserID: req.UserID, RequestKey: req.RequestKey, CouponID: cp.ID, Code: code, At: now.UTC()}); err != nil {
		return Discount{}, fmt.Errorf("redeem coupon %s: %w", cp.ID, err)
	}
	left := -1
	switch cp.Duration {
	case CouponOnce:
		left = 1
	case CouponRepeating:
		left = cp.Periods
	}
	return Discount{CouponID: cp.ID, Code: code, Request: req.RequestKey, PercentOff: cp.PercentOff, AmountOff: cp.AmountOff,
		Currency: c.cfg.Invoicing.Currency, ChargesLeft: left}, nil
}
