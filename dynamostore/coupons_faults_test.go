package dynamostore_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/storetest"
)

// TestCouponsFaults checks a redemption against what the local server
// never does by itself, on both layouts: a transaction cancelled by a
// concurrent one (TransactionConflict) is tried again and counts once; a
// transaction made whose answer was lost is answered, when the caller
// repeats it, with the stored redemption, although it used the coupon
// up; a throttled one is an error that counts nothing.
func TestCouponsFaults(t *testing.T) {
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	for name, legacy := range map[string]bool{"Legacy": true, "SingleTable": false} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			client, newStore := storetest.CouponTables(t, legacy)
			s, w := newStore(t, client)
			require.NoError(t, s.PutCoupon(ctx, billing.Coupon{ID: "ONE", PercentOff: 1000, Duration: billing.CouponOnce, MaxRedemptions: 3}))
			require.NoError(t, s.PutPromotionCode(ctx, billing.PromotionCode{Code: "ONE", CouponID: "ONE"}))
			counts := func(want int64) {
				t.Helper()
				c, err := s.Coupon(ctx, "ONE")
				require.NoError(t, err)
				p, err := s.PromotionCode(ctx, "one")
				require.NoError(t, err)
				assert.Equal(t, [2]int64{want, want}, [2]int64{c.Redeemed, p.Redeemed}, "coupon and code counts")
			}

			// A conflict: tried again.
			conflict := &types.TransactionCanceledException{Message: aws.String("injected conflict"), CancellationReasons: []types.CancellationReason{
				{Code: aws.String("None")}, {Code: aws.String("TransactionConflict")}, {Code: aws.String("None")}}}
			w.Reset()
			w.FailNth("TransactWriteItems", 1, conflict)
			r1 := billing.Redemption{UserID: "u1", RequestKey: "k", CouponID: "ONE", Code: "ONE", At: at}
			got, err := s.Redeem(ctx, r1)
			require.NoError(t, err)
			assert.Equal(t, r1, got)
			assert.Equal(t, 2, w.Calls("TransactWriteItems"), "the cancelled transaction and the one that counted")
			assert.Equal(t, 1, w.Calls("BatchGetItem"), "one read explained the cancellation")
			counts(1)

			// The answer lost after the write, on the redemption that uses
			// the coupon up: the caller's repeat is the stored redemption.
			r2 := billing.Redemption{UserID: "u2", RequestKey: "k", CouponID: "ONE", Code: "ONE", At: at}
			require.NoError(t, s.PutCoupon(ctx, billing.Coupon{ID: "ONE", PercentOff: 1000, Duration: billing.CouponOnce, MaxRedemptions: 2}))
			w.FailAfterInner("TransactWriteItems", 1, nil)
			_, err = s.Redeem(ctx, r2)
			require.Error(t, err)
			counts(2)
			again := r2
			again.At = at.Add(time.Minute)
			got, err = s.Redeem(ctx, again)
			require.NoError(t, err, "a repeat of a redemption made is no redemption past the maximum")
			assert.Equal(t, r2, got, "the stored redemption")
			counts(2)
			rs, err := s.Redemptions(ctx, "u2")
			require.NoError(t, err)
			assert.Equal(t, []billing.Redemption{r2}, rs)

			// Throttled: an error that is no refusal, and nothing counted.
			require.NoError(t, s.PutCoupon(ctx, billing.Coupon{ID: "ONE", PercentOff: 1000, Duration: billing.CouponOnce}))
			w.Throttle("TransactWriteItems", 1)
			r3 := billing.Redemption{UserID: "u3", RequestKey: "k", CouponID: "ONE", Code: "ONE", At: at}
			_, err = s.Redeem(ctx, r3)
			require.Error(t, err)
			assert.NotErrorIs(t, err, billing.ErrCouponNotRedeemable)
			counts(2)
			_, err = s.Redeem(ctx, r3)
			require.NoError(t, err, "the caller's retry")
			counts(3)
		})
	}
}

// TestCouponsCost measures what the coupon store's calls cost without
// contention, on the single table: the puts, a redemption by ID and with
// a code, and the two-call paths (a refusal, a repeat).
func TestCouponsCost(t *testing.T) {
	client, newStore := storetest.CouponTables(t, false)
	s, w := newStore(t, client)
	ctx := t.Context()
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	measure := func(name string, calls int, wcu float64, fn func()) {
		t.Helper()
		w.Reset()
		fn()
		t.Logf("%s: %d calls, %.1f WCU, %.1f RCU", name, w.TotalCalls(), w.WriteCapacity(), w.ReadCapacity())
		assert.Equal(t, calls, w.TotalCalls(), name)
		assert.Equal(t, wcu, w.WriteCapacity(), name)
	}
	measure("put coupon", 1, 1, func() {
		require.NoError(t, s.PutCoupon(ctx, billing.Coupon{ID: "TWO", PercentOff: 1000, Duration: billing.CouponOnce, MaxRedemptions: 2}))
	})
	measure("put promotion code", 1, 4, func() { // the coupon's check is a write in a transaction
		require.NoError(t, s.PutPromotionCode(ctx, billing.PromotionCode{Code: "TWO", CouponID: "TWO"}))
	})
	measure("redeem by ID", 1, 4, func() {
		_, err := s.Redeem(ctx, billing.Redemption{UserID: "u1", RequestKey: "k", CouponID: "TWO", At: at})
		require.NoError(t, err)
	})
	measure("redeem with a code", 1, 6, func() {
		_, err := s.Redeem(ctx, billing.Redemption{UserID: "u2", RequestKey: "k", CouponID: "TWO", Code: "two", At: at})
		require.NoError(t, err)
	})
	measure("refused (used up)", 2, 0, func() {
		_, err := s.Redeem(ctx, billing.Redemption{UserID: "u3", RequestKey: "k", CouponID: "TWO", At: at})
		require.ErrorIs(t, err, billing.ErrCouponNotRedeemable)
	})
	measure("repeat", 2, 0, func() {
		_, err := s.Redeem(ctx, billing.Redemption{UserID: "u1", RequestKey: "k", CouponID: "TWO", At: at})
		require.NoError(t, err)
	})
}
