package billing_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusalsNameTheFix: a plan change, a pause and a resume the
// subscription does not take are refused with a sentinel of their own
// (ErrPlanChangeRefused, ErrPauseRefused, ErrResumeRefused) that still
// matches the sentinel callers matched before (ErrNotCollectible for a
// status, ErrAttemptInFlight for a payment of unknown outcome), write
// nothing, and say in the message, beside the user or period, what to do.
func TestRefusalsNameTheFix(t *testing.T) {
	t.Parallel()
	type setup func(t *testing.T, e *userEnv)
	paid := func(t *testing.T, e *userEnv) { e.subscribeAndPay(t) }
	paused := func(t *testing.T, e *userEnv) {
		e.subscribeAndPay(t)
		_, err := e.c.Pause(t.Context(), billing.PauseRequest{UserRequest: ur(e.user, "pause-1"), Months: 2})
		require.NoError(t, err)
	}
	ended := func(t *testing.T, e *userEnv) {
		e.subscribeAndPay(t)
		_, err := e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "cancel-1")})
		require.NoError(t, err)
	}
	// firstAttempt subscribes and collects the first period with step.
	firstAttempt := func(step billingtest.Step) setup {
		return func(t *testing.T, e *userEnv) {
			sub, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2"})
			require.NoError(t, err)
			e.pay.SetAttempt(sub.Subscription.SubscriptionID, 1, step)
			e.clock.Advance(time.Hour)
			_, _ = e.c.CollectUser(t.Context(), e.user, billing.ProcessWebhook)
		}
	}
	owed := firstAttempt(billingtest.Declined("NSF", true))
	achSent := firstAttempt(billingtest.Pending())
	inFlight := func(t *testing.T, e *userEnv) {
		firstAttempt(billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil))(t, e)
		e.pay.SetUnreachable(true)
	}
	changePlan := func(ctx context.Context, e *userEnv) error {
		_, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "plan-2"), Tier: "Pro:v1"})
		return err
	}
	pause := func(ctx context.Context, e *userEnv) error {
		_, err := e.c.Pause(ctx, billing.PauseRequest{UserRequest: ur(e.user, "pause-2"), Months: 3})
		return err
	}
	resume := func(ctx context.Context, e *userEnv) error {
		_, err := e.c.Resume(ctx, billing.ResumeRequest{UserRequest: ur(e.user, "resume-2")})
		return err
	}
	// onPeriod calls a period call on the user's open period.
	onPeriod := func(call func(ctx context.Context, p *billing.Periods, id string) error) func(ctx context.Context, e *userEnv) error {
		return func(ctx context.Context, e *userEnv) error {
			v, err := e.c.Subscription(ctx, e.user)
			if err != nil {
				return err
			}
			return call(ctx, e.c.Periods(), v.Open[0].SubscriptionID)
		}
	}

	for _, tc := range []struct {
		name  string
		setup setup
		call  func(ctx context.Context, e *userEnv) error
		want  error // the change's own sentinel
		also  error // the sentinel it matched before
		fix   string
		// byPeriod: a period call, whose message names the period, not the user.
		byPeriod bool
	}{
		{"plan change while paused", paused, changePlan, billing.ErrPlanChangeRefused, billing.ErrNotCollectible,
			"the subscription is paused: resume it first (Collector.Resume)", false},
		{"plan change once ended", ended, changePlan, billing.ErrPlanChangeRefused, billing.ErrNotCollectible,
			"the subscription has ended: subscribe again (Collector.Subscribe)", false},
		{"plan change with a payment in flight", inFlight, changePlan, billing.ErrPlanChangeRefused, billing.ErrAttemptInFlight,
			"no known outcome yet: try again once the processor answers", false},
		{"plan change of a paused period", paused, onPeriod(func(ctx context.Context, p *billing.Periods, id string) error {
			_, err := p.ChangeTier(ctx, id, "Pro:v1", billing.ListPrice, false)
			return err
		}), billing.ErrPlanChangeRefused, billing.ErrNotCollectible, "it is paused: resume it first (Collector.Resume, or Periods.Resume for this period)", true},
		{"pause while owed", owed, pause, billing.ErrPauseRefused, billing.ErrNotCollectible,
			"record is ERROR, want one of [SCHEDULED PAUSED]: its charge was declined and is owed: collect it (Periods.Repay) or waive it (Periods.Waive) first", false},
		{"pause while a bank debit settles", achSent, pause, billing.ErrPauseRefused, billing.ErrNotCollectible,
			"record is ACHSENT, want one of [SCHEDULED PAUSED]: its bank debit awaits settlement: try again once it settles", false},
		{"pause once ended", ended, pause, billing.ErrPauseRefused, billing.ErrNotCollectible,
			"the subscription has ended: subscribe again (Collector.Subscribe)", false},
		{"pause with a payment in flight", inFlight, pause, billing.ErrPauseRefused, billing.ErrAttemptInFlight,
			"no known outcome yet: try again once the processor answers", false},
		{"resume when not paused", paid, resume, billing.ErrResumeRefused, billing.ErrNotCollectible,
			"(open: SCHEDULED): the subscription is not paused: nothing to resume", false},
		{"resume once ended", ended, resume, billing.ErrResumeRefused, billing.ErrNotCollectible,
			"the subscription has ended: subscribe again (Collector.Subscribe)", false},
		{"resume of a period not paused", paid, onPeriod(func(ctx context.Context, p *billing.Periods, id string) error {
			_, err := p.Resume(ctx, id)
			return err
		}), billing.ErrResumeRefused, billing.ErrNotCollectible, "record is SCHEDULED, want one of [PAUSED]: it is not paused: nothing to resume", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, st := range memoryUserStores() {
				t.Run(st.name, func(t *testing.T) {
					e := newUserEnv(t, st)
					ctx := t.Context()
					tc.setup(t, e)
					before := periodStates(t, e)
					id := e.user
					if tc.byPeriod {
						v, err := e.c.Subscription(ctx, e.user)
						require.NoError(t, err)
						id = v.Open[0].SubscriptionID
					}
					rows := len(e.rows(t))
					charges := len(e.pay.Charges())

					err := tc.call(ctx, e)
					require.Error(t, err)
					assert.ErrorIs(t, err, tc.want)
					assert.ErrorIs(t, err, tc.also, "the sentinel callers matched before")
					for _, other := range []error{billing.ErrPlanChangeRefused, billing.ErrPauseRefused, billing.ErrResumeRefused} {
						if other != tc.want {
							assert.NotErrorIs(t, err, other)
						}
					}
					if tc.also == billing.ErrAttemptInFlight {
						// billinghttp and billingui answer "outcome unknown", not "not collectible".
						assert.NotErrorIs(t, err, billing.ErrNotCollectible)
						var ife *billing.InFlightError
						assert.ErrorAs(t, err, &ife)
					}
					assert.Contains(t, err.Error(), tc.fix)
					assert.Contains(t, err.Error(), id)

					assert.Equal(t, before, periodStates(t, e), "a refusal changed no period")
					assert.Len(t, e.rows(t), rows, "no history row")
					assert.Len(t, e.pay.Charges(), charges, "no charge")
				})
			}
		})
	}
}

// periodStates is what a change by user may change of each of e's user's
// periods: its ID, status, plan, amount and pause.
func periodStates(t *testing.T, e *userEnv) []string {
	t.Helper()
	recs, err := e.repo.ListByUser(t.Context(), e.user)
	require.NoError(t, err)
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%s %s %s %s %s pending=%s/%s pause=%d", r.SubscriptionID, r.BillingDate.Format(time.RFC3339),
			r.Status, r.ReceiptTierName, r.Amount, r.PendingTierName, r.PendingAmount, r.PauseDurationMonths))
	}
	return out
}

// TestFreeTierRefusalNamesAllowFreeTiers: a zero amount refused because
// free tiers are off says which Config field allows them, on a subscribe
// and on a plan change; with AllowFreeTiers the same plan change is taken.
func TestFreeTierRefusalNamesAllowFreeTiers(t *testing.T) {
	t.Parallel()
	const fix = "must be more than zero: set Config.AllowFreeTiers to allow a free tier at zero"
	for _, allow := range []bool{false, true} {
		e := newUserEnv(t, memoryUserStores()[0])
		ctx := t.Context()
		e.subscribeAndPay(t)
		c, err := billing.NewCollector(billing.Config{Repository: e.repo, History: e.hist, Locker: billingtest.NewLocker(e.clock, time.Minute),
			Provider: e.pay, Clock: e.clock, AllowFreeTiers: allow})
		require.NoError(t, err)

		_, err = c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "free-1"), Tier: "Free:v1", Amount: billing.MustParseAmount("0")})
		_, serr := c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-9", UserID: "u9", Tier: "Free:v1", Amount: billing.MustParseAmount("0")})
		if allow {
			require.NoError(t, err)
			require.NoError(t, serr)
			continue
		}
		for _, err := range []error{err, serr} {
			require.ErrorIs(t, err, billing.ErrInvalidAmount)
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "amount", fe.Field)
			assert.Contains(t, err.Error(), fix)
		}
		assert.True(t, errors.Is(err, billing.ErrInvalidAmount))
		v, verr := c.Subscription(ctx, e.user)
		require.NoError(t, verr)
		assert.Equal(t, "Plus:v2", v.Tier, "the refused change wrote nothing")
	}
}
