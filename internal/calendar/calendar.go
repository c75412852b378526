// Package calendar is the date arithmetic of the engine's schedules that
// holds no billing rule: the Fridays of a month and the length of a month.
// The root, the simulators and the conformance suites share it.
package calendar

import "time"

// NthFriday returns the n-th Friday of the given month at midnight UTC.
// When the month has fewer than n Fridays (n is 5 in a month with four) it
// returns the month's last Friday; n below 1 is treated as 1. year and month
// are normalised as by [time.Date].
func NthFriday(year int, month time.Month, n int) time.Time {
	first := time.Date(year, month, 1, 0, 0, 0, 0, time.UTC)
	year, month = first.Year(), first.Month()
	n = max(n, 1)
	offset := (int(time.Friday) - int(first.Weekday()) + 7) % 7 // days to the first Friday
	day := 1 + offset + 7*(n-1)
	for day > DaysIn(year, month) {
		day -= 7
	}
	return time.Date(year, month, day, 0, 0, 0, 0, time.UTC)
}

// FridayWeek reports which Friday of its month t falls on, 1..5, judged in
// UTC; it returns 0 when t is not a Friday. It is the inverse of [NthFriday]
// for the Fridays that exist: FridayWeek(NthFriday(y, m, n)) == n when the
// month has an n-th Friday.
func FridayWeek(t time.Time) int {
	t = t.UTC()
	if t.Weekday() != time.Friday {
		return 0
	}
	return (t.Day()-1)/7 + 1
}

// DaysIn returns the number of days of the month.
func DaysIn(year int, month time.Month) int {
	return time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
