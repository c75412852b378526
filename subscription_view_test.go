package billing_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// viewShape is what a product page reads of a subscription: the fields
// TestSubscriptionViewTellsTheTruth asserts, all at once, dates as
// RFC 3339 text ("" for none) so that a difference reads as dates.
type viewShape struct {
	Status                               billing.SubscriptionStatus
	CancelAt                             string
	PauseAt                              string
	CurrentPeriodStart, CurrentPeriodEnd string
	TrialStart, TrialEnd                 string
	NextChargeDate                       string
	NextChargeAmount                     billing.Amount
	PaidThrough                          string
	Paid, Periods                        int
	PendingTier                          string
	PendingAmount                        billing.Amount
	FirstPaidAmount                      billing.Amount
}

func shapeOf(v billing.Subscription) viewShape {
	s := viewShape{
		Status: v.Status, CancelAt: day(v.CancelAt), PauseAt: day(v.PauseAt),
		CurrentPeriodStart: day(v.CurrentPeriodStart), CurrentPeriodEnd: day(v.CurrentPeriodEnd),
		TrialStart: day(v.TrialStart), TrialEnd: day(v.TrialEnd),
		NextChargeDate: day(v.NextChargeDate), NextChargeAmount: v.NextChargeAmount,
		PaidThrough: day(v.PaidThrough), Paid: len(v.Paid), Periods: len(v.Periods),
		PendingTier: v.PendingTier, PendingAmount: v.PendingAmount,
	}
	if len(v.Paid) > 0 {
		s.FirstPaidAmount = v.Paid[0].Amount
	}
	return s
}

// day is t as RFC 3339 text in UTC, "" for the zero time.
func day(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// TestSubscriptionViewTellsTheTruth (every layout, in memory and on the
// local DynamoDB server): the view misled a host that gates access on it.
// After a cancel at period end it said ENDED at once, though the user
// had paid to the period's end; a trialing user's next billing date was
// the trial's own start, a paused user's the date the pause skips; and
// Paid counted the $0 trial and free periods as payments. The status, the
// current period, the next charge (date and amount), PaidThrough and Paid
// now say what a product page shows, with exact dates and amounts.
func TestSubscriptionViewTellsTheTruth(t *testing.T) {
	t.Parallel()
	var (
		feb10 = feb3.AddDate(0, 0, 7)  // when most views are read
		feb13 = feb3.AddDate(0, 0, 10) // a cancellation now, 09:00
		feb17 = feb3.AddDate(0, 0, 14) // a 14-day trial's end
		feb20 = feb3.AddDate(0, 0, 17)
		mar3  = feb3.AddDate(0, 1, 0)
		mar10 = mar3.AddDate(0, 0, 7)
		mar17 = feb17.AddDate(0, 1, 0)
		apr3  = feb3.AddDate(0, 2, 0)
		may3  = feb3.AddDate(0, 3, 0)
	)
	trial := func(t *testing.T, e *freeEnv) {
		_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
		require.NoError(t, err)
	}
	cancel := func(t *testing.T, e *freeEnv, when billing.When) {
		_, err := e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "leave"), When: when})
		require.NoError(t, err)
	}
	pause := func(t *testing.T, e *freeEnv, months int) {
		_, err := e.c.Pause(t.Context(), billing.PauseRequest{UserRequest: ur(e.user, "pause"), Months: months})
		require.NoError(t, err)
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, e *freeEnv) // leaves the clock where the view is read
		want  viewShape
	}{
		{"cancel at period end, before its end", func(t *testing.T, e *freeEnv) {
			paidMonth(t, e)
			e.clock.Set(feb3.Add(2 * time.Hour))
			cancel(t, e, billing.CancelAtPeriodEnd)
			e.clock.Set(feb20)
		}, viewShape{Status: billing.SubscriptionActive, CancelAt: day(mar3), CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(mar3),
			PaidThrough: day(mar3), Paid: 1, Periods: 2, FirstPaidAmount: plusPrice}},

		{"cancel at period end, once it ended", func(t *testing.T, e *freeEnv) {
			paidMonth(t, e)
			e.clock.Set(feb3.Add(2 * time.Hour))
			cancel(t, e, billing.CancelAtPeriodEnd)
			e.clock.Set(mar3.Add(-time.Second))
			assert.Equal(t, billing.SubscriptionActive, mustView(t, e).Status, "the last second paid")
			e.runAt(t, mar3, billing.RunScheduled)
			require.Equal(t, 1, e.pay.CallCount(), "nothing charged again")
		}, viewShape{Status: billing.SubscriptionEnded, CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(mar3),
			PaidThrough: day(mar3), Paid: 1, Periods: 2, FirstPaidAmount: plusPrice}},

		{"trialing, its period not completed yet", trial,
			viewShape{Status: billing.SubscriptionTrialing, CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(feb17),
				TrialStart: day(feb3), TrialEnd: day(feb17), NextChargeDate: day(feb17), NextChargeAmount: plusPrice, Periods: 1}},

		{"trialing", func(t *testing.T, e *freeEnv) {
			trial(t, e)
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled) // completes the trial's $0 period
			e.clock.Set(feb10)
		}, viewShape{Status: billing.SubscriptionTrialing, CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(feb17),
			TrialStart: day(feb3), TrialEnd: day(feb17), NextChargeDate: day(feb17), NextChargeAmount: plusPrice,
			PaidThrough: day(feb17), Paid: 0, Periods: 2}},

		{"trial cancelled", func(t *testing.T, e *freeEnv) {
			trial(t, e)
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
			e.clock.Set(feb3.Add(2 * time.Hour))
			cancel(t, e, billing.CancelAtPeriodEnd)
			e.clock.Set(feb10)
		}, viewShape{Status: billing.SubscriptionTrialing, CancelAt: day(feb17), CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(feb17),
			TrialStart: day(feb3), TrialEnd: day(feb17), PaidThrough: day(feb17), Periods: 2}},

		{"first charge after the trial", func(t *testing.T, e *freeEnv) {
			trial(t, e)
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
			e.runAt(t, feb17.Add(time.Hour), billing.RunScheduled)
			require.Equal(t, 1, e.pay.CallCount())
			e.clock.Set(feb20)
		}, viewShape{Status: billing.SubscriptionActive, CurrentPeriodStart: day(feb17), CurrentPeriodEnd: day(mar17),
			TrialStart: day(feb3), TrialEnd: day(feb17), NextChargeDate: day(mar17), NextChargeAmount: plusPrice,
			PaidThrough: day(mar17), Paid: 1, Periods: 3, FirstPaidAmount: plusPrice}},

		{"paused during the trial", func(t *testing.T, e *freeEnv) {
			trial(t, e)
			e.clock.Set(feb3.Add(time.Minute))
			pause(t, e, 1)
			e.clock.Set(feb10)
		}, viewShape{Status: billing.SubscriptionPaused, CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(feb17),
			TrialStart: day(feb3), TrialEnd: day(feb17), NextChargeDate: day(mar17), NextChargeAmount: plusPrice, Periods: 1}},

		{"paused in a paid month: active until it ends", func(t *testing.T, e *freeEnv) {
			paidMonth(t, e)
			e.clock.Set(feb3.Add(2 * time.Hour))
			pause(t, e, 2)
			e.clock.Set(feb20)
		}, viewShape{Status: billing.SubscriptionActive, PauseAt: day(mar3), CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(mar3),
			NextChargeDate: day(may3), NextChargeAmount: plusPrice, PaidThrough: day(mar3), Paid: 1, Periods: 2, FirstPaidAmount: plusPrice}},

		{"paused, the paid month over", func(t *testing.T, e *freeEnv) {
			paidMonth(t, e)
			e.clock.Set(feb3.Add(2 * time.Hour))
			pause(t, e, 2)
			e.clock.Set(mar3)
		}, viewShape{Status: billing.SubscriptionPaused, CurrentPeriodStart: day(mar3), CurrentPeriodEnd: day(apr3),
			NextChargeDate: day(may3), NextChargeAmount: plusPrice, PaidThrough: day(mar3), Paid: 1, Periods: 2, FirstPaidAmount: plusPrice}},

		{"paused, a month skipped", func(t *testing.T, e *freeEnv) {
			paidMonth(t, e)
			e.clock.Set(feb3.Add(2 * time.Hour))
			pause(t, e, 2)
			e.runAt(t, mar3.Add(time.Hour), billing.RunPause)
			e.clock.Set(mar10)
		}, viewShape{Status: billing.SubscriptionPaused, CurrentPeriodStart: day(mar3), CurrentPeriodEnd: day(apr3),
			NextChargeDate: day(may3), NextChargeAmount: plusPrice, PaidThrough: day(mar3), Paid: 1, Periods: 3, FirstPaidAmount: plusPrice}},

		{"after a skipped month", func(t *testing.T, e *freeEnv) {
			paidMonth(t, e)
			e.clock.Set(feb3.Add(2 * time.Hour))
			pause(t, e, 1)
			e.runAt(t, mar3.Add(time.Hour), billing.RunPause)
			e.clock.Set(mar10)
		}, viewShape{Status: billing.SubscriptionActive, CurrentPeriodStart: day(mar3), CurrentPeriodEnd: day(apr3),
			NextChargeDate: day(apr3), NextChargeAmount: plusPrice, PaidThrough: day(mar3), Paid: 1, Periods: 3, FirstPaidAmount: plusPrice}},

		{"pending downgrade", func(t *testing.T, e *freeEnv) {
			paidMonth(t, e)
			e.clock.Set(feb3.Add(2 * time.Hour))
			_, err := e.c.ChangePlan(t.Context(), billing.ChangePlanRequest{UserRequest: ur(e.user, "down"), Tier: "Free:v1", When: billing.ChangeAtNextPeriod})
			require.NoError(t, err)
			e.clock.Set(feb20)
		}, viewShape{Status: billing.SubscriptionActive, CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(mar3),
			NextChargeDate: day(mar3), NextChargeAmount: plusPrice, PaidThrough: day(mar3), Paid: 1, Periods: 2,
			PendingTier: "Free:v1", FirstPaidAmount: plusPrice}},

		{"past due", func(t *testing.T, e *freeEnv) {
			e.pay.SetUser(e.user, billingtest.Succeeded(), billingtest.Declined("insufficient funds", true))
			paidMonth(t, e)
			e.runAt(t, mar3.Add(time.Hour), billing.RunScheduled)
			require.Equal(t, 2, e.pay.CallCount())
			e.clock.Set(mar10)
		}, viewShape{Status: billing.SubscriptionPastDue, CurrentPeriodStart: day(mar3), CurrentPeriodEnd: day(apr3),
			NextChargeDate: day(apr3), NextChargeAmount: plusPrice, PaidThrough: day(mar3), Paid: 1, Periods: 3, FirstPaidAmount: plusPrice}},

		{"ended by a cancel now", func(t *testing.T, e *freeEnv) {
			paidMonth(t, e)
			e.clock.Set(feb13)
			cancel(t, e, billing.CancelNow)
			e.clock.Set(feb13.Add(time.Hour))
		}, viewShape{Status: billing.SubscriptionEnded, CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(feb13),
			PaidThrough: day(feb13), Paid: 1, Periods: 2, FirstPaidAmount: plusPrice}},

		{"free plan", func(t *testing.T, e *freeEnv) {
			_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Free:v1"})
			require.NoError(t, err)
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled) // completes the $0 period
			e.clock.Set(feb10)
		}, viewShape{Status: billing.SubscriptionActive, CurrentPeriodStart: day(feb3), CurrentPeriodEnd: day(mar3),
			PaidThrough: day(mar3), Paid: 0, Periods: 2}},
	}
	for _, st := range userStores() {
		for _, tc := range cases {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := newFreeEnv(t, st, billingtest.ProviderOptions{})
				tc.setup(t, e)
				v := mustView(t, e)
				assert.Equal(t, tc.want, shapeOf(v))
				for _, p := range v.Paid {
					assert.Positive(t, p.Amount, "Paid holds charged periods only: %s", p.SubscriptionID)
				}
				assert.Equal(t, v.NextChargeDate.IsZero(), v.NextChargeAmount == 0,
					"a next charge has both a date and an amount, or neither")
			})
		}
	}
}
