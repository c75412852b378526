package billing

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing/internal/calendar"
)

// ts parses an RFC 3339 timestamp for test tables; it panics on bad input
// because the tables are constants.
func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

var (
	monthly = func(anchor int) Schedule { return Schedule{Term: TermMonthly, AnchorDay: anchor} }
	yearly  = func(anchor int) Schedule { return Schedule{Term: TermYearly, AnchorDay: anchor} }
	friday  = func(term Term, week int) Schedule { return Schedule{Term: term, BillingWeek: week} }
)

func TestScheduleAddBillingPeriods(t *testing.T) {
	tests := []struct {
		name string
		from string
		s    Schedule
		n    int
		want string
	}{
		// Leap years: 2024 and 2000 are leap, 2023, 1900 and 2100 are not.
		{"leap 2024 Jan31->Feb29", "2024-01-31T00:00:00Z", monthly(31), 1, "2024-02-29T00:00:00Z"},
		{"common 2023 Jan31->Feb28", "2023-01-31T00:00:00Z", monthly(31), 1, "2023-02-28T00:00:00Z"},
		{"leap 2000 (div 400)", "2000-01-31T00:00:00Z", monthly(31), 1, "2000-02-29T00:00:00Z"},
		{"common 1900 (div 100)", "1900-01-31T00:00:00Z", monthly(31), 1, "1900-02-28T00:00:00Z"},
		{"common 2100 (div 100)", "2100-01-31T00:00:00Z", monthly(31), 1, "2100-02-28T00:00:00Z"},

		// Anchors 29, 30 and 31 across February.
		{"anchor29 leap Jan->Feb", "2024-01-29T00:00:00Z", monthly(29), 1, "2024-02-29T00:00:00Z"},
		{"anchor29 common Jan->Feb", "2025-01-29T00:00:00Z", monthly(29), 1, "2025-02-28T00:00:00Z"},
		{"anchor30 leap Jan->Feb", "2024-01-30T00:00:00Z", monthly(30), 1, "2024-02-29T00:00:00Z"},
		{"anchor30 common Jan->Feb", "2025-01-30T00:00:00Z", monthly(30), 1, "2025-02-28T00:00:00Z"},
		{"anchor29 leap Feb->Mar", "2024-02-29T00:00:00Z", monthly(29), 1, "2024-03-29T00:00:00Z"},
		{"anchor30 leap Feb->Mar", "2024-02-29T00:00:00Z", monthly(30), 1, "2024-03-30T00:00:00Z"},
		{"anchor31 leap Feb->Mar", "2024-02-29T00:00:00Z", monthly(31), 1, "2024-03-31T00:00:00Z"},
		{"anchor31 common Feb->Mar", "2025-02-28T00:00:00Z", monthly(31), 1, "2025-03-31T00:00:00Z"},
		{"anchor29 common Feb->Mar", "2025-02-28T00:00:00Z", monthly(29), 1, "2025-03-29T00:00:00Z"},
		{"anchor30 common Feb->Mar", "2025-02-28T00:00:00Z", monthly(30), 1, "2025-03-30T00:00:00Z"},
		{"legacy anchor0 Feb28->Mar28", "2025-02-28T00:00:00Z", monthly(0), 1, "2025-03-28T00:00:00Z"},

		// Other month ends and the legacy (anchor 0) rule.
		{"anchor31 Mar->Apr30", "2025-03-31T00:00:00Z", monthly(31), 1, "2025-04-30T00:00:00Z"},
		{"anchor31 Apr30->May31", "2025-04-30T00:00:00Z", monthly(31), 1, "2025-05-31T00:00:00Z"},
		{"anchor30 Apr30->May30", "2025-04-30T00:00:00Z", monthly(30), 1, "2025-05-30T00:00:00Z"},
		{"anchor0 Apr30->May30", "2025-04-30T00:00:00Z", monthly(0), 1, "2025-05-30T00:00:00Z"},
		{"anchor0 mid-month", "2025-01-15T00:00:00Z", monthly(0), 1, "2025-02-15T00:00:00Z"},
		{"anchor below day of date", "2025-01-31T00:00:00Z", monthly(5), 1, "2025-02-05T00:00:00Z"},
		{"empty term is monthly", "2025-01-31T00:00:00Z", Schedule{}, 1, "2025-02-28T00:00:00Z"},

		// December -> January year rollover, time of day, time zones.
		{"Dec31->Jan31 rollover", "2025-12-31T00:00:00Z", monthly(31), 1, "2026-01-31T00:00:00Z"},
		{"Dec15->Jan15 keeps time", "2025-12-15T09:30:00Z", monthly(0), 1, "2026-01-15T09:30:00Z"},
		{"time of day to the ns", "2024-01-31T23:59:59.123456789Z", monthly(31), 1, "2024-02-29T23:59:59.123456789Z"},
		{"non-UTC crosses into next UTC day", "2024-01-31T20:00:00-05:00", monthly(0), 1, "2024-03-01T01:00:00Z"},
		{"non-UTC crosses into previous UTC day", "2024-03-01T02:00:00+09:00", monthly(0), 1, "2024-03-29T17:00:00Z"},
		{"non-UTC anchored", "2024-01-31T10:00:00+02:00", monthly(31), 1, "2024-02-29T08:00:00Z"},

		// Yearly, including Feb 29 anchors.
		{"yearly Feb29->Feb28", "2024-02-29T00:00:00Z", yearly(29), 1, "2025-02-28T00:00:00Z"},
		{"yearly Feb28 (a29)->Feb28", "2025-02-28T00:00:00Z", yearly(29), 1, "2026-02-28T00:00:00Z"},
		{"yearly Feb28 (a29)->Feb29 2028", "2027-02-28T00:00:00Z", yearly(29), 1, "2028-02-29T00:00:00Z"},
		{"yearly legacy Feb29 anchor0", "2024-02-29T00:00:00Z", yearly(0), 1, "2025-02-28T00:00:00Z"},
		{"yearly legacy Feb28 anchor0 stays 28", "2025-02-28T00:00:00Z", yearly(0), 1, "2026-02-28T00:00:00Z"},
		{"yearly into 2000 leap", "1999-02-28T00:00:00Z", yearly(29), 1, "2000-02-29T00:00:00Z"},
		{"yearly into 2100 common", "2099-02-28T00:00:00Z", yearly(29), 1, "2100-02-28T00:00:00Z"},
		{"yearly Dec31", "2025-12-31T06:00:00Z", yearly(31), 1, "2026-12-31T06:00:00Z"},
		{"yearly Feb29 4 periods", "2024-02-29T00:00:00Z", yearly(29), 4, "2028-02-29T00:00:00Z"},

		// Friday billing weeks 1..5; Dec 2025 has four Fridays, Jan 2026 five,
		// Feb 2026 four, Mar 2024 five, May 2024 five, Jun 2024 four.
		{"friday week1", "2025-12-05T00:00:00Z", friday(TermMonthly, 1), 1, "2026-01-02T00:00:00Z"},
		{"friday week2", "2025-12-12T00:00:00Z", friday(TermMonthly, 2), 1, "2026-01-09T00:00:00Z"},
		{"friday week3", "2025-12-19T00:00:00Z", friday(TermMonthly, 3), 1, "2026-01-16T00:00:00Z"},
		{"friday week4", "2025-12-26T00:00:00Z", friday(TermMonthly, 4), 1, "2026-01-23T00:00:00Z"},
		{"friday week5 into month with 5th", "2025-12-26T00:00:00Z", friday(TermMonthly, 5), 1, "2026-01-30T00:00:00Z"},
		{"friday week5 into month without 5th", "2026-01-30T00:00:00Z", friday(TermMonthly, 5), 1, "2026-02-27T00:00:00Z"},
		{"friday week5 leap Feb->Mar", "2024-02-23T00:00:00Z", friday(TermMonthly, 5), 1, "2024-03-29T00:00:00Z"},
		{"friday week5 May->Jun", "2024-05-31T00:00:00Z", friday(TermMonthly, 5), 1, "2024-06-28T00:00:00Z"},
		{"friday week1 keeps time", "2024-02-02T14:30:00Z", friday(TermMonthly, 1), 1, "2024-03-01T14:30:00Z"},
		{"friday non-UTC input", "2026-01-02T23:00:00-05:00", friday(TermMonthly, 1), 1, "2026-02-06T04:00:00Z"},
		{"friday ignores anchor", "2025-12-05T00:00:00Z", Schedule{Term: TermMonthly, AnchorDay: 31, BillingWeek: 1}, 1, "2026-01-02T00:00:00Z"},
		{"friday empty term", "2025-12-05T00:00:00Z", friday("", 1), 1, "2026-01-02T00:00:00Z"},
		{"friday yearly week5 with 5th", "2025-01-31T00:00:00Z", friday(TermYearly, 5), 1, "2026-01-30T00:00:00Z"},
		{"friday yearly week5 without 5th", "2024-03-29T00:00:00Z", friday(TermYearly, 5), 1, "2025-03-28T00:00:00Z"},
		{"friday yearly week5 Aug", "2025-08-29T00:00:00Z", friday(TermYearly, 5), 1, "2026-08-28T00:00:00Z"},
		{"friday yearly week2", "2025-02-14T00:00:00Z", friday(TermYearly, 2), 1, "2026-02-13T00:00:00Z"},
		{"friday week3 three periods", "2025-12-19T00:00:00Z", friday(TermMonthly, 3), 3, "2026-03-20T00:00:00Z"},

		// n other than 1, computed from the anchor directly.
		{"13 periods from Jan31", "2024-01-31T00:00:00Z", monthly(31), 13, "2025-02-28T00:00:00Z"},
		{"25 periods from Jan31", "2024-01-31T00:00:00Z", monthly(31), 25, "2026-02-28T00:00:00Z"},
		{"zero periods", "2024-01-31T00:00:00Z", monthly(31), 0, "2024-01-31T00:00:00Z"},
		{"zero periods clamps to anchor", "2024-02-29T00:00:00Z", monthly(31), 0, "2024-02-29T00:00:00Z"},
		{"minus one period", "2024-03-31T00:00:00Z", monthly(31), -1, "2024-02-29T00:00:00Z"},
		{"minus two periods over year end", "2024-01-31T00:00:00Z", monthly(31), -2, "2023-11-30T00:00:00Z"},
		{"yearly minus one", "2028-02-29T00:00:00Z", yearly(29), -1, "2027-02-28T00:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			from, want := ts(tc.from), ts(tc.want)
			got, err := addBillingPeriods(from, tc.s, tc.n)
			require.NoError(t, err, "addBillingPeriods(%s, %+v, %d)", tc.from, tc.s, tc.n)
			require.True(t, got.Equal(want), "addBillingPeriods(%s, %+v, %d) = %s, want %s (UTC)", tc.from, tc.s, tc.n, got.Format(time.RFC3339Nano), tc.want)
			require.Same(t, time.UTC, got.Location(), "addBillingPeriods(%s, %+v, %d) = %s, want %s (UTC)", tc.from, tc.s, tc.n, got.Format(time.RFC3339Nano), tc.want)
			if tc.n == 1 {
				next, err := tc.s.Next(from)
				require.NoError(t, err, "NextBillingDate(%s, %+v)", tc.from, tc.s)
				require.Equal(t, got, next, "NextBillingDate(%s, %+v) = %s; want %s", tc.from, tc.s, next, got)
			}
		})
	}
}

// TestScheduleEveryMonthEnd walks every month end of a common and a leap year
// from an anchor of 31.
func TestScheduleEveryMonthEnd(t *testing.T) {
	tests := []struct {
		year int
		want []int // day billed in Feb..Dec and the following Jan
	}{
		{2025, []int{28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 31}},
		{2024, []int{29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 31}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.year), func(t *testing.T) {
			cur := time.Date(tc.year, time.January, 31, 12, 0, 0, 0, time.UTC)
			for i, day := range tc.want {
				next, err := monthly(31).Next(cur)
				require.NoError(t, err)
				want := time.Date(tc.year, time.February+time.Month(i), day, 12, 0, 0, 0, time.UTC)
				require.Equal(t, want, next, "after %s: got %s, want %s", cur.Format(time.DateOnly), next.Format(time.DateOnly), want.Format(time.DateOnly))
				cur = next
			}
		})
	}
}

// TestScheduleChainNeverDrifts applies NextBillingDate repeatedly for 24
// months from Jan 31 with AnchorDay 31 and checks every date against the
// direct computation: the clamped February dates never pull the day to the
// 28th. It also shows why the anchor is needed: without it (AnchorDay 0,
// the legacy rule applied to the previous record) the chain does drift.
func TestScheduleChainNeverDrifts(t *testing.T) {
	start := ts("2024-01-31T08:15:00Z")
	cur := start
	for i := 1; i <= 24; i++ {
		next, err := monthly(31).Next(cur)
		require.NoError(t, err)
		direct, err := addBillingPeriods(start, monthly(31), i)
		require.NoError(t, err)
		require.Equal(t, direct, next, "period %d: stepped %s, direct %s", i, next, direct)
		y, m := next.Year(), next.Month()
		require.Equal(t, daysIn(y, m), next.Day(), "period %d: want last day of %s %d", i, m, y)
		require.Equal(t, 8, next.Hour(), "period %d: time of day lost: %s", i, next)
		require.Equal(t, 15, next.Minute(), "period %d: time of day lost: %s", i, next)
		cur = next
	}
	require.Equal(t, ts("2026-01-31T08:15:00Z"), cur, "after 24 months")

	// The documented chain.
	chain := []string{"2024-01-31", "2024-02-29", "2024-03-31", "2024-04-30", "2024-05-31"}
	cur = ts(chain[0] + "T00:00:00Z")
	for _, want := range chain[1:] {
		var err error
		cur, err = monthly(31).Next(cur)
		require.NoError(t, err)
		require.Equal(t, want, cur.Format(time.DateOnly))
	}

	// Without the anchor the day drifts to the 29th after February.
	cur = ts("2024-01-31T00:00:00Z")
	for range 2 {
		cur, _ = monthly(0).Next(cur)
	}
	require.Equal(t, "2024-03-29", cur.Format(time.DateOnly), "legacy drift")
}

func TestScheduleYearlyFeb29Chain(t *testing.T) {
	want := []string{"2025-02-28", "2026-02-28", "2027-02-28", "2028-02-29", "2029-02-28"}
	cur := ts("2024-02-29T10:00:00Z")
	for i, w := range want {
		next, err := yearly(29).Next(cur)
		require.NoError(t, err)
		require.Equal(t, w, next.Format(time.DateOnly), "year %d", i+1)
		require.Equal(t, 10, next.Hour(), "time of day lost: %s", next)
		cur = next
	}
}

func TestScheduleErrors(t *testing.T) {
	valid := ts("2024-01-31T00:00:00Z")
	tests := []struct {
		name  string
		from  time.Time
		s     Schedule
		n     int
		want  error
		field string
	}{
		{"unknown term", valid, Schedule{Term: "FORTNIGHTLY"}, 1, ErrInvalidTerm, "term"},
		{"lower-case term", valid, Schedule{Term: "monthly"}, 1, ErrInvalidTerm, "term"},
		{"anchor negative", valid, Schedule{AnchorDay: -1}, 1, ErrInvalidDate, "billing_anchor_day"},
		{"anchor 32", valid, Schedule{AnchorDay: 32}, 1, ErrInvalidDate, "billing_anchor_day"},
		{"week negative", valid, Schedule{BillingWeek: -1}, 1, ErrInvalidDate, "billing_week"},
		{"week 6", valid, Schedule{BillingWeek: 6}, 1, ErrInvalidDate, "billing_week"},
		{"zero time", time.Time{}, Schedule{}, 1, ErrInvalidDate, "billing_date"},
		{"too many periods", valid, Schedule{}, 1 << 40, ErrInvalidDate, ""},
		{"past year 9999", ts("9999-12-31T00:00:00Z"), Schedule{}, 1, ErrInvalidDate, ""},
		{"before year 1", ts("0001-01-31T00:00:00Z"), Schedule{}, -1, ErrInvalidDate, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := addBillingPeriods(tc.from, tc.s, tc.n)
			require.ErrorIs(t, err, tc.want, "err = %v, want %v", err, tc.want)
			require.True(t, got.IsZero(), "got %s with error", got)
			if tc.field != "" {
				var fe *FieldError
				require.ErrorAs(t, err, &fe, "err = %#v, want *FieldError for %s", err, tc.field)
				require.Equal(t, tc.field, fe.Field, "err = %#v, want *FieldError for %s", err, tc.field)
			}
			if tc.n == 1 {
				_, err := tc.s.Next(tc.from)
				require.ErrorIs(t, err, tc.want, "NextBillingDate err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNthFridayAndFridayWeek(t *testing.T) {
	tests := []struct {
		year  int
		month time.Month
		n     int
		want  string
	}{
		{2026, time.January, 1, "2026-01-02"},
		{2026, time.January, 5, "2026-01-30"},
		{2026, time.February, 4, "2026-02-27"},
		{2026, time.February, 5, "2026-02-27"}, // no 5th Friday
		{2024, time.March, 1, "2024-03-01"},    // month starts on a Friday
		{2024, time.March, 5, "2024-03-29"},
		{2024, time.February, 5, "2024-02-23"},
		{2027, time.January, 1, "2027-01-01"},
		{2027, time.January, 9, "2027-01-29"}, // far beyond the last Friday
		{2026, time.January, 0, "2026-01-02"}, // below 1 treated as 1
		{2025, time.December + 1, 1, "2026-01-02"},
	}
	for _, tc := range tests {
		got := calendar.NthFriday(tc.year, tc.month, tc.n)
		assert.Equal(t, tc.want, got.Format(time.DateOnly), "calendar.NthFriday(%d, %s, %d)", tc.year, tc.month, tc.n)
		assert.Equal(t, ts(tc.want+"T00:00:00Z"), got, "calendar.NthFriday(%d, %s, %d)", tc.year, tc.month, tc.n)
	}

	weeks := []struct {
		at   string
		want int
	}{
		{"2026-01-02T00:00:00Z", 1},
		{"2026-01-09T23:59:59Z", 2},
		{"2026-01-16T12:00:00Z", 3},
		{"2026-01-23T00:00:00Z", 4},
		{"2026-01-30T00:00:00Z", 5},
		{"2026-01-31T00:00:00Z", 0},      // Saturday
		{"2026-01-01T00:00:00Z", 0},      // Thursday
		{"2026-01-02T22:00:00-05:00", 0}, // Saturday 03:00 in UTC
		{"2026-01-01T22:00:00-05:00", 1}, // Friday 03:00 in UTC
	}
	for _, tc := range weeks {
		assert.Equal(t, tc.want, calendar.FridayWeek(ts(tc.at)), "calendar.FridayWeek(%s)", tc.at)
	}

	// Round trip over two centuries of months.
	for y := 1990; y <= 2110; y++ {
		for m := time.January; m <= time.December; m++ {
			last := 0
			for n := 1; n <= 5; n++ {
				f := calendar.NthFriday(y, m, n)
				require.Equal(t, time.Friday, f.Weekday(), "calendar.NthFriday(%d, %s, %d) = %s", y, m, n, f)
				require.Equal(t, m, f.Month(), "calendar.NthFriday(%d, %s, %d) = %s", y, m, n, f)
				require.Equal(t, y, f.Year(), "calendar.NthFriday(%d, %s, %d) = %s", y, m, n, f)
				w := calendar.FridayWeek(f)
				require.True(t, w == n || (n == 5 && w == 4), "calendar.FridayWeek(calendar.NthFriday(%d, %s, %d)) = %d", y, m, n, w)
				if f.AddDate(0, 0, 7).Month() == m {
					require.Equal(t, n, w, "calendar.NthFriday(%d, %s, %d) = %s is not the last Friday", y, m, n, f)
				}
				last = f.Day()
			}
			require.Greater(t, last+7, daysIn(y, m), "%d %s: last Friday %d is not last", y, m, last)
		}
	}
}

func TestBillingPeriod(t *testing.T) {
	format := []struct {
		at   string
		want string
	}{
		{"2024-01-31T00:00:00Z", "01/2024"},
		{"2024-12-01T00:00:00Z", "12/2024"},
		{"2024-12-31T23:00:00-05:00", "01/2025"}, // UTC month
		{"0999-07-01T00:00:00Z", "07/0999"},
	}
	for _, tc := range format {
		assert.Equal(t, tc.want, BillingPeriod(ts(tc.at)), "BillingPeriod(%s)", tc.at)
	}

	parse := []struct {
		in    string
		year  int
		month time.Month
		ok    bool
	}{
		{"01/2024", 2024, time.January, true},
		{"12/1999", 1999, time.December, true},
		{"02/0001", 1, time.February, true},
		{"09/9999", 9999, time.September, true},
		{"", 0, 0, false},
		{"1/2024", 0, 0, false},
		{"00/2024", 0, 0, false},
		{"13/2024", 0, 0, false},
		{"01/24", 0, 0, false},
		{"01/20245", 0, 0, false},
		{"01-2024", 0, 0, false},
		{"2024/01", 0, 0, false},
		{" 1/2024", 0, 0, false},
		{"+1/2024", 0, 0, false},
		{"01/+024", 0, 0, false},
		{"01/2024 ", 0, 0, false},
		{"01/0000", 0, 0, false},
		{"ab/cdef", 0, 0, false},
		{"０1/2024", 0, 0, false}, // full-width digit
	}
	for _, tc := range parse {
		y, m, err := parseBillingPeriod(tc.in)
		if tc.ok {
			assert.NoError(t, err, "ParseBillingPeriod(%q)", tc.in)
			assert.Equal(t, tc.year, y, "ParseBillingPeriod(%q) year", tc.in)
			assert.Equal(t, tc.month, m, "ParseBillingPeriod(%q) month", tc.in)
			continue
		}
		var fe *FieldError
		assert.ErrorIs(t, err, ErrInvalidDate, "ParseBillingPeriod(%q) err = %v, want FieldError billing_period wrapping ErrInvalidDate", tc.in, err)
		if assert.ErrorAs(t, err, &fe, "ParseBillingPeriod(%q) err = %v, want FieldError billing_period wrapping ErrInvalidDate", tc.in, err) {
			assert.Equal(t, "billing_period", fe.Field, "ParseBillingPeriod(%q) err = %v", tc.in, err)
			assert.Equal(t, tc.in, fe.Value, "ParseBillingPeriod(%q) err = %v", tc.in, err)
		}
		assert.Zero(t, y, "ParseBillingPeriod(%q) year with an error", tc.in)
		assert.Zero(t, m, "ParseBillingPeriod(%q) month with an error", tc.in)
	}
}

func FuzzParseBillingPeriod(f *testing.F) {
	for _, s := range []string{"01/2024", "12/9999", "00/2024", "13/2024", "1/2024", "01/24", "01/0000", "+1/2024", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		y, m, err := parseBillingPeriod(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidDate, "%q: error %v does not wrap ErrInvalidDate", s, err)
			return
		}
		require.Equal(t, s, BillingPeriod(time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)), "%q parsed as %d-%d", s, y, m)
	})
}
