package billingtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

// couponT0 is when the suite's redemptions are made, one a second after
// it unless a test says otherwise.
var couponT0 = time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)

// RunCouponConformance runs the conformance suite of [billing.Coupons] on
// the store open returns, called once per subtest with a fresh, empty
// store. It checks that coupons and promotion codes read back as put (a
// code in any case), that a put keeps the counts, the refusals of invalid
// terms and of a code of an unknown coupon, that a redemption counts its
// coupon and code once (a repeat returns the stored redemption, another
// coupon or code under the key is a [*billing.RequestKeyError]), the
// refusals past a maximum or a date with nothing counted, the order of a
// user's redemptions, and that 16 concurrent customers never take a
// coupon past its maximum.
func RunCouponConformance(t *testing.T, open func(t *testing.T) billing.Coupons) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s billing.Coupons)
	}{
		{"PutRead", couponPutRead},
		{"PutKeepsRedeemed", couponPutKeepsRedeemed},
		{"Invalid", couponInvalid},
		{"CodeOfUnknownCoupon", couponCodeOfUnknownCoupon},
		{"RedeemCounts", couponRedeemCounts},
		{"Repeat", couponRepeat},
		{"KeyReused", couponKeyReused},
		{"MaxRedemptions", couponMaxRedemptions},
		{"CodeMaxRedemptions", couponCodeMaxRedemptions},
		{"Dates", couponDates},
		{"NotFound", couponRedeemNotFound},
		{"RedemptionsOrder", couponRedemptionsOrder},
		{"Concurrent", couponConcurrent},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func putCoupon(t *testing.T, s billing.Coupons, c billing.Coupon) {
	t.Helper()
	require.NoError(t, s.PutCoupon(t.Context(), c))
}

func putCode(t *testing.T, s billing.Coupons, p billing.PromotionCode) {
	t.Helper()
	require.NoError(t, s.PutPromotionCode(t.Context(), p))
}

func redeem(t *testing.T, s billing.Coupons, user, key, coupon, code string, at time.Time) billing.Redemption {
	t.Helper()
	got, err := s.Redeem(t.Context(), billing.Redemption{UserID: user, RequestKey: key, CouponID: coupon, Code: code, At: at})
	require.NoError(t, err)
	return got
}

// requireCounts checks the coupon's count and, when code is not "", the
// code's.
func requireCounts(t *testing.T, s billing.Coupons, coupon string, want int64, code string, wantCode int64) {
	t.Helper()
	c, err := s.Coupon(t.Context(), coupon)
	require.NoError(t, err)
	assert.Equal(t, want, c.Redeemed, "coupon %s redeemed", coupon)
	if code != "" {
		p, err := s.PromotionCode(t.Context(), code)
		require.NoError(t, err)
		assert.Equal(t, wantCode, p.Redeemed, "code %s redeemed", code)
	}
}

func redemptionsOf(t *testing.T, s billing.Coupons, user string) []billing.Redemption {
	t.Helper()
	got, err := s.Redemptions(t.Context(), user)
	require.NoError(t, err)
	return got
}

func welcome() billing.Coupon {
	return billing.Coupon{ID: "WELCOME20", PercentOff: 2000, Duration: billing.CouponRepeating, Periods: 3}
}

func couponPutRead(t *testing.T, s billing.Coupons) {
	ctx := t.Context()
	c := billing.Coupon{ID: "FIVE-OFF", AmountOff: 500, Currency: "EUR", Duration: billing.CouponOnce, MaxRedemptions: 100,
		RedeemBy: time.Date(2026, 6, 30, 23, 59, 59, 123456789, time.UTC)}
	given := c
	given.Redeemed = 7 // the store keeps the count: a new coupon starts at 0
	putCoupon(t, s, given)
	got, err := s.Coupon(ctx, "FIVE-OFF")
	require.NoError(t, err)
	assert.Equal(t, c, got, "the terms read back; Redeemed 0")
	putCoupon(t, s, welcome())
	got, err = s.Coupon(ctx, "WELCOME20")
	require.NoError(t, err)
	assert.Equal(t, welcome(), got)
	_, err = s.Coupon(ctx, "welcome20")
	require.ErrorIs(t, err, billing.ErrNotFound, "coupon IDs are compared exactly")

	p := billing.PromotionCode{Code: "Welcome", CouponID: "WELCOME20", ExpiresAt: time.Date(2026, 5, 1, 0, 0, 0, 1, time.UTC),
		MinAmount: 1000, FirstTimeOnly: true, MaxRedemptions: 50}
	putCode(t, s, p)
	for _, typed := range []string{"welcome", "WELCOME", "Welcome", "wElCoMe"} {
		got, err := s.PromotionCode(ctx, typed)
		require.NoError(t, err, typed)
		assert.Equal(t, p, got, "code typed %q", typed)
	}
	_, err = s.PromotionCode(ctx, "welcome2")
	require.ErrorIs(t, err, billing.ErrNotFound)
	_, err = s.Coupon(ctx, "NONE")
	require.ErrorIs(t, err, billing.ErrNotFound)
}

func couponPutKeepsRedeemed(t *testing.T, s billing.Coupons) {
	ctx := t.Context()
	c := welcome()
	c.RedeemBy = couponT0.Add(time.Hour)
	putCoupon(t, s, c)
	putCode(t, s, billing.PromotionCode{Code: "SPRING", CouponID: c.ID})
	redeem(t, s, "u1", "k1", c.ID, "spring", couponT0)
	redeem(t, s, "u2", "k1", c.ID, "", couponT0)

	// New terms, RedeemBy removed, a stale count given: the store's stays.
	c = billing.Coupon{ID: c.ID, PercentOff: 1500, Duration: billing.CouponForever, MaxRedemptions: 10, Redeemed: 0}
	putCoupon(t, s, c)
	got, err := s.Coupon(ctx, c.ID)
	require.NoError(t, err)
	c.Redeemed = 2
	assert.Equal(t, c, got, "the new terms, the count kept")

	p := billing.PromotionCode{Code: "spring", CouponID: c.ID, MaxRedemptions: 3, Redeemed: 9}
	putCode(t, s, p)
	gotCode, err := s.PromotionCode(ctx, "SPRING")
	require.NoError(t, err)
	p.Redeemed = 1
	assert.Equal(t, p, gotCode, "the new rules (and spelling), the count kept")
}

func couponInvalid(t *testing.T, s billing.Coupons) {
	ctx := t.Context()
	for field, c := range map[string]billing.Coupon{
		"ID":             {PercentOff: 100, Duration: billing.CouponOnce},
		"PercentOff":     {ID: "BOTH", PercentOff: 100, AmountOff: 100, Duration: billing.CouponOnce},
		"Currency":       {ID: "XYZ", AmountOff: 100, Currency: "XYZ", Duration: billing.CouponOnce},
		"Periods":        {ID: "REP", PercentOff: 100, Duration: billing.CouponRepeating},
		"Duration":       {ID: "DUR", PercentOff: 100},
		"MaxRedemptions": {ID: "MAX", PercentOff: 100, Duration: billing.CouponOnce, MaxRedemptions: -1},
		"RedeemBy":       {ID: "FAR", PercentOff: 100, Duration: billing.CouponOnce, RedeemBy: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		err := s.PutCoupon(ctx, c)
		require.ErrorIs(t, err, billing.ErrInvalidRequest, field)
		var fe *billing.FieldError
		require.ErrorAs(t, err, &fe, field)
		assert.Equal(t, field, fe.Field)
		if c.ID != "" {
			_, err = s.Coupon(ctx, c.ID)
			require.ErrorIs(t, err, billing.ErrNotFound, "%s: nothing stored", field)
		}
	}

	putCoupon(t, s, welcome())
	for field, p := range map[string]billing.PromotionCode{
		"Code":           {CouponID: "WELCOME20"},
		"CouponID":       {Code: "NOCOUPON"},
		"MinAmount":      {Code: "MIN", CouponID: "WELCOME20", MinAmount: -1},
		"MaxRedemptions": {Code: "MAX", CouponID: "WELCOME20", MaxRedemptions: -1},
		"ExpiresAt":      {Code: "OLD", CouponID: "WELCOME20", ExpiresAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		err := s.PutPromotionCode(ctx, p)
		require.ErrorIs(t, err, billing.ErrInvalidRequest, field)
		var fe *billing.FieldError
		require.ErrorAs(t, err, &fe, field)
		assert.Equal(t, field, fe.Field)
		if p.Code != "" {
			_, err = s.PromotionCode(ctx, p.Code)
			require.ErrorIs(t, err, billing.ErrNotFound, "%s: nothing stored", field)
		}
	}

	good := billing.Redemption{UserID: "u1", RequestKey: "k1", CouponID: "WELCOME20", At: couponT0}
	for field, edit := range map[string]func(r *billing.Redemption){
		"UserID":     func(r *billing.Redemption) { r.UserID = "" },
		"RequestKey": func(r *billing.Redemption) { r.RequestKey = "" },
		"CouponID":   func(r *billing.Redemption) { r.CouponID = "" },
		"Code":       func(r *billing.Redemption) { r.Code = "bad\ncode" },
		"At":         func(r *billing.Redemption) { r.At = time.Time{} },
	} {
		r := good
		edit(&r)
		_, err := s.Redeem(ctx, r)
		require.ErrorIs(t, err, billing.ErrInvalidRequest, field)
		var fe *billing.FieldError
		require.ErrorAs(t, err, &fe, field)
		assert.Equal(t, field, fe.Field)
	}
	requireCounts(t, s, "WELCOME20", 0, "", 0)
	assert.Empty(t, redemptionsOf(t, s, "u1"), "nothing redeemed")
}

func couponCodeOfUnknownCoupon(t *testing.T, s billing.Coupons) {
	err := s.PutPromotionCode(t.Context(), billing.PromotionCode{Code: "ORPHAN", CouponID: "NONE"})
	require.ErrorIs(t, err, billing.ErrNotFound)
	_, err = s.PromotionCode(t.Context(), "ORPHAN")
	require.ErrorIs(t, err, billing.ErrNotFound, "nothing stored")
}

func couponRedeemCounts(t *testing.T, s billing.Coupons) {
	putCoupon(t, s, welcome())
	putCode(t, s, billing.PromotionCode{Code: "WELCOME", CouponID: "WELCOME20"})
	at := couponT0.Add(1500 * time.Millisecond)
	got := redeem(t, s, "u1", "k1", "WELCOME20", "WELCOME", at)
	assert.Equal(t, billing.Redemption{UserID: "u1", RequestKey: "k1", CouponID: "WELCOME20", Code: "WELCOME", At: at}, got)
	requireCounts(t, s, "WELCOME20", 1, "WELCOME", 1)
	redeem(t, s, "u2", "k1", "WELCOME20", "", at)
	requireCounts(t, s, "WELCOME20", 2, "WELCOME", 1)
	assert.Equal(t, []billing.Redemption{got}, redemptionsOf(t, s, "u1"))
	assert.Len(t, redemptionsOf(t, s, "u2"), 1)
}

func couponRepeat(t *testing.T, s billing.Coupons) {
	ctx := t.Context()
	c := welcome()
	c.MaxRedemptions = 1
	putCoupon(t, s, c)
	putCode(t, s, billing.PromotionCode{Code: "WELCOME", CouponID: c.ID, MaxRedemptions: 1})
	first := redeem(t, s, "u1", "k1", c.ID, "WELCOME", couponT0)

	// The same request again (a retry after a crash, later, the code typed
	// in another case): the stored redemption, counted once, although the
	// coupon and the code are used up by the first.
	again, err := s.Redeem(ctx, billing.Redemption{UserID: "u1", RequestKey: "k1", CouponID: c.ID, Code: "welcome", At: couponT0.Add(time.Hour)})
	require.NoError(t, err, "a repeat is no redemption past the maximum")
	assert.Equal(t, first, again, "the stored redemption")
	requireCounts(t, s, c.ID, 1, "WELCOME", 1)
	assert.Len(t, redemptionsOf(t, s, "u1"), 1)

	// Of a coupon and a code without a maximum: still counted once.
	putCoupon(t, s, billing.Coupon{ID: "OPEN", PercentOff: 100, Duration: billing.CouponForever})
	putCode(t, s, billing.PromotionCode{Code: "HELLO", CouponID: "OPEN"})
	first = redeem(t, s, "u2", "k1", "OPEN", "HELLO", couponT0)
	for range 2 {
		again = redeem(t, s, "u2", "k1", "OPEN", "hello", couponT0.Add(time.Minute))
		assert.Equal(t, first, again, "the stored redemption")
	}
	requireCounts(t, s, "OPEN", 1, "HELLO", 1)
	assert.Len(t, redemptionsOf(t, s, "u2"), 1)
}

func couponKeyReused(t *testing.T, s billing.Coupons) {
	ctx := t.Context()
	putCoupon(t, s, welcome())
	putCoupon(t, s, billing.Coupon{ID: "OTHER", PercentOff: 500, Duration: billing.CouponOnce})
	putCode(t, s, billing.PromotionCode{Code: "WELCOME", CouponID: "WELCOME20"})
	putCode(t, s, billing.PromotionCode{Code: "HELLO", CouponID: "WELCOME20"})
	redeem(t, s, "u1", "k1", "WELCOME20", "WELCOME", couponT0)
	for _, tc := range []struct {
		coupon, code string
		fields       []string
	}{
		{"OTHER", "WELCOME", []string{"CouponID"}},
		{"WELCOME20", "HELLO", []string{"Code"}},
		{"WELCOME20", "", []string{"Code"}},
		{"OTHER", "", []string{"Code", "CouponID"}},
	} {
		_, err := s.Redeem(ctx, billing.Redemption{UserID: "u1", RequestKey: "k1", CouponID: tc.coupon, Code: tc.code, At: couponT0})
		require.ErrorIs(t, err, billing.ErrRequestKeyReused, "%s %s", tc.coupon, tc.code)
		var rk *billing.RequestKeyError
		require.ErrorAs(t, err, &rk)
		assert.Equal(t, "u1", rk.UserID)
		assert.Equal(t, "k1", rk.RequestKey)
		assert.Equal(t, tc.fields, rk.Fields)
	}
	requireCounts(t, s, "WELCOME20", 1, "WELCOME", 1)
	requireCounts(t, s, "OTHER", 0, "HELLO", 0)
	assert.Len(t, redemptionsOf(t, s, "u1"), 1)

	// Another user's key of the same name is its own.
	redeem(t, s, "u2", "k1", "OTHER", "", couponT0)
	requireCounts(t, s, "OTHER", 1, "", 0)
}

func couponMaxRedemptions(t *testing.T, s billing.Coupons) {
	c := welcome()
	c.MaxRedemptions = 2
	putCoupon(t, s, c)
	redeem(t, s, "u1", "k", c.ID, "", couponT0)
	redeem(t, s, "u2", "k", c.ID, "", couponT0)
	_, err := s.Redeem(t.Context(), billing.Redemption{UserID: "u3", RequestKey: "k", CouponID: c.ID, At: couponT0})
	require.ErrorIs(t, err, billing.ErrCouponNotRedeemable)
	requireCounts(t, s, c.ID, 2, "", 0)
	assert.Empty(t, redemptionsOf(t, s, "u3"), "no redemption stored")

	// Raising the maximum lets the next one in.
	c.MaxRedemptions = 3
	putCoupon(t, s, c)
	redeem(t, s, "u3", "k", c.ID, "", couponT0)
	requireCounts(t, s, c.ID, 3, "", 0)
}

func couponCodeMaxRedemptions(t *testing.T, s billing.Coupons) {
	putCoupon(t, s, welcome())
	putCode(t, s, billing.PromotionCode{Code: "ONCE", CouponID: "WELCOME20", MaxRedemptions: 1})
	redeem(t, s, "u1", "k", "WELCOME20", "ONCE", couponT0)
	_, err := s.Redeem(t.Context(), billing.Redemption{UserID: "u2", RequestKey: "k", CouponID: "WELCOME20", Code: "once", At: couponT0})
	require.ErrorIs(t, err, billing.ErrCouponNotRedeemable)
	requireCounts(t, s, "WELCOME20", 1, "ONCE", 1)
	assert.Empty(t, redemptionsOf(t, s, "u2"), "no redemption stored")

	// The coupon itself still may be, by its ID.
	redeem(t, s, "u2", "k", "WELCOME20", "", couponT0)
	requireCounts(t, s, "WELCOME20", 2, "ONCE", 1)
}

func couponDates(t *testing.T, s billing.Coupons) {
	ctx := t.Context()
	end := couponT0.Add(24 * time.Hour)
	c := welcome()
	c.RedeemBy = end
	putCoupon(t, s, c)
	putCoupon(t, s, billing.Coupon{ID: "OPEN", PercentOff: 100, Duration: billing.CouponForever})
	putCode(t, s, billing.PromotionCode{Code: "SOON", CouponID: "OPEN", ExpiresAt: end})

	// At the instant itself: still redeemable.
	redeem(t, s, "u1", "k1", c.ID, "", end)
	redeem(t, s, "u1", "k2", "OPEN", "SOON", end)
	// A nanosecond after: not, and nothing counted.
	for _, r := range []billing.Redemption{
		{UserID: "u2", RequestKey: "k1", CouponID: c.ID, At: end.Add(time.Nanosecond)},
		{UserID: "u2", RequestKey: "k2", CouponID: "OPEN", Code: "SOON", At: end.Add(time.Nanosecond)},
	} {
		_, err := s.Redeem(ctx, r)
		require.ErrorIs(t, err, billing.ErrCouponNotRedeemable, "%s %s", r.CouponID, r.Code)
	}
	requireCounts(t, s, c.ID, 1, "", 0)
	requireCounts(t, s, "OPEN", 1, "SOON", 1)
	assert.Empty(t, redemptionsOf(t, s, "u2"), "no redemption stored")
	// The coupon of an expired code is still redeemable by its ID.
	redeem(t, s, "u2", "k2", "OPEN", "", end.Add(time.Hour))
}

func couponRedeemNotFound(t *testing.T, s billing.Coupons) {
	ctx := t.Context()
	putCoupon(t, s, welcome())
	putCoupon(t, s, billing.Coupon{ID: "OTHER", PercentOff: 500, Duration: billing.CouponOnce})
	putCode(t, s, billing.PromotionCode{Code: "OTHERS", CouponID: "OTHER"})
	_, err := s.Redeem(ctx, billing.Redemption{UserID: "u1", RequestKey: "k1", CouponID: "NONE", At: couponT0})
	require.ErrorIs(t, err, billing.ErrNotFound, "an unknown coupon")
	_, err = s.Redeem(ctx, billing.Redemption{UserID: "u1", RequestKey: "k1", CouponID: "WELCOME20", Code: "NOCODE", At: couponT0})
	require.ErrorIs(t, err, billing.ErrNotFound, "an unknown code")
	_, err = s.Redeem(ctx, billing.Redemption{UserID: "u1", RequestKey: "k1", CouponID: "WELCOME20", Code: "OTHERS", At: couponT0})
	require.ErrorIs(t, err, billing.ErrCouponNotRedeemable, "a code of another coupon")
	requireCounts(t, s, "WELCOME20", 0, "OTHERS", 0)
	requireCounts(t, s, "OTHER", 0, "", 0)
	assert.Empty(t, redemptionsOf(t, s, "u1"), "no redemption stored")
	// The key is still free.
	redeem(t, s, "u1", "k1", "WELCOME20", "", couponT0)
}

func couponRedemptionsOrder(t *testing.T, s billing.Coupons) {
	putCoupon(t, s, welcome())
	putCoupon(t, s, billing.Coupon{ID: "OTHER", PercentOff: 500, Duration: billing.CouponOnce})
	// Keys in the reverse order of the instants, so that neither the
	// order of the calls nor of the keys is the answer's.
	made := []billing.Redemption{
		redeem(t, s, "u1", "a", "WELCOME20", "", couponT0.Add(3*time.Hour)),
		redeem(t, s, "u1", "c", "OTHER", "", couponT0.Add(time.Second)),
		redeem(t, s, "u1", "b", "WELCOME20", "", couponT0.Add(2*time.Hour+500*time.Millisecond)),
	}
	// Another user whose ID begins with u1's (on the single table, a
	// subscription of account u1), under a key of u1's: its own.
	redeem(t, s, "u1#sub#SKU", "a", "WELCOME20", "", couponT0)
	redeem(t, s, "u2", "e", "WELCOME20", "", couponT0)
	got := redemptionsOf(t, s, "u1")
	assert.Equal(t, []billing.Redemption{made[1], made[2], made[0]}, got, "oldest first, the user's only")
	assert.Len(t, redemptionsOf(t, s, "u1#sub#SKU"), 1)
	assert.Empty(t, redemptionsOf(t, s, "nobody"))
}

func couponConcurrent(t *testing.T, s billing.Coupons) {
	c := welcome()
	c.MaxRedemptions = 5
	putCoupon(t, s, c)
	const customers = 16
	var wg sync.WaitGroup
	errs := make([]error, customers)
	start := make(chan struct{})
	for i := range customers {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Redeem(t.Context(), billing.Redemption{UserID: fmt.Sprintf("user%02d", i), RequestKey: "signup",
				CouponID: c.ID, At: couponT0})
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			assert.Len(t, redemptionsOf(t, s, fmt.Sprintf("user%02d", i)), 1)
		case errors.Is(err, billing.ErrCouponNotRedeemable):
			assert.Empty(t, redemptionsOf(t, s, fmt.Sprintf("user%02d", i)), "a refused customer has no redemption")
		default:
			t.Errorf("customer %d: %v", i, err)
		}
	}
	assert.Equal(t, 5, won, "exactly the maximum succeed")
	requireCounts(t, s, c.ID, 5, "", 0)
}
