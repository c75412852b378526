package main

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

// chargeUsers returns ACTIVE users of the sample data on the monthly Basic
// plan, owing nothing, with their one open period SCHEDULED and a paid
// period running now (a plan change now is prorated), and every other
// period paid: none declined or waived, whose customers other tests pick
// (errorUsers, invoicedUser).
func chargeUsers(t *testing.T, d *demo) []billing.Subscription {
	t.Helper()
	ctx := context.Background()
	now := d.clock.Now()
	var out []billing.Subscription
	for _, u := range d.result.Users {
		v, err := d.collector.Subscription(ctx, u.ID)
		require.NoError(t, err)
		if v.Status == billing.SubscriptionActive && v.Tier == "Basic:v1" && v.Term == billing.TermMonthly &&
			len(v.Open) == 1 && v.Open[0].Status == billing.StatusScheduled && len(v.InFlight) == 0 &&
			v.PaidThrough.After(now) && !v.CurrentPeriodStart.After(now) && len(v.Paid) == len(v.Periods)-1 {
			out = append(out, v)
		}
	}
	require.GreaterOrEqual(t, len(out), 2, "monthly Basic users in a paid month")
	return out
}

// TestBrowserCustomerNextCharge: a sample customer upgraded from Basic to
// Plus during a paid month, with a coupon of 20 % for two charges, is
// shown the next charge's parts in the browser: the plan, the coupon and
// what it takes off, both proration lines (the credit negative), and the
// total the engine will charge; another customer, on the plan alone, has
// no balance and no such table.
func TestBrowserCustomerNextCharge(t *testing.T) {
	d := sharedDemo(t)
	base := serve(t, d, "operator")
	ctx := browser(t)
	bg := context.Background()
	users := chargeUsers(t, d)
	user, plain := users[0].UserID, users[1].UserID
	require.NoError(t, d.coupons.PutCoupon(bg, billing.Coupon{ID: "DEMO20", PercentOff: 2000, Duration: billing.CouponRepeating, Periods: 2}))
	ur := func(key string) billing.UserRequest { return billing.UserRequest{UserID: user, RequestKey: key} }
	ch, err := d.collector.ChangePlan(bg, billing.ChangePlanRequest{UserRequest: ur("browser-upgrade"), Tier: "Plus:v2"})
	require.NoError(t, err)
	require.Len(t, ch.Adjustments, 2, "a credit and a charge")
	_, err = d.collector.ApplyCoupon(bg, billing.ApplyCouponRequest{UserRequest: ur("browser-coupon"), CouponID: "DEMO20"})
	require.NoError(t, err)
	view, err := d.collector.Subscription(bg, user)
	require.NoError(t, err)

	do(t, ctx, chromedp.Navigate(customerURL(base, user)), visible("#next-charge"))
	require.Equal(t, "none", text(t, ctx, "#balance"))
	require.Equal(t, "Plan Plus:v2", text(t, ctx, "#next-charge tr.plan td"))
	require.Equal(t, 1, count(t, ctx, "#next-charge tr.discount"))
	require.Equal(t, "DEMO20", text(t, ctx, "#next-charge tr.discount td.name"))
	require.Equal(t, "20% off", text(t, ctx, "#next-charge tr.discount .terms"))
	require.Equal(t, "this and 1 more charge", text(t, ctx, "#next-charge tr.discount .lasts"))
	require.Equal(t, "-$2.00", text(t, ctx, "#next-charge tr.discount td.num"), "20 % of $9.99")
	require.Equal(t, 2, count(t, ctx, "#next-charge tr.proration"))
	for _, a := range ch.Adjustments {
		sel := "#next-charge tr.proration:not(.credit) td.num"
		want := "$" + a.Amount.String()
		if a.Credit {
			sel, want = "#next-charge tr.proration.credit td.num", "-$"+a.Amount.String()
		}
		require.Equal(t, want, text(t, ctx, sel), a.Description)
	}
	require.Zero(t, count(t, ctx, "#next-charge tr.balance"))
	require.Equal(t, "$"+view.NextChargeAmount.String(), text(t, ctx, "#due"))

	do(t, ctx, chromedp.Navigate(customerURL(base, plain)), visible("#periods"))
	require.Equal(t, "none", text(t, ctx, "#balance"))
	require.Zero(t, count(t, ctx, "#next-charge"))
}
