package billingui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// couponEnv is newEnv with a coupon store in the collector and a price
// list of two plans, Plus:v2 at $9.99 and Basic:v1 at $1.00.
func couponEnv(t *testing.T, open func(*testing.T, billing.Clock) (billing.Repository, billing.History), user string) (*env, *memory.Coupons) {
	t.Helper()
	coupons := memory.NewCoupons()
	e := newEnv(t, open, user, func(c *billing.Config) {
		c.Coupons = coupons
		c.Prices = billing.PriceListMap{"Plus:v2": billing.MustParseAmount("9.99"), "Basic:v1": billing.MustParseAmount("1.00")}
	})
	return e, coupons
}

// nextChargeRows returns the rows of the customer page's next charge
// table, one string each, or nil when the page has no such table.
func nextChargeRows(body string) []string {
	i := strings.Index(body, `<table id="next-charge"`)
	if i < 0 {
		return nil
	}
	table := body[i:]
	table = table[:strings.Index(table, "</table>")]
	var rows []string
	for _, r := range strings.Split(table, "<tr")[2:] { // past the table's tag and its header
		rows = append(rows, "<tr"+strings.TrimRight(r, " \n"))
	}
	return rows
}

// TestCustomerShowsBalanceDiscountsAndProration: a customer who downgraded
// during a paid month (the credit for its unused time larger than the next
// charge: the rest went to the balance), then upgraded during the next
// month and applied a coupon, is shown the balance, the coupon with what it
// takes off and for how long, both proration lines (the credit negative),
// the balance the charge uses and the charge itself, which is what the
// engine will charge (Subscription.NextChargeAmount).
func TestCustomerShowsBalanceDiscountsAndProration(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			ctx := context.Background()
			e, coupons := couponEnv(t, l.open, l.user)
			require.NoError(t, coupons.PutCoupon(ctx, billing.Coupon{ID: "SPRING25", PercentOff: 2500, Duration: billing.CouponRepeating, Periods: 3}))
			ur := func(key string) billing.UserRequest { return billing.UserRequest{UserID: e.other, RequestKey: key} }

			// Paid Plus on 2025-03-02 04:00 for the month; down to Basic on
			// 2025-03-03 09:00: a $9.60 credit and a $0.96 charge on the
			// April charge of $1.00, which is then nothing, $7.64 left.
			_, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur("down"), Tier: "Basic:v1"})
			require.NoError(t, err)
			april := e.only(t, e.other, billing.StatusScheduled)
			e.clock.Set(april.BillingDate.Add(time.Hour))
			_, err = e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
			require.NoError(t, err)
			// Back to Plus halfway through April (a 30-day period), and a
			// coupon of 25 % for three charges.
			e.clock.Set(april.BillingDate.Add(15 * 24 * time.Hour))
			_, err = e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur("up"), Tier: "Plus:v2"})
			require.NoError(t, err)
			_, err = e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur("coupon"), CouponID: "SPRING25"})
			require.NoError(t, err)
			may := e.only(t, e.other, billing.StatusScheduled)
			view, err := e.c.Subscription(ctx, e.other)
			require.NoError(t, err)
			require.Equal(t, billing.MustParseAmount("4.35"), view.NextChargeAmount)

			page := e.as(t, "operator").get("/customer?user=" + url.QueryEscape(e.other))
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.Contains(t, page.body, `<b id="balance">$7.64</b>`)
			assert.Contains(t, page.body, `<table id="next-charge" data-period="`+may.SubscriptionID+`">`)
			assert.Equal(t, []string{
				`<tr class="plan"><td>Plan Plus:v2</td><td></td><td class="num">$9.99</td></tr>`,
				// 25 % of $9.99 is $2.4975: $2.50.
				`<tr class="discount"><td class="name">SPRING25</td><td><span class="terms">25% off</span>, <span class="lasts">this and 2 more charges</span></td><td class="num">-$2.50</td></tr>`,
				`<tr class="proration credit"><td class="name">Unused time on Basic</td><td class="muted">2025-04-17 → 2025-05-02</td><td class="num">-$0.50</td></tr>`,
				`<tr class="proration"><td class="name">Remaining time on Plus</td><td class="muted">2025-04-17 → 2025-05-02</td><td class="num">$5.00</td></tr>`,
				`<tr class="balance"><td>Balance applied</td><td class="muted">$0.00 left after</td><td class="num">-$7.64</td></tr>`,
				// $9.99 − $2.50 − $0.50 + $5.00 − $7.64.
				`<tr class="due"><td><b>Due</b></td><td></td><td class="num"><b id="due">$4.35</b></td></tr>`,
			}, nextChargeRows(page.body))

			// The customer who declined has none of it: no balance, no
			// next charge table.
			page = e.as(t, "operator").get("/customer?user=" + url.QueryEscape(e.user))
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.Contains(t, page.body, `<b id="balance">none</b>`)
			assert.NotContains(t, page.body, `id="next-charge`)
			assert.Nil(t, nextChargeRows(page.body))
		})
	}
}

// TestCustomerShowsDiscountsInOrder: two coupons on a first charge, one
// applied by a promotion code the customer typed in lower case (shown as
// the code, with its amount off, for ever), then a percent of what the
// first left, once; the charge is their result. Paused, the page still
// lists the coupons but no total: the charge is made when the pause ends.
func TestCustomerShowsDiscountsInOrder(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			ctx := context.Background()
			e, coupons := couponEnv(t, l.open, l.user)
			require.NoError(t, coupons.PutCoupon(ctx, billing.Coupon{ID: "FLAT3", AmountOff: billing.MustParseAmount("3.00"), Duration: billing.CouponForever}))
			require.NoError(t, coupons.PutPromotionCode(ctx, billing.PromotionCode{Code: "WELCOME", CouponID: "FLAT3"}))
			require.NoError(t, coupons.PutCoupon(ctx, billing.Coupon{ID: "HALF", PercentOff: 5000, Duration: billing.CouponOnce}))
			user := strings.Replace(e.user, "1", "3", 1)
			_, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-3", UserID: user, Tier: "Plus:v2",
				FirstBillingDate: e.clock.Now().AddDate(0, 0, 7)})
			require.NoError(t, err)
			ur := func(key string) billing.UserRequest { return billing.UserRequest{UserID: user, RequestKey: key} }
			_, err = e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur("code"), Code: "welcome"})
			require.NoError(t, err)
			_, err = e.c.ApplyCoupon(ctx, billing.ApplyCouponRequest{UserRequest: ur("half"), CouponID: "HALF"})
			require.NoError(t, err)
			view, err := e.c.Subscription(ctx, user)
			require.NoError(t, err)
			require.Equal(t, billing.MustParseAmount("3.49"), view.NextChargeAmount)

			page := e.as(t, "operator").get("/customer?user=" + url.QueryEscape(user))
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.Contains(t, page.body, `<b id="balance">none</b>`)
			discounts := []string{
				`<tr class="plan"><td>Plan Plus:v2</td><td></td><td class="num">$9.99</td></tr>`,
				`<tr class="discount"><td class="name">WELCOME</td><td><span class="terms">$3.00 off</span>, <span class="lasts">for ever</span></td><td class="num">-$3.00</td></tr>`,
				// Half of the $6.99 left, $3.495, rounded half to even.
				`<tr class="discount"><td class="name">HALF</td><td><span class="terms">50% off</span>, <span class="lasts">this charge only</span></td><td class="num">-$3.50</td></tr>`,
			}
			assert.Equal(t, append(discounts,
				`<tr class="due"><td><b>Due</b></td><td></td><td class="num"><b id="due">$3.49</b></td></tr>`),
				nextChargeRows(page.body))

			_, err = e.c.Pause(ctx, billing.PauseRequest{UserRequest: ur("pause"), Months: 1})
			require.NoError(t, err)
			page = e.as(t, "operator").get("/customer?user=" + url.QueryEscape(user))
			require.Equal(t, http.StatusOK, page.code, page.body)
			assert.Equal(t, append(discounts,
				`<tr class="unpriced"><td colspan="3" class="muted">The charge is made when the pause or the trial ends, on these lines and the balance then.</td></tr>`),
				nextChargeRows(page.body))
			assert.NotContains(t, page.body, `id="due"`)
		})
	}
}

// TestCustomerShowsAnOwedOneOffCharge: an upgrade charged at once
// (ProrateNow) whose charge was declined is owed: its row says what it is
// and charges its difference (not the zero of its plan amount), and the
// owed total counts it.
func TestCustomerShowsAnOwedOneOffCharge(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, l.open, l.user, func(c *billing.Config) {
				c.Prices = billing.PriceListMap{"Plus:v2": billing.MustParseAmount("9.99"), "Pro:v1": billing.MustParseAmount("19.99")}
			})
			id := billing.OneOffChargeID(e.other, "up")
			e.pay.SetAttempt(id, 1, billingtest.Declined("insufficient funds", true))
			// Paid Plus on 2025-03-02 04:00 for the month; Pro from the
			// middle of it, the difference charged at once and declined.
			april := e.only(t, e.other, billing.StatusScheduled)
			e.clock.Set(april.BillingDate.Add(-15 * 24 * time.Hour))
			ch, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: billing.UserRequest{UserID: e.other, RequestKey: "up"},
				Tier: "Pro:v1", Proration: billing.ProrateNow})
			require.NoError(t, err)
			require.NotNil(t, ch.Charge)
			require.Equal(t, billing.StatusError, ch.Charge.Status)
			due, _, _ := ch.Charge.Due()
			require.Positive(t, due)

			page := e.as(t, "operator").get("/customer?user=" + url.QueryEscape(e.other))
			require.Equal(t, http.StatusOK, page.code, page.body)
			i := strings.Index(page.body, `<tr id="p-`+id+`"`)
			require.GreaterOrEqual(t, i, 0, page.body)
			row := page.body[i : i+strings.Index(page.body[i:], "</tr>")]
			assert.Contains(t, row, `<span class="muted one-off">one-off: plan change</span>`)
			assert.Contains(t, row, `<td class="num">$`+due.String()+`</td>`)
			assert.Contains(t, page.body, `<b id="owed">$`+due.String()+`</b>`)
		})
	}
}
