package dynamostore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/storetest"
)

// TestCouponsContention has 8 redeemers, each with a store value (and
// client) of its own as 8 servers would, redeem one coupon without a
// maximum for n customers at once, by its ID and then through a
// promotion code. Every redemption must count once: the coupon's (and
// the code's) count is n, and each customer has its redemption. It
// reports the calls and WCU per redemption. The test command redeems 24
// times; the long step 200.
func TestCouponsContention(t *testing.T) {
	n := 24
	if dynamotest.LongTests() {
		n = 200
	}
	const redeemers = 8
	for _, layout := range []struct {
		name   string
		legacy bool
	}{{"SingleTable", false}, {"Legacy", true}} {
		for _, code := range []string{"", "LAUNCH"} {
			name := layout.name + map[bool]string{true: "/ByID", false: "/WithCode"}[code == ""]
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				client, newStore := storetest.CouponTables(t, layout.legacy)
				seed, _ := newStore(t, client)
				require.NoError(t, seed.PutCoupon(ctx, billing.Coupon{ID: "LAUNCH20", PercentOff: 2000, Duration: billing.CouponForever}))
				if code != "" {
					require.NoError(t, seed.PutPromotionCode(ctx, billing.PromotionCode{Code: code, CouponID: "LAUNCH20"}))
				}
				var wg sync.WaitGroup
				errs := make([]error, redeemers)
				calls, wcu := 0, 0.0
				var mu sync.Mutex
				start := time.Now()
				for g := range redeemers {
					s, w := newStore(t, client)
					wg.Go(func() {
						for i := g; i < n; i += redeemers {
							_, err := s.Redeem(ctx, billing.Redemption{UserID: fmt.Sprintf("cust%04d", i), RequestKey: "signup",
								CouponID: "LAUNCH20", Code: code, At: time.Now()})
							if err != nil {
								errs[g] = err
								return
							}
						}
						mu.Lock()
						calls, wcu = calls+w.TotalCalls(), wcu+w.WriteCapacity()
						mu.Unlock()
					})
				}
				wg.Wait()
				for _, err := range errs {
					require.NoError(t, err)
				}
				took := time.Since(start)
				c, err := seed.Coupon(ctx, "LAUNCH20")
				require.NoError(t, err)
				assert.Equal(t, int64(n), c.Redeemed, "every redemption counted once")
				if code != "" {
					p, err := seed.PromotionCode(ctx, code)
					require.NoError(t, err)
					assert.Equal(t, int64(n), p.Redeemed, "the code's count too")
				}
				for i := range n {
					rs, err := seed.Redemptions(ctx, fmt.Sprintf("cust%04d", i))
					require.NoError(t, err)
					assert.Len(t, rs, 1, "customer %d", i)
				}
				t.Logf("%d redemptions by %d redeemers in %v (%.0f/s on the local server): %.2f calls, %.2f WCU each",
					n, redeemers, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(calls)/float64(n), wcu/float64(n))
			})
		}
	}
}
