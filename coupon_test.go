package billing_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newCouponEnv is the proration env with a coupon store holding coupons.
func newCouponEnv(t *testing.T, st userStore, start time.Time, coupons ...billing.Coupon) (*invoiceEnv, *memory.Coupons) {
	t.Helper()
	store := memory.NewCoupons()
	e := newInvoiceEnv(t, st, func(c *billing.Config) { c.Prices = prorationPrices; c.Coupons = store })
	e.clock.Set(start)
	for _, c := range coupons {
		require.NoError(t, store.PutCoupon(t.Context(), c))
	}
	return e, store
}

// TestCouponsComeOffTheCharges (every layout, in memory and on the local
// DynamoDB server): a 25 % coupon
// for three charges and $3.00 off once, applied in that order to a
// $20.00 plan: the next charge is 20.00 - 5.00 - 3.00 = 12.00 with two
// discount lines on its invoice, the two after 15.00, then 20.00. The
// key repeated changes nothing more and counts one redemption.
func TestCouponsComeOffTheCharges(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e, store := newCouponEnv(t, st, nov1,
				billing.Coupon{ID: "QUARTER", PercentOff: 2500, Duration: billing.CouponRepeating, Periods: 3},
				billing.Coupon{ID: "THREE", AmountOff: billing.MustParseAmount("3.00"), Duration: billing.CouponOnce})
			e.paidPeriod(t, "B:v1", billing.TermMonthly)
			e.clock.Set(nov1.AddDate(0, 0, 3))
			_, err := e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur(e.user, "c1"), CouponID: "QUARTER"})
			require.NoError(t, err)
			ch, err := e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur(e.user, "c2"), CouponID: "THREE"})
			require.NoError(t, err)
			assert.Equal(t, billing.MustParseAmount("12.00"), ch.Subscription.NextChargeAmount)
			again, err := e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur(e.user, "c2"), CouponID: "THREE"})
			require.NoError(t, err)
			assert.True(t, again.Repeated)
			_, err = e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur(e.user, "c3"), CouponID: "THREE"})
			require.ErrorIs(t, err, billing.ErrNoChange, "a coupon the subscription has already")
			c3, err := store.Coupon(ctx, "THREE")
			require.NoError(t, err)
			assert.Equal(t, int64(1), c3.Redeemed, "counted once")

			var charged []billing.Amount
			for m := 1; m <= 5; m++ {
				e.runAt(t, nov1.AddDate(0, m, 0).Add(time.Minute), billing.RunScheduled)
			}
			for _, c := range e.pay.Calls()[1:] {
				charged = append(charged, c.Request.Amount)
			}
			assert.Equal(t, []billing.Amount{1200, 1500, 1500, 2000, 2000}, charged)

			invs := e.invoices(t)
			require.Len(t, invs, 6)
			type line struct {
				Kind   billing.LineKind
				Desc   string
				Amount int64
			}
			var lines []line
			for _, l := range invs[1].Lines {
				lines = append(lines, line{l.Kind, l.Description, l.Amount})
			}
			assert.Equal(t, []line{{billing.LinePlan, "B 12/2026", 2000}, {billing.LineDiscount, "QUARTER (25% off)", 500},
				{billing.LineDiscount, "THREE (3.00 off)", 300}}, lines)
			assert.Equal(t, int64(800), invs[1].Discounts)
			assert.Equal(t, int64(1200), invs[1].Total)
			assert.Empty(t, e.next(t).Discounts, "used up")
		})
	}
}

// TestPromotionCodeRules: a code is found in any case and applies its
// coupon; it refuses a customer who paid before when it is for first
// purchases, a charge under its minimum, and a date past its expiry,
// each without counting a redemption.
func TestPromotionCodeRules(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ctx := t.Context()
	e, store := newCouponEnv(t, memoryUserStores()[0], nov1,
		billing.Coupon{ID: "HALF", PercentOff: 5000, Duration: billing.CouponForever})
	require.NoError(t, store.PutPromotionCode(ctx, billing.PromotionCode{Code: "WELCOME", CouponID: "HALF", FirstTimeOnly: true}))
	require.NoError(t, store.PutPromotionCode(ctx, billing.PromotionCode{Code: "BIG", CouponID: "HALF", MinAmount: billing.MustParseAmount("25.00")}))
	require.NoError(t, store.PutPromotionCode(ctx, billing.PromotionCode{Code: "LATE", CouponID: "HALF", ExpiresAt: nov1.Add(time.Hour)}))
	e.paidPeriod(t, "B:v1", billing.TermMonthly)
	e.clock.Set(nov1.AddDate(0, 0, 2))
	for _, code := range []string{"welcome", "big", "Late"} {
		_, err := e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur(e.user, "k-"+code), Code: code})
		require.ErrorIs(t, err, billing.ErrCouponNotRedeemable, code)
	}
	half, err := store.Coupon(ctx, "HALF")
	require.NoError(t, err)
	assert.Zero(t, half.Redeemed)

	// A customer who never paid (subscribed, not charged yet) may use it.
	fresh, store2 := newCouponEnv(t, memoryUserStores()[0], nov1, billing.Coupon{ID: "HALF", PercentOff: 5000, Duration: billing.CouponForever})
	require.NoError(t, store2.PutPromotionCode(ctx, billing.PromotionCode{Code: "WELCOME", CouponID: "HALF", FirstTimeOnly: true}))
	_, err = fresh.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "o", UserID: fresh.user, Tier: "B:v1", FirstBillingDate: nov1.AddDate(0, 0, 7)})
	require.NoError(t, err)
	ch, err := fresh.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur(fresh.user, "k"), Code: "wElCoMe"})
	require.NoError(t, err)
	assert.Equal(t, billing.MustParseAmount("10.00"), ch.Subscription.NextChargeAmount)
	fresh.runAt(t, nov1.AddDate(0, 0, 7).Add(time.Minute), billing.RunScheduled)
	assert.Equal(t, billing.MustParseAmount("10.00"), fresh.pay.Calls()[0].Request.Amount)
}

// TestCouponRedemptionsNeverPassTheMaximum: 16 subscribers apply a coupon
// of at most 5 redemptions at once: exactly 5 get it, the rest are
// refused, and the count is 5.
func TestCouponRedemptionsNeverPassTheMaximum(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ctx := t.Context()
	e, store := newCouponEnv(t, memoryUserStores()[0], nov1,
		billing.Coupon{ID: "FIVE", PercentOff: 1000, Duration: billing.CouponOnce, MaxRedemptions: 5})
	for i := range 16 {
		_, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "o", UserID: fmt.Sprint("u", i), Tier: "B:v1", FirstBillingDate: nov1.AddDate(0, 0, 3)})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range 16 {
		wg.Go(func() {
			_, errs[i] = e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur(fmt.Sprint("u", i), "c"), CouponID: "FIVE"})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, billing.ErrCouponNotRedeemable)
		}
	}
	assert.Equal(t, 5, ok)
	c, err := store.Coupon(ctx, "FIVE")
	require.NoError(t, err)
	assert.Equal(t, int64(5), c.Redeemed)
}

// TestCouponInsideProration: proration lines carry the discount the paid
// period had and are not discounted again: with 50 % off for ever, an
// upgrade from $10 to $20 on day 15 of 30 credits 2.50 and charges 5.00,
// and the next charge is 10.00 (the new plan, half off) + 2.50.
func TestCouponInsideProration(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ctx := t.Context()
	e, _ := newCouponEnv(t, memoryUserStores()[0], nov1, billing.Coupon{ID: "HALF", PercentOff: 5000, Duration: billing.CouponForever})
	_, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "o", UserID: e.user, Tier: "A:v1"})
	require.NoError(t, err)
	_, err = e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur(e.user, "c"), CouponID: "HALF"})
	require.NoError(t, err)
	e.runAt(t, nov1.Add(time.Minute), billing.RunScheduled)
	assert.Equal(t, billing.MustParseAmount("5.00"), e.pay.Calls()[0].Request.Amount)
	e.clock.Set(nov1.AddDate(0, 0, 15))
	ch, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "up"), Tier: "B:v1"})
	require.NoError(t, err)
	require.Len(t, ch.Adjustments, 2)
	assert.Equal(t, billing.MustParseAmount("2.50"), ch.Adjustments[0].Amount)
	assert.Equal(t, billing.MustParseAmount("5.00"), ch.Adjustments[1].Amount)
	assert.Equal(t, billing.MustParseAmount("12.50"), ch.Subscription.NextChargeAmount)
}

// TestSubscribeWithCoupon: a promotion code given at Subscribe comes off
// the first charge, after a trial that does not use it up; the subscribe
// repeated counts one redemption; the key with another coupon is
// refused; an unknown coupon refuses the subscription before anything is
// written.
func TestSubscribeWithCoupon(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ctx := t.Context()
	e, store := newCouponEnv(t, memoryUserStores()[0], nov1,
		billing.Coupon{ID: "HALF", PercentOff: 5000, Duration: billing.CouponOnce})
	require.NoError(t, store.PutPromotionCode(ctx, billing.PromotionCode{Code: "WELCOME", CouponID: "HALF", FirstTimeOnly: true}))

	_, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "o0", UserID: e.user, Tier: "B:v1", CouponID: "NOPE"})
	require.ErrorIs(t, err, billing.ErrNotFound)
	assert.Empty(t, e.records(t), "nothing written")

	req := billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "B:v1", TrialDays: 14, Code: "welcome"}
	sub, err := e.c.Subscribe(ctx, req)
	require.NoError(t, err)
	require.Len(t, sub.Subscription.Discounts, 1)
	again, err := e.c.Subscribe(ctx, req)
	require.NoError(t, err)
	assert.True(t, again.Repeated)
	other := req
	other.Code = ""
	other.CouponID = "HALF"
	_, err = e.c.Subscribe(ctx, other)
	var reused *billing.RequestKeyError
	require.ErrorAs(t, err, &reused)
	half, err := store.Coupon(ctx, "HALF")
	require.NoError(t, err)
	assert.Equal(t, int64(1), half.Redeemed)

	e.runAt(t, nov1.Add(time.Minute), billing.RunScheduled) // the trial, at zero
	require.Zero(t, e.pay.CallCount())
	e.runAt(t, nov1.AddDate(0, 0, 14).Add(time.Minute), billing.RunScheduled)
	e.runAt(t, nov1.AddDate(0, 1, 14).Add(time.Minute), billing.RunScheduled)
	var charged []billing.Amount
	for _, c := range e.pay.Calls() {
		charged = append(charged, c.Request.Amount)
	}
	assert.Equal(t, []billing.Amount{1000, 2000}, charged, "half off the first charge after the trial, once")
}

// TestCancelNowRefundsWhatTheDiscountLeft: a cancellation now refunds the
// unused share of what the period was charged, its discount taken off,
// not of its list price.
func TestCancelNowRefundsWhatTheDiscountLeft(t *testing.T) {
	t.Parallel()
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ctx := t.Context()
	e, _ := newCouponEnv(t, memoryUserStores()[0], nov1, billing.Coupon{ID: "HALF", PercentOff: 5000, Duration: billing.CouponForever})
	_, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "o", UserID: e.user, Tier: "B:v1", CouponID: "HALF"})
	require.NoError(t, err)
	e.runAt(t, nov1.Add(time.Minute), billing.RunScheduled)
	require.Equal(t, billing.MustParseAmount("10.00"), e.pay.Calls()[0].Request.Amount)
	e.clock.Set(nov1.AddDate(0, 0, 15))
	left, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "c"), When: billing.CancelNow})
	require.NoError(t, err)
	assert.Equal(t, billing.MustParseAmount("5.00"), left.Refund, "half of the 10.00 charged, not of the 20.00 list price")
}
