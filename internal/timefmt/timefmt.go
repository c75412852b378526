// Package timefmt encodes timestamps for the legacy tables so that string
// order equals time order.
//
// Go's time.RFC3339Nano trims trailing zeros from the fraction, so
// "2024-01-01T00:00:05.5Z" sorts before "2024-01-01T00:00:05Z" although it is
// later. Sort keys and every attribute used in a key or range condition must
// therefore be written in a fixed width:
//
//   - [Seconds]: whole seconds, "2006-01-02T15:04:05Z" (billing_date, as in
//     existing items);
//   - [Nanos]: a fixed nine-digit fraction, "2006-01-02T15:04:05.000000000Z"
//     (last_run_date and the other run timestamps; still valid RFC3339Nano).
//
// Both are UTC and only defined for years 0000–9999, where fixed-width strings
// compare like the instants they encode. [Parse] accepts every RFC3339 form
// (any fraction width, any offset) and returns UTC.
package timefmt

import (
	"errors"
	"fmt"
	"time"
)

const (
	// SecondsLayout is the layout of [Seconds].
	SecondsLayout = "2006-01-02T15:04:05Z"
	// NanosLayout is the layout of [Nanos].
	NanosLayout = "2006-01-02T15:04:05.000000000Z"
)

// ErrRange reports a time outside the years 0000–9999.
var ErrRange = errors.New("time outside years 0000-9999")

// Check returns the error [Seconds] and [Nanos] return for t, if any: a
// time outside the years 0000–9999, wrapping [ErrRange].
func Check(t time.Time) error { return checkRange(t) }

func checkRange(t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%w: %d", ErrRange, y)
	}
	return nil
}

// Seconds formats t in UTC with whole seconds, truncating any fraction.
func Seconds(t time.Time) (string, error) {
	if err := checkRange(t); err != nil {
		return "", err
	}
	var b [len(SecondsLayout)]byte
	return string(appendFixed(b[:0], t.UTC(), false)), nil
}

// Nanos formats t in UTC with a fixed nine-digit fraction.
func Nanos(t time.Time) (string, error) {
	if err := checkRange(t); err != nil {
		return "", err
	}
	var b [len(NanosLayout)]byte
	return string(appendFixed(b[:0], t.UTC(), true)), nil
}

// AppendSeconds appends [Seconds] of t to dst: the same text, without a
// string of its own, and written digit by digit (no layout to interpret).
func AppendSeconds(dst []byte, t time.Time) ([]byte, error) {
	if err := checkRange(t); err != nil {
		return dst, err
	}
	return appendFixed(dst, t.UTC(), false), nil
}

// AppendNanos appends [Nanos] of t to dst.
func AppendNanos(dst []byte, t time.Time) ([]byte, error) {
	if err := checkRange(t); err != nil {
		return dst, err
	}
	return appendFixed(dst, t.UTC(), true), nil
}

// appendFixed appends t, in UTC and in years 0000–9999, as SecondsLayout
// or, with nanos, NanosLayout.
func appendFixed(b []byte, t time.Time, nanos bool) []byte {
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	if nanos {
		b = append(b, '.')
		b = appendDigits(b, t.Nanosecond(), 9)
	}
	return append(b, 'Z')
}

// appendDigits appends n >= 0 in exactly width decimal digits.
func appendDigits(b []byte, n, width int) []byte {
	var d [9]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[:width]...)
}

// Parse reads any RFC3339 timestamp ("Z" or a numeric offset, with or
// without a fraction of any width) and returns it in UTC.
func Parse(s string) (time.Time, error) {
	if t, ok := parseFixed(s); ok {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("not an RFC3339 timestamp: %q", s)
	}
	return t.UTC(), nil
}

// parseFixed reads s when it is in one of the two forms this package
// writes ([SecondsLayout], [NanosLayout]) and denotes a valid time, as
// time.Parse reads it, without interpreting a layout; ok is false for
// anything else, which time.Parse then reads or rejects.
func parseFixed(s string) (t time.Time, ok bool) {
	const form = "dddd-dd-ddTdd:dd:dd"
	if (len(s) != len(SecondsLayout) && len(s) != len(NanosLayout)) || s[len(s)-1] != 'Z' {
		return t, false
	}
	num := func(from, to int) (int, bool) {
		n := 0
		for i := from; i < to; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	for i := range len(form) {
		if form[i] != 'd' && s[i] != form[i] {
			return t, false
		}
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 7)
	day, ok3 := num(8, 10)
	hour, ok4 := num(11, 13)
	minute, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	nsec := 0
	ok7 := true
	if len(s) == len(NanosLayout) {
		if s[19] != '.' {
			return t, false
		}
		nsec, ok7 = num(20, 29)
	}
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(time.Month(month), year) || hour > 23 || minute > 59 || sec > 59 {
		return t, false
	}
	days := daysFromCivil(year, month, day)
	return time.Unix(days*86400+int64(hour*3600+minute*60+sec), int64(nsec)).UTC(), true
}

// daysFromCivil returns the days from 1970-01-01 to year-month-day in the
// proleptic Gregorian calendar (H. Hinnant's days_from_civil), which is
// what time.Date computes, without its normalization.
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400                     // [0, 399]
	mp := int64((month + 9) % 12)          // March = 0
	doy := (153*mp+2)/5 + int64(day) - 1   // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468
}

// daysIn returns the number of days of month in year (proleptic
// Gregorian, as package time counts).
func daysIn(month time.Month, year int) int {
	switch month {
	case time.February:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}
