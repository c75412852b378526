package billing_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

func pday(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 15, 0, 0, 0, time.UTC) }

// TestPauseResumeDate: a pause counts calendar months on every term, with
// the schedule's anchor-day and Friday-week rules.
func TestPauseResumeDate(t *testing.T) {
	monthly := func(anchor int) billing.Schedule {
		return billing.Schedule{Term: billing.TermMonthly, AnchorDay: anchor}
	}
	yearly := func(anchor int) billing.Schedule {
		return billing.Schedule{Term: billing.TermYearly, AnchorDay: anchor}
	}
	for _, c := range []struct {
		name   string
		paused time.Time
		s      billing.Schedule
		months int
		want   time.Time
	}{
		{"monthly 1", pday(2024, 1, 15), monthly(15), 1, pday(2024, 2, 15)},
		{"monthly 2", pday(2024, 1, 15), monthly(15), 2, pday(2024, 3, 15)},
		{"monthly 12", pday(2024, 1, 15), monthly(15), 12, pday(2025, 1, 15)},
		{"monthly legacy anchor", pday(2024, 1, 31), billing.Schedule{}, 1, pday(2024, 2, 29)},
		{"monthly Jan 31 to Feb", pday(2024, 1, 31), monthly(31), 1, pday(2024, 2, 29)},
		{"monthly clamped Feb 29 back to 31", pday(2024, 2, 29), monthly(31), 1, pday(2024, 3, 31)},
		{"yearly 1", pday(2024, 1, 15), yearly(15), 1, pday(2024, 2, 15)},
		{"yearly 2", pday(2024, 1, 15), yearly(15), 2, pday(2024, 3, 15)},
		{"yearly 11", pday(2024, 1, 15), yearly(15), 11, pday(2024, 12, 15)},
		{"yearly 12", pday(2024, 1, 15), yearly(15), 12, pday(2025, 1, 15)},
		{"yearly 13", pday(2024, 1, 15), yearly(15), 13, pday(2025, 2, 15)},
		{"yearly Jan 31, 1", pday(2024, 1, 31), yearly(31), 1, pday(2024, 2, 29)},
		{"yearly Jan 31, 2", pday(2024, 1, 31), yearly(31), 2, pday(2024, 3, 31)},
		{"yearly Jan 31, 11", pday(2024, 1, 31), yearly(31), 11, pday(2024, 12, 31)},
		{"yearly Jan 31, 12", pday(2024, 1, 31), yearly(31), 12, pday(2025, 1, 31)},
		{"yearly Jan 31, 13", pday(2024, 1, 31), yearly(31), 13, pday(2025, 2, 28)},
		{"yearly Jan 31 in a common year", pday(2023, 1, 31), yearly(31), 1, pday(2023, 2, 28)},
		{"yearly Feb 29, 1", pday(2024, 2, 29), yearly(29), 1, pday(2024, 3, 29)},
		{"yearly Feb 29, 12", pday(2024, 2, 29), yearly(29), 12, pday(2025, 2, 28)},
		{"yearly Feb 29, 13", pday(2024, 2, 29), yearly(29), 13, pday(2025, 3, 29)},
		{"yearly Feb 29, 48", pday(2024, 2, 29), yearly(29), 48, pday(2028, 2, 29)},
		{"yearly Feb 28 with anchor 31", pday(2025, 2, 28), yearly(31), 2, pday(2025, 4, 30)},
		// Friday billing keeps its week: the 5th Friday, or the last one.
		{"yearly Friday week 5, 1", pday(2024, 3, 29), billing.Schedule{Term: billing.TermYearly, BillingWeek: 5}, 1, pday(2024, 4, 26)},
		{"yearly Friday week 5, 2", pday(2024, 3, 29), billing.Schedule{Term: billing.TermYearly, BillingWeek: 5}, 2, pday(2024, 5, 31)},
		{"monthly Friday week 2, 13", pday(2024, 3, 8), billing.Schedule{BillingWeek: 2}, 13, pday(2025, 4, 11)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.s.AfterPause(c.paused, c.months)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}

	_, err := billing.Schedule{}.AfterPause(pday(2024, 1, 15), 0)
	assert.ErrorIs(t, err, billing.ErrInvalidQuery)
	_, err = billing.Schedule{Term: "DAILY"}.AfterPause(pday(2024, 1, 15), 1)
	assert.ErrorIs(t, err, billing.ErrInvalidTerm)
	_, err = billing.Schedule{AnchorDay: 32}.AfterPause(pday(2024, 1, 15), 1)
	assert.ErrorIs(t, err, billing.ErrInvalidDate)
}

// TestPauseResumeDateProperty: for random anchors, start months, terms and
// pauses, the resume date is N months after the paused date on day
// min(anchor, days in that month), at the same time of day, and equals N
// one-month steps (the pause run's records).
func TestPauseResumeDateProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 5))
	for i := range 3000 {
		anchor := 1 + r.IntN(31)
		y, m := 1990+r.IntN(80), time.Month(1+r.IntN(12))
		daysIn := func(y int, m time.Month) int { return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day() }
		paused := time.Date(y, m, min(anchor, daysIn(y, m)), r.IntN(24), r.IntN(60), 0, 0, time.UTC)
		term := []billing.Term{billing.TermMonthly, billing.TermYearly, ""}[r.IntN(3)]
		n := 1 + r.IntN(130)
		s := billing.Schedule{Term: term, AnchorDay: anchor}
		got, err := s.AfterPause(paused, n)
		require.NoError(t, err)

		idx := y*12 + int(m-1) + n
		wy, wm := idx/12, time.Month(idx%12+1)
		want := time.Date(wy, wm, min(anchor, daysIn(wy, wm)), paused.Hour(), paused.Minute(), 0, 0, time.UTC)
		require.Equal(t, want, got, "case %d: paused %v anchor %d term %q months %d", i, paused, anchor, term, n)

		step := paused
		for range n {
			step, err = s.AfterPause(step, 1)
			require.NoError(t, err)
		}
		require.Equal(t, want, step, "case %d: %d one-month steps from %v", i, n, paused)
	}
}

// TestPauseCountsMonthsOnEveryTerm drives the pause run over paused
// subscriptions: a yearly plan paused for N months is charged again N
// months after its paused billing date (not N years), then yearly; a
// monthly plan behaves as before.
func TestPauseCountsMonthsOnEveryTerm(t *testing.T) {
	type want struct {
		date   time.Time
		status billing.Status
		months int
		event  billing.UpdatedEvent
	}
	cases := []struct {
		user   string
		first  time.Time
		mut    func(*billing.Period)
		months int
		want   []want
	}{
		{"y-31", pday(2024, 1, 31), func(s *billing.Period) { s.Term, s.AnchorDay = billing.TermYearly, 31 }, 2, []want{
			{pday(2024, 1, 31), billing.StatusPausedSkipped, 2, billing.UpdatedPauseSkipped},
			{pday(2024, 2, 29), billing.StatusPausedSkipped, 1, billing.UpdatedPauseSkipped},
			{pday(2024, 3, 31), billing.StatusCompleted, 0, billing.UpdatedPauseResume},
			{pday(2025, 3, 31), billing.StatusScheduled, 0, ""},
		}},
		{"y-fri", pday(2024, 3, 29), func(s *billing.Period) { s.Term, s.BillingWeek = billing.TermYearly, 5 }, 1, []want{
			{pday(2024, 3, 29), billing.StatusPausedSkipped, 1, billing.UpdatedPauseSkipped},
			{pday(2024, 4, 26), billing.StatusCompleted, 0, billing.UpdatedPauseResume},
			{pday(2025, 4, 25), billing.StatusScheduled, 0, ""},
		}},
		{"y-feb29", pday(2024, 2, 29), func(s *billing.Period) { s.Term, s.AnchorDay = billing.TermYearly, 29 }, 13, nil},
		{"m-15", pday(2024, 2, 15), nil, 2, []want{
			{pday(2024, 2, 15), billing.StatusPausedSkipped, 2, billing.UpdatedPauseSkipped},
			{pday(2024, 3, 15), billing.StatusPausedSkipped, 1, billing.UpdatedPauseSkipped},
			{pday(2024, 4, 15), billing.StatusCompleted, 0, billing.UpdatedPauseResume},
			{pday(2024, 5, 15), billing.StatusScheduled, 0, ""},
		}},
	}
	forEachCollectorStore(t, func(t *testing.T, e *collectorEnv) {
		ctx := t.Context()
		for _, c := range cases {
			var muts []func(*billing.Period)
			if c.mut != nil {
				muts = append(muts, c.mut)
			}
			s := e.add(c.user, c.first, billing.StatusScheduled, muts...)
			ch, err := e.c.Periods().Pause(ctx, s.SubscriptionID, c.months)
			require.NoError(t, err)
			require.Equal(t, billing.StatusPaused, ch.After.Status)
		}
		// Walk the calendar: the earliest open record of a user not yet
		// charged is due next; run the pause and scheduled runs just after
		// it, so nothing else is due (or stale) meanwhile.
		for range 40 {
			var next time.Time
			for _, c := range cases {
				recs := e.records(c.user)
				if recs[len(recs)-1].Status == billing.StatusScheduled && len(recs) > 1 && recs[len(recs)-2].Status == billing.StatusCompleted {
					continue // charged after the pause
				}
				for _, r := range recs {
					if !r.Status.IsTerminal() && (next.IsZero() || r.BillingDate.Before(next)) {
						next = r.BillingDate
					}
				}
			}
			if next.IsZero() {
				break
			}
			e.clock.Set(next.Add(time.Hour))
			e.run(billing.RunPause)
			e.run(billing.RunScheduled)
		}
		for _, c := range cases {
			recs := e.records(c.user)
			if c.want == nil {
				// 13 months: 13 skipped PAUSED records a month apart, then
				// the charge on Mar 29, 2025, and the next one a year later.
				require.Len(t, recs, 15, c.user)
				for i, r := range recs[:13] {
					assert.Equal(t, billing.StatusPausedSkipped, r.Status, "%s record %d", c.user, i)
					assert.Equal(t, 13-i, r.PauseDurationMonths, "%s record %d", c.user, i)
					w, err := billing.Schedule{Term: billing.TermYearly, AnchorDay: 29}.AfterPause(c.first, max(i, 1))
					require.NoError(t, err)
					if i == 0 {
						w = c.first
					}
					assert.Equal(t, w, r.BillingDate, "%s record %d", c.user, i)
				}
				assert.Equal(t, pday(2025, 2, 28), recs[12].BillingDate)
				assert.Equal(t, billing.StatusCompleted, recs[13].Status)
				assert.Equal(t, pday(2025, 3, 29), recs[13].BillingDate)
				assert.Equal(t, billing.StatusScheduled, recs[14].Status)
				assert.Equal(t, pday(2026, 3, 29), recs[14].BillingDate)
				assert.Equal(t, billing.TermYearly, recs[14].Term)
				continue
			}
			// The walk goes on while other users are paused, so a monthly
			// plan's period after the charge may be charged too.
			require.GreaterOrEqual(t, len(recs), len(c.want), c.user)
			got := make([]want, len(c.want))
			for i, r := range recs[:len(c.want)] {
				got[i] = want{r.BillingDate, r.Status, r.PauseDurationMonths, r.UpdatedEvent}
			}
			if last := &got[len(got)-1]; last.status == billing.StatusCompleted {
				last.status = billing.StatusScheduled
			}
			assert.Equal(t, c.want, got, fmt.Sprintf("records of %s", c.user))
			for _, r := range recs {
				if c.mut != nil {
					assert.Equal(t, billing.TermYearly, r.Term, "%s %v", c.user, r.BillingDate)
				}
			}
		}
	})
}
