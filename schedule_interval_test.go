package billing_test

import (
	"testing"
	"testing/quick"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func utcDay(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 9, 30, 0, 0, time.UTC) }

func TestScheduleIntervalTable(t *testing.T) {
	quarterly31 := billing.Schedule{Term: billing.TermMonthly, Interval: 3, AnchorDay: 31}
	for _, c := range []struct {
		name  string
		start time.Time
		s     billing.Schedule
		want  []time.Time // periods 1, 2, ...
	}{
		{"quarterly from Jan 31 keeps the anchor", utcDay(2024, 1, 31), quarterly31,
			[]time.Time{utcDay(2024, 4, 30), utcDay(2024, 7, 31), utcDay(2024, 10, 31), utcDay(2025, 1, 31)}},
		{"quarterly from Nov 30 crosses a leap February", utcDay(2023, 11, 30), billing.Schedule{Interval: 3, AnchorDay: 30},
			[]time.Time{utcDay(2024, 2, 29), utcDay(2024, 5, 30), utcDay(2024, 8, 30)}},
		{"semi-annual from Aug 31", utcDay(2024, 8, 31), billing.Schedule{Interval: 6, AnchorDay: 31},
			[]time.Time{utcDay(2025, 2, 28), utcDay(2025, 8, 31), utcDay(2026, 2, 28)}},
		{"every 2 years from Feb 29", utcDay(2024, 2, 29), billing.Schedule{Term: billing.TermYearly, Interval: 2, AnchorDay: 29},
			[]time.Time{utcDay(2026, 2, 28), utcDay(2028, 2, 29), utcDay(2030, 2, 28)}},
		{"bi-weekly across month and year ends", utcDay(2024, 12, 20), billing.Schedule{Term: billing.TermWeekly, Interval: 2},
			[]time.Time{utcDay(2025, 1, 3), utcDay(2025, 1, 17), utcDay(2025, 1, 31), utcDay(2025, 2, 14)}},
		{"weekly ignores the anchor", utcDay(2024, 2, 26), billing.Schedule{Term: billing.TermWeekly, AnchorDay: 31},
			[]time.Time{utcDay(2024, 3, 4), utcDay(2024, 3, 11)}},
		{"Friday billing every 2 months", time.Date(2024, 1, 12, 0, 0, 0, 0, time.UTC), billing.Schedule{BillingWeek: 2, Interval: 2},
			[]time.Time{time.Date(2024, 3, 8, 0, 0, 0, 0, time.UTC), time.Date(2024, 5, 10, 0, 0, 0, 0, time.UTC)}},
		{"interval 0 is 1", utcDay(2024, 1, 31), billing.Schedule{AnchorDay: 31},
			[]time.Time{utcDay(2024, 2, 29), utcDay(2024, 3, 31)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cur := c.start
			for k, want := range c.want {
				got, err := billing.AddBillingPeriods(c.start, c.s, k+1)
				require.NoError(t, err)
				assert.Equal(t, want, got, "period %d directly", k+1)
				cur, err = c.s.Next(cur)
				require.NoError(t, err)
				if c.s.AnchorDay != 0 || c.s.Term == billing.TermWeekly || c.s.BillingWeek != 0 {
					assert.Equal(t, want, cur, "period %d stepped", k+1)
				}
			}
		})
	}
}

func TestScheduleIntervalInvalid(t *testing.T) {
	for _, n := range []int{-1, billing.MaxInterval + 1} {
		_, err := billing.Schedule{Interval: n}.Next(utcDay(2024, 1, 1))
		var fe *billing.FieldError
		require.ErrorAs(t, err, &fe, "interval %d", n)
		assert.Equal(t, "billing_interval", fe.Field)
		assert.ErrorIs(t, err, billing.ErrInvalidDate)
	}
	_, err := billing.ParseTerm("WEEKLY")
	require.NoError(t, err)
}

// expectedPeriod computes the k-th billing date of a plan by calendar
// arithmetic alone (not through the package): k·N months (or k·N·7 days)
// after start, the day clamped to the anchor in the target month.
func expectedPeriod(start time.Time, term billing.Term, anchor, n, k int) time.Time {
	if term == billing.TermWeekly {
		return start.AddDate(0, 0, 7*n*k)
	}
	months := n * k
	if term == billing.TermYearly {
		months *= 12
	}
	total := int(start.Month()) - 1 + months
	year, month := start.Year()+total/12, time.Month(total%12+1)
	last := time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
	return time.Date(year, month, min(anchor, last), start.Hour(), start.Minute(), 0, 0, time.UTC)
}

// TestScheduleIntervalProperty: for random anchors, intervals and terms,
// the k-th date is the anchor date advanced k·N periods with the day
// clamped; dates strictly increase, and stepping one period at a time
// lands on the same dates (no period skipped or doubled, leap years
// included).
func TestScheduleIntervalProperty(t *testing.T) {
	terms := []billing.Term{billing.TermMonthly, billing.TermYearly, billing.TermWeekly}
	prop := func(anchorSeed, nSeed, termSeed, yearSeed, monthSeed uint8) bool {
		anchor := int(anchorSeed)%31 + 1
		n := int(nSeed)%12 + 1
		term := terms[int(termSeed)%len(terms)]
		year, month := 1996+int(yearSeed)%40, time.Month(int(monthSeed)%12+1)
		last := time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
		start := time.Date(year, month, min(anchor, last), 6, 15, 0, 0, time.UTC)
		s := billing.Schedule{Term: term, Interval: n, AnchorDay: anchor}
		prev, stepped := start, start
		for k := 1; k <= 30; k++ {
			got, err := billing.AddBillingPeriods(start, s, k)
			if err != nil {
				t.Logf("AddBillingPeriods(%v, %+v, %d): %v", start, s, k, err)
				return false
			}
			if want := expectedPeriod(start, term, anchor, n, k); !got.Equal(want) {
				t.Logf("%+v from %v: period %d = %v, want %v", s, start, k, got, want)
				return false
			}
			if !got.After(prev) {
				t.Logf("%+v from %v: period %d %v not after %v", s, start, k, got, prev)
				return false
			}
			if stepped, err = s.Next(stepped); err != nil || !stepped.Equal(got) {
				t.Logf("%+v from %v: stepped to %v at period %d, want %v (%v)", s, start, stepped, k, got, err)
				return false
			}
			prev = got
		}
		return true
	}
	require.NoError(t, quick.Check(prop, &quick.Config{MaxCount: 2000}))
}

// TestCollectorIntervalOpensNextPeriod: collecting a quarterly (or
// bi-weekly) subscription opens the next period one interval later, with
// the anchor and the interval kept.
func TestCollectorIntervalOpensNextPeriod(t *testing.T) {
	for _, c := range []struct {
		name  string
		term  billing.Term
		n     int
		start time.Time
		want  time.Time
	}{
		{"quarterly", billing.TermMonthly, 3, jan31, time.Date(2024, 4, 30, 15, 0, 0, 0, time.UTC)},
		{"bi-weekly", billing.TermWeekly, 2, jan31, jan31.AddDate(0, 0, 14)},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newCollectorEnv(t)
			e.add("u1", c.start, billing.StatusScheduled, func(s *billing.Period) { s.Term, s.Interval = c.term, c.n })
			rep := e.runOnce(billing.RunScheduled)
			require.Equal(t, 1, rep.Collected)
			recs := e.records("u1")
			require.Len(t, recs, 2)
			next := recs[1]
			assert.Equal(t, c.want, next.BillingDate)
			assert.Equal(t, c.n, next.Interval)
			assert.Equal(t, c.term, next.Term)
			assert.Equal(t, 31, next.AnchorDay)
			assert.Equal(t, billing.BillingPeriod(c.want), next.BillingPeriod)

			// The next run collects nothing early; the period after is one
			// more interval on.
			e.clock.Set(c.want.Add(time.Hour))
			rep = e.runOnce(billing.RunScheduled)
			require.Equal(t, 1, rep.Collected)
			recs = e.records("u1")
			require.Len(t, recs, 3)
			after, err := billing.AddBillingPeriods(c.start, billing.Schedule{Term: c.term, Interval: c.n, AnchorDay: 31}, 2)
			require.NoError(t, err)
			assert.Equal(t, after, recs[2].BillingDate)
		})
	}
}
