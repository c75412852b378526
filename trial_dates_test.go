package billing_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/preview"
)

// runDay runs the day's scheduled and pause runs at at, as a host's
// schedule does.
func (e *freeEnv) runDay(t *testing.T, at time.Time) {
	t.Helper()
	e.runAt(t, at, billing.RunScheduled)
	e.runAt(t, at.Add(10*time.Minute), billing.RunPause)
}

// TestPauseDuringTrialPushesFirstCharge (every layout, in memory and on
// the local DynamoDB server): a pause of N months asked during a trial,
// before its period was completed, used to be lost at the trial's end:
// the pause run skipped the trial period as the pause's first month and
// opened the first paid period on the trial's end, so with one month it
// was charged on the trial's end, inside the pause, and with N months one
// month early. The pause pushes the first charge by N months from the
// trial's end: nothing is charged before, the charge comes on that date,
// and the view says PAUSED meanwhile.
func TestPauseDuringTrialPushesFirstCharge(t *testing.T) {
	t.Parallel()
	end := feb3.AddDate(0, 0, 14)
	for _, st := range userStores() {
		for _, months := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d", st.name, months), func(t *testing.T) {
				t.Parallel()
				e := newTrialEnv(t, st)
				_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
				require.NoError(t, err)
				e.clock.Advance(time.Minute)
				_, err = e.c.Pause(t.Context(), billing.PauseRequest{UserRequest: ur(e.user, "p1"), Months: months})
				require.NoError(t, err)
				v, err := e.c.Subscription(t.Context(), e.user)
				require.NoError(t, err)
				assert.Equal(t, billing.SubscriptionPaused, v.Status)
				pushed := end.AddDate(0, months, 0)
				require.Len(t, v.Open, 1)
				resume, err := (&v.Open[0]).ResumeDate()
				require.NoError(t, err)
				assert.Equal(t, pushed, resume, "the resume date a host shows")

				days := []time.Time{feb3.Add(time.Hour), end.Add(-time.Hour), end.Add(time.Hour)}
				for k := 1; k <= months; k++ {
					days = append(days, end.AddDate(0, k, 0).Add(-24*time.Hour))
				}
				for _, d := range days {
					e.runDay(t, d)
					require.Zero(t, e.pay.CallCount(), "charged on %s, before the pause ends on %s", d, pushed)
					v, err := e.c.Subscription(t.Context(), e.user)
					require.NoError(t, err)
					// PAUSED while a month of the pause is to be skipped;
					// once its last month is, the period it resumes on is
					// open (as after any pause): billed on the pushed date.
					if d.Before(end) {
						assert.Equal(t, billing.SubscriptionPaused, v.Status, "on %s", d)
					}
					if v.Status != billing.SubscriptionPaused {
						assert.Equal(t, billing.SubscriptionActive, v.Status, "on %s", d)
						assert.Equal(t, pushed, v.NextBillingDate, "on %s", d)
					}
				}
				open := e.latest(t)
				assert.Equal(t, billing.StatusScheduled, open.Status)
				assert.Equal(t, pushed, open.BillingDate, "the first charge is pushed by the pause")
				e.runDay(t, pushed.Add(time.Hour))
				calls := e.pay.Calls()
				require.Len(t, calls, 1)
				assert.Equal(t, plusPrice, calls[0].Request.Amount)
				paid := e.latestPaid(t)
				assert.Equal(t, pushed, paid.BillingDate)
				v, err = e.c.Subscription(t.Context(), e.user)
				require.NoError(t, err)
				assert.Equal(t, billing.SubscriptionActive, v.Status)
				assert.Equal(t, pushed.AddDate(0, 1, 0), v.PaidThrough)
			})
		}
	}
}

// TestDateMoveDuringTrialKeepsTrialLength (every layout): moving the
// date of a trial not started yet (its period not completed) used to set
// the anchor day to the new date's day while the first paid period still
// opened on the trial's end: a subscription moved to the 4th was billed on
// the trial's end (the 19th) and again on the 4th, a 15-day period at a
// full month's price. A date move of a trial moves the whole trial: its
// end moves as far as its start, and the anchor day follows the new end,
// as [billing.Collector.ExtendTrial] keeps it; every paid period is a full
// month. Both the by-user move and the operator's ChangeBillingDate.
func TestDateMoveDuringTrialKeepsTrialLength(t *testing.T) {
	t.Parallel()
	start := feb3.AddDate(0, 0, 2) // the 5th: the trial ends on the 19th
	for _, st := range userStores() {
		for _, tc := range []struct {
			name string
			to   time.Time
		}{{"earlier", start.AddDate(0, 0, -1)}, {"later", start.AddDate(0, 1, -1)}} {
			for _, byUser := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/byuser=%v", st.name, tc.name, byUser), func(t *testing.T) {
					t.Parallel()
					e := newTrialEnv(t, st)
					sub, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2",
						FirstBillingDate: start, TrialDays: 14})
					require.NoError(t, err)
					e.clock.Advance(time.Minute)
					if byUser {
						_, err = e.c.MoveBillingDate(t.Context(), billing.MoveBillingDateRequest{UserRequest: ur(e.user, "m1"), Date: tc.to})
					} else {
						_, err = e.c.Periods().Move(t.Context(), sub.Subscription.SubscriptionID, tc.to)
					}
					require.NoError(t, err)
					trial := e.latest(t)
					newEnd := tc.to.AddDate(0, 0, 14)
					assert.Equal(t, tc.to, trial.BillingDate)
					assert.Equal(t, newEnd, trial.TrialEnd, "the trial keeps its length")
					assert.Equal(t, newEnd.Day(), trial.AnchorDay, "the anchor follows the trial's end")
					v, err := e.c.Subscription(t.Context(), e.user)
					require.NoError(t, err)
					assert.Equal(t, newEnd, v.TrialEnd)

					// Runs on every date either schedule could bill.
					oldEnd := start.AddDate(0, 0, 14)
					var days []time.Time
					for _, d := range []time.Time{start, tc.to, oldEnd, tc.to.AddDate(0, 1, 0), oldEnd.AddDate(0, 1, 0), tc.to.AddDate(0, 2, 0), newEnd.AddDate(0, 2, 0)} {
						days = append(days, d.Add(time.Hour))
					}
					slices.SortFunc(days, time.Time.Compare)
					for _, d := range days {
						e.runAt(t, d, billing.RunScheduled)
						for _, c := range e.pay.Calls() {
							require.False(t, c.At.Before(newEnd), "charged %s before the trial's end %s", c.At, newEnd)
						}
					}
					var paid []time.Time
					for _, r := range e.records(t) {
						if r.Status == billing.StatusCompleted && r.Amount > 0 {
							paid = append(paid, r.BillingDate)
						}
					}
					assert.Equal(t, []time.Time{newEnd, newEnd.AddDate(0, 1, 0), newEnd.AddDate(0, 2, 0)}, paid,
						"every paid period a full month from the trial's end")
					assert.Equal(t, 3, e.pay.CallCount())
				})
			}
		}
	}
}

// TestDateMoveIntoPaidPeriodRefusedWithoutProration (every layout): moving the next
// renewal (billed on the paid period's end, the 3rd of next month) to a
// date inside the paid period (the 20th of this month) used to be
// accepted and charged the days from the 20th to the 3rd again. Without
// proration such a move is refused, by the user's MoveBillingDate with
// ProrateNone and the operator's Periods.Move alike (and by CheckChange): a
// [*billing.DateMoveError] naming the paid period and the date it is paid
// through, nothing written, nothing charged. Moves on or after that date
// stay allowed.
func TestDateMoveIntoPaidPeriodRefusedWithoutProration(t *testing.T) {
	t.Parallel()
	paidThrough := feb3.AddDate(0, 1, 0)
	for _, st := range userStores() {
		for _, byUser := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/byuser=%v", st.name, byUser), func(t *testing.T) {
				t.Parallel()
				e := newUserEnv(t, st)
				e.subscribeAndPay(t)
				recs, err := e.repo.ListByUser(t.Context(), e.user)
				require.NoError(t, err)
				require.Len(t, recs, 2)
				paid, renewal := recs[0], recs[1]
				require.Equal(t, billing.StatusCompleted, paid.Status)
				require.Equal(t, paidThrough, renewal.BillingDate)
				move := func(key string, to time.Time) error {
					if byUser {
						_, err := e.c.MoveBillingDate(t.Context(), billing.MoveBillingDateRequest{UserRequest: ur(e.user, key), Date: to, Proration: billing.ProrateNone})
						return err
					}
					_, err := e.c.Periods().Move(t.Context(), renewal.SubscriptionID, to)
					return err
				}
				e.clock.Set(feb3.AddDate(0, 0, 7))
				inside := feb3.AddDate(0, 0, 17) // the 20th
				rows := len(e.rows(t))
				err = preview.CheckChange(t.Context(), e.c, preview.Change{Op: preview.ChangeDate, Date: inside, UserRecords: recs}, &renewal)
				var dme *billing.DateMoveError
				require.ErrorAs(t, err, &dme, "CheckChange")
				err = move("m1", inside)
				require.ErrorAs(t, err, &dme)
				assert.ErrorIs(t, err, billing.ErrDateMove)
				assert.ErrorIs(t, err, billing.ErrInvalidDate)
				assert.Equal(t, paid.SubscriptionID, dme.PeriodID)
				assert.Equal(t, paidThrough, dme.PaidThrough)
				assert.Contains(t, err.Error(), paidThrough.Format(time.RFC3339))
				assert.Equal(t, renewal, e.latestRec(t), "nothing written")
				assert.Len(t, e.rows(t), rows, "no history row")

				// The 20th's run charges nothing; the renewal is charged on
				// the date paid through, once.
				e.clock.Set(inside.Add(time.Hour))
				_, err = e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
				require.NoError(t, err)
				assert.Equal(t, 1, e.pay.CallCount())

				// On the date paid through, or later: allowed.
				require.NoError(t, move("m2", paidThrough.AddDate(0, 0, 7)))
				assert.Equal(t, paidThrough.AddDate(0, 0, 7), e.latestRec(t).BillingDate)
				require.NoError(t, move("m3", paidThrough))
				assert.Equal(t, paidThrough, e.latestRec(t).BillingDate)
			})
		}
	}
}

// latestRec returns the user's record with the latest billing date.
func (e *userEnv) latestRec(t *testing.T) billing.Period {
	t.Helper()
	recs, err := e.repo.ListByUser(t.Context(), e.user)
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	return recs[len(recs)-1]
}

// TestFridayDateMoveStaysOnFriday (every layout): a Friday-billing
// renewal moved to a date that is not a Friday used to be accepted,
// keeping its Friday week: moved to Wednesday March 12th, it was billed
// then and again on the first Friday of April, 23 days later, at a full
// month's price (found by the fault simulator, legacy-status seed 18, as
// a paused period opened already past due). Such a move is refused, as
// Subscribe refuses a Friday plan starting on another day; a move to a
// Friday takes that Friday's week.
func TestFridayDateMoveStaysOnFriday(t *testing.T) {
	t.Parallel()
	first := time.Date(2025, 2, 7, 9, 0, 0, 0, time.UTC) // the first Friday of February
	renewal := time.Date(2025, 3, 7, 9, 0, 0, 0, time.UTC)
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newUserEnv(t, st)
			_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "o1", UserID: e.user, Tier: "Plus:v2",
				FirstBillingDate: first, FridayBilling: true})
			require.NoError(t, err)
			e.clock.Set(first.Add(time.Hour))
			_, err = e.c.CollectUser(t.Context(), e.user, billing.ProcessWebhook)
			require.NoError(t, err)
			next := e.latestRec(t)
			require.Equal(t, renewal, next.BillingDate)
			require.Equal(t, 1, next.BillingWeek)

			wednesday := renewal.AddDate(0, 0, 5)
			_, err = e.c.MoveBillingDate(t.Context(), billing.MoveBillingDateRequest{UserRequest: ur(e.user, "m1"), Date: wednesday})
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe)
			assert.ErrorIs(t, err, billing.ErrInvalidDate)
			_, err = e.c.Periods().Move(t.Context(), next.SubscriptionID, wednesday)
			require.ErrorIs(t, err, billing.ErrInvalidDate)
			require.Error(t, preview.CheckChange(t.Context(), e.c, preview.Change{Op: preview.ChangeDate, Date: wednesday}, &next))
			assert.Equal(t, next, e.latestRec(t), "nothing written")

			friday := renewal.AddDate(0, 0, 7)
			_, err = e.c.MoveBillingDate(t.Context(), billing.MoveBillingDateRequest{UserRequest: ur(e.user, "m2"), Date: friday})
			require.NoError(t, err)
			moved := e.latestRec(t)
			assert.Equal(t, friday, moved.BillingDate)
			assert.Equal(t, 2, moved.BillingWeek)
		})
	}
}
