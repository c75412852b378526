package billing_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDatesNearTheStaleLimitAreCollected: a billing date a caller sets
// (Subscribe, ChangeBillingDate, Reactivate) is accepted only when it is at
// least StaleMargin newer than the stale limit, so a run hours or a day
// later, the clock having moved on, still charges the period instead of
// marking it STALE. A date inside the margin is refused and nothing is
// written. Before, a date a minute inside the limit was accepted and the
// next run lost its period (no charge, STALE, next month opened).
func TestDatesNearTheStaleLimitAreCollected(t *testing.T) {
	t.Parallel()
	now := jan31.Add(time.Hour) // the env's clock
	day := 24 * time.Hour
	// Each way of setting a date: the records it starts from, and the call.
	type setter struct {
		field string
		setup func(e *collectorEnv) string // the record or user the call takes
		set   func(e *collectorEnv, target string, date time.Time) (billing.Period, error)
	}
	via := map[string]setter{
		"subscribe": {"FirstBillingDate", func(*collectorEnv) string { return "u1" },
			func(e *collectorEnv, user string, date time.Time) (billing.Period, error) {
				got, err := e.c.Subscribe(e.t.Context(), billing.SubscribeRequest{RequestKey: "k1", UserID: user, Tier: "Plus:v2",
					Amount: billing.MustParseAmount("4.99"), FirstBillingDate: date})
				return got.Subscription, err
			}},
		"change date": {"billing_date", func(e *collectorEnv) string {
			return e.add("u1", jan31.AddDate(0, 0, 5), billing.StatusScheduled).SubscriptionID
		}, func(e *collectorEnv, id string, date time.Time) (billing.Period, error) {
			ch, err := e.c.Periods().Move(e.t.Context(), id, date)
			return ch.After, err
		}},
		"reactivate": {"billing_date", func(e *collectorEnv) string {
			e.add("u1", jan31.AddDate(0, 0, -80), billing.StatusCancelled)
			return "u1"
		}, func(e *collectorEnv, user string, date time.Time) (billing.Period, error) {
			return e.c.Reactivate(e.t.Context(), user, date)
		}},
	}
	dates := []struct {
		name   string
		age    func(limit time.Duration) time.Duration // now minus the date set
		accept bool
	}{
		{"at the oldest accepted", func(l time.Duration) time.Duration { return l - billing.StaleMargin }, true},
		{"a minute newer", func(l time.Duration) time.Duration { return l - billing.StaleMargin - time.Minute }, true},
		{"a second inside the margin", func(l time.Duration) time.Duration { return l - billing.StaleMargin + time.Second }, false},
		{"an hour inside the limit", func(l time.Duration) time.Duration { return l - time.Hour }, false},
		{"at the limit", func(l time.Duration) time.Duration { return l }, false},
	}
	delays := []time.Duration{3 * time.Hour, day}
	for _, days := range []int{0, 5} { // 0: the default, 30 days
		limit := 30 * day
		if days != 0 {
			limit = time.Duration(days) * day
		}
		for vname, v := range via {
			for _, dc := range dates {
				date := now.Add(-dc.age(limit))
				for _, delay := range delays {
					t.Run(fmt.Sprintf("%d days/%s/%s/run %v later", days, vname, dc.name, delay), func(t *testing.T) {
						t.Parallel()
						e := newCollectorEnv(t, func(c *billing.Config) { c.OldSubscriptionDays = days })
						target := v.setup(e)
						before := e.records("u1")
						set, err := v.set(e, target, date)
						if !dc.accept {
							require.ErrorIs(t, err, billing.ErrInvalidDate)
							var fe *billing.FieldError
							require.ErrorAs(t, err, &fe)
							assert.Equal(t, v.field, fe.Field)
							assert.Contains(t, err.Error(), "at least 24 hours newer")
							assert.Equal(t, before, e.records("u1"), "nothing changed")
							return
						}
						require.NoError(t, err)
						require.Equal(t, date, set.BillingDate)
						require.Equal(t, billing.StatusScheduled, set.Status)

						e.clock.Advance(delay)
						e.run(billing.RunScheduled)
						got, err := e.repo.GetByID(t.Context(), set.SubscriptionID)
						require.NoError(t, err)
						assert.Equal(t, billing.StatusCompleted, got.Status, "%+v", got)
						assert.Zero(t, e.events.Count(billing.EventStale), "nothing marked stale")
						calls := e.pay.Calls()
						if assert.Len(t, calls, 1) {
							assert.Equal(t, billing.IdempotencyKey(set.SubscriptionID, 1), calls[0].Request.IdempotencyKey)
							assert.Equal(t, billing.MustParseAmount("4.99"), calls[0].Request.Amount)
						}
						assert.Len(t, e.pay.ChargesFor(set.SubscriptionID), 1, "charged once")
					})
				}
			}
		}
	}
}

// TestTooOldRecordReopensInsideTheMargin: a record too old to collect
// goes on at the first billing date at least StaleMargin newer than the
// stale limit, so the period it opens is charged by a run an hour or a day
// later (or, when that date is ahead, once it is due), never marked STALE
// in turn. Before, the weekly and monthly records below reopened 30 minutes
// inside the limit and the next run marked that period stale too.
func TestTooOldRecordReopensInsideTheMargin(t *testing.T) {
	t.Parallel()
	// The env's clock is 2024-01-31T16:00Z: the stale limit is
	// 2024-01-01T16:00Z and the oldest date a record goes on at
	// 2024-01-02T16:00Z.
	weekly := func(s *billing.Period) { s.Term, s.AnchorDay = billing.TermWeekly, 0 }
	cases := []struct {
		name string
		old  time.Time
		mut  []func(*billing.Period)
		want time.Time // the reopened period's billing date
	}{
		{"weekly, a week past the margin", time.Date(2023, 10, 23, 16, 30, 0, 0, time.UTC), []func(*billing.Period){weekly},
			time.Date(2024, 1, 8, 16, 30, 0, 0, time.UTC)}, // not Jan 1 16:30, 30 minutes inside the limit
		{"monthly, at the oldest date", time.Date(2023, 6, 2, 16, 0, 0, 0, time.UTC), nil,
			time.Date(2024, 1, 2, 16, 0, 0, 0, time.UTC)},
		{"monthly, the next month", time.Date(2023, 6, 1, 16, 30, 0, 0, time.UTC), nil,
			time.Date(2024, 2, 1, 16, 30, 0, 0, time.UTC)}, // not Jan 1 16:30
	}
	for _, tc := range cases {
		for _, delay := range []time.Duration{time.Hour, 24 * time.Hour} {
			t.Run(fmt.Sprintf("%s/run %v later", tc.name, delay), func(t *testing.T) {
				t.Parallel()
				e := newCollectorEnv(t)
				e.add("u1", tc.old, billing.StatusScheduled, tc.mut...)
				e.run(billing.RunScheduled)
				recs := e.records("u1")
				require.Len(t, recs, 2, "%+v", recs)
				assert.Equal(t, billing.StatusStale, recs[0].Status)
				next := recs[1]
				require.Equal(t, billing.StatusScheduled, next.Status)
				require.Equal(t, tc.want, next.BillingDate)
				require.Equal(t, 1, e.events.Count(billing.EventStale))
				require.Zero(t, e.pay.CallCount())

				e.clock.Advance(delay)
				e.run(billing.RunScheduled)
				cur, err := e.repo.GetByID(t.Context(), next.SubscriptionID)
				require.NoError(t, err)
				if !next.DueAt(e.clock.Now()) {
					// Not due yet: left open, not marked stale; charged once due.
					assert.Equal(t, billing.StatusScheduled, cur.Status)
					assert.Zero(t, e.pay.CallCount())
					e.clock.Set(next.BillingDate.Add(delay))
					e.run(billing.RunScheduled)
					cur, err = e.repo.GetByID(t.Context(), next.SubscriptionID)
					require.NoError(t, err)
				}
				assert.Equal(t, billing.StatusCompleted, cur.Status, "%+v", cur)
				assert.Equal(t, 1, e.events.Count(billing.EventStale), "only the old record is stale")
				calls := e.pay.Calls()
				if assert.Len(t, calls, 1) {
					assert.Equal(t, billing.IdempotencyKey(next.SubscriptionID, 1), calls[0].Request.IdempotencyKey)
					assert.Equal(t, billing.MustParseAmount("4.99"), calls[0].Request.Amount)
				}
			})
		}
	}
}
