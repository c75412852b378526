package billing

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
			got, err := AddBillingPeriods(from, tc.s, tc.n)
			require.NoError(t, err, "AddBillingPeriods(%s, %+v, %d)", tc.from, tc.s, tc.n)
			if !got.Equal(want) || got.Location() != time.UTC {
				t.Fatalf("AddBillingPeriods(%s, %+v, %d) = %s, want %s (UTC)", tc.from, tc.s, tc.n, got.Format(time.RFC3339Nano), tc.want)
			}
			if tc.n == 1 {
				next, err := NextBillingDate(from, tc.s)
				if err != nil || next != got {
					t.Fatalf("NextBillingDate(%s, %+v) = %s, %v; want %s", tc.from, tc.s, next, err, got)
				}
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
				next, err := NextBillingDate(cur, monthly(31))
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
		next, err := NextBillingDate(cur, monthly(31))
		require.NoError(t, err)
		direct, err := AddBillingPeriods(start, monthly(31), i)
		require.NoError(t, err)
		if next != direct {
			t.Fatalf("period %d: stepped %s, direct %s", i, next, direct)
		}
		y, m := next.Year(), next.Month()
		if want := daysIn(y, m); next.Day() != want {
			t.Fatalf("period %d: day %d, want last day %d of %s %d", i, next.Day(), want, m, y)
		}
		if next.Hour() != 8 || next.Minute() != 15 {
			t.Fatalf("period %d: time of day lost: %s", i, next)
		}
		cur = next
	}
	if want := ts("2026-01-31T08:15:00Z"); cur != want {
		t.Fatalf("after 24 months: %s, want %s", cur, want)
	}

	// The documented chain.
	chain := []string{"2024-01-31", "2024-02-29", "2024-03-31", "2024-04-30", "2024-05-31"}
	cur = ts(chain[0] + "T00:00:00Z")
	for _, want := range chain[1:] {
		var err error
		if cur, err = NextBillingDate(cur, monthly(31)); err != nil {
			t.Fatal(err)
		}
		if got := cur.Format(time.DateOnly); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}

	// Without the anchor the day drifts to the 29th after February.
	cur = ts("2024-01-31T00:00:00Z")
	for range 2 {
		cur, _ = NextBillingDate(cur, monthly(0))
	}
	if got := cur.Format(time.DateOnly); got != "2024-03-29" {
		t.Fatalf("legacy drift: got %s, want 2024-03-29", got)
	}
}

func TestScheduleYearlyFeb29Chain(t *testing.T) {
	want := []string{"2025-02-28", "2026-02-28", "2027-02-28", "2028-02-29", "2029-02-28"}
	cur := ts("2024-02-29T10:00:00Z")
	for i, w := range want {
		next, err := NextBillingDate(cur, yearly(29))
		require.NoError(t, err)
		if got := next.Format(time.DateOnly); got != w {
			t.Fatalf("year %d: got %s, want %s", i+1, got, w)
		}
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
			got, err := AddBillingPeriods(tc.from, tc.s, tc.n)
			require.ErrorIs(t, err, tc.want, "err = %v, want %v", err, tc.want)
			if !got.IsZero() {
				t.Fatalf("got %s with error", got)
			}
			if tc.field != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("err = %#v, want *FieldError for %s", err, tc.field)
				}
			}
			if tc.n == 1 {
				if _, err := NextBillingDate(tc.from, tc.s); !errors.Is(err, tc.want) {
					t.Fatalf("NextBillingDate err = %v, want %v", err, tc.want)
				}
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
		got := NthFriday(tc.year, tc.month, tc.n)
		if got.Format(time.DateOnly) != tc.want || got != ts(tc.want+"T00:00:00Z") {
			t.Errorf("NthFriday(%d, %s, %d) = %s, want %s", tc.year, tc.month, tc.n, got, tc.want)
		}
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
		if got := FridayWeek(ts(tc.at)); got != tc.want {
			t.Errorf("FridayWeek(%s) = %d, want %d", tc.at, got, tc.want)
		}
	}

	// Round trip over two centuries of months.
	for y := 1990; y <= 2110; y++ {
		for m := time.January; m <= time.December; m++ {
			last := 0
			for n := 1; n <= 5; n++ {
				f := NthFriday(y, m, n)
				if f.Weekday() != time.Friday || f.Month() != m || f.Year() != y {
					t.Fatalf("NthFriday(%d, %s, %d) = %s", y, m, n, f)
				}
				w := FridayWeek(f)
				if w != n && !(n == 5 && w == 4) {
					t.Fatalf("FridayWeek(NthFriday(%d, %s, %d)) = %d", y, m, n, w)
				}
				if f.AddDate(0, 0, 7).Month() == m && w != n {
					t.Fatalf("NthFriday(%d, %s, %d) = %s is not the last Friday", y, m, n, f)
				}
				last = f.Day()
			}
			if last+7 <= daysIn(y, m) {
				t.Fatalf("%d %s: last Friday %d is not last", y, m, last)
			}
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
		if got := BillingPeriod(ts(tc.at)); got != tc.want {
			t.Errorf("BillingPeriod(%s) = %q, want %q", tc.at, got, tc.want)
		}
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
		y, m, err := ParseBillingPeriod(tc.in)
		if tc.ok {
			if err != nil || y != tc.year || m != tc.month {
				t.Errorf("ParseBillingPeriod(%q) = %d, %s, %v; want %d, %s", tc.in, y, m, err, tc.year, tc.month)
			}
			continue
		}
		var fe *FieldError
		if !errors.Is(err, ErrInvalidDate) || !errors.As(err, &fe) || fe.Field != "billing_period" || fe.Value != tc.in {
			t.Errorf("ParseBillingPeriod(%q) err = %v, want FieldError billing_period wrapping ErrInvalidDate", tc.in, err)
		}
		if y != 0 || m != 0 {
			t.Errorf("ParseBillingPeriod(%q) = %d, %s with an error", tc.in, y, m)
		}
	}
}

func TestNotificationWindow(t *testing.T) {
	tests := []struct {
		name       string
		now        string
		override   string
		start, end string
	}{
		{"mid month", "2026-03-10T12:00:00Z", "", "2026-03-14T00:00:00Z", "2026-03-15T00:00:00Z"},
		{"start of day", "2026-03-10T00:00:00Z", "", "2026-03-14T00:00:00Z", "2026-03-15T00:00:00Z"},
		{"end of day", "2026-03-10T23:59:59.999999999Z", "", "2026-03-14T00:00:00Z", "2026-03-15T00:00:00Z"},
		{"across month end", "2026-01-29T12:00:00Z", "", "2026-02-02T00:00:00Z", "2026-02-03T00:00:00Z"},
		{"across Feb end, leap", "2024-02-26T12:00:00Z", "", "2024-03-01T00:00:00Z", "2024-03-02T00:00:00Z"},
		{"into Feb 29", "2024-02-25T12:00:00Z", "", "2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"across year end", "2026-12-29T23:59:00Z", "", "2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z"},
		{"window is last day of year", "2026-12-27T08:00:00Z", "", "2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"non-UTC now uses UTC date", "2026-12-29T20:00:00-05:00", "", "2027-01-03T00:00:00Z", "2027-01-04T00:00:00Z"},
		{"non-UTC now east of UTC", "2026-03-10T01:00:00+09:00", "", "2026-03-13T00:00:00Z", "2026-03-14T00:00:00Z"},
		{"override", "2026-03-10T12:00:00Z", "20260101", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"},
		{"override year end", "2026-03-10T12:00:00Z", "20261231", "2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"override leap day", "2026-03-10T12:00:00Z", "20240229", "2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"override ignores zero now", "", "20260315", "2026-03-15T00:00:00Z", "2026-03-16T00:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var now time.Time
			if tc.now != "" {
				now = ts(tc.now)
			}
			start, end, err := NotificationWindow(now, tc.override)
			require.NoError(t, err)
			if start != ts(tc.start) || end != ts(tc.end) {
				t.Fatalf("window = [%s, %s), want [%s, %s)", start, end, tc.start, tc.end)
			}
		})
	}
}

func TestNotificationWindowBadOverride(t *testing.T) {
	now := ts("2026-03-10T12:00:00Z")
	for _, in := range []string{
		"2026-01-01", "20261301", "20260230", "2026011", " 20260101", "abcdefgh",
		"20260100", "20260001", "00000101", "202601011", "20260101 ", "2026010a",
		"+2026010", "20250229", "19000229", "２0260101",
	} {
		start, end, err := NotificationWindow(now, in)
		var fe *FieldError
		if !errors.Is(err, ErrInvalidDate) || !errors.As(err, &fe) || fe.Field != "date" || fe.Value != in {
			t.Errorf("NotificationWindow(%q) err = %v, want FieldError date wrapping ErrInvalidDate", in, err)
		}
		if !start.IsZero() || !end.IsZero() {
			t.Errorf("NotificationWindow(%q) = [%s, %s) with an error", in, start, end)
		}
	}
	for _, in := range []string{"20000229", "20240229", "00010101", "99991231"} {
		if _, _, err := NotificationWindow(now, in); err != nil {
			t.Errorf("NotificationWindow(%q): %v", in, err)
		}
	}
	if _, _, err := NotificationWindow(time.Time{}, ""); !errors.Is(err, ErrInvalidDate) {
		t.Errorf("zero now: err = %v, want ErrInvalidDate", err)
	}
}

func FuzzNotificationWindowOverride(f *testing.F) {
	for _, s := range []string{"20260101", "20240229", "20250229", "2026-01-01", "20261301", "2026011", " 20260101", "abcdefgh", ""} {
		f.Add(s)
	}
	now := ts("2026-03-10T12:00:00Z")
	f.Fuzz(func(t *testing.T, s string) {
		start, end, err := NotificationWindow(now, s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidDate, "%q: error %v does not wrap ErrInvalidDate", s, err)
			return
		}
		if s != "" {
			if got := start.Format("20060102"); got != s {
				t.Fatalf("%q accepted as %s", s, got)
			}
		}
		if start.Location() != time.UTC || start.Hour() != 0 || start.Minute() != 0 || start.Second() != 0 || start.Nanosecond() != 0 {
			t.Fatalf("%q: start %s is not midnight UTC", s, start)
		}
		if end.Sub(start) != 24*time.Hour {
			t.Fatalf("%q: window [%s, %s) is not one day", s, start, end)
		}
	})
}

func FuzzParseBillingPeriod(f *testing.F) {
	for _, s := range []string{"01/2024", "12/9999", "00/2024", "13/2024", "1/2024", "01/24", "01/0000", "+1/2024", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		y, m, err := ParseBillingPeriod(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidDate, "%q: error %v does not wrap ErrInvalidDate", s, err)
			return
		}
		if got := BillingPeriod(time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)); got != s {
			t.Fatalf("%q parsed as %d-%d, formats as %q", s, y, m, got)
		}
	})
}
