package notice_test

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/assert"
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

func TestWindow(t *testing.T) {
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
			start, end, err := notice.Window(now, tc.override)
			require.NoError(t, err)
			require.Equal(t, ts(tc.start), start, "window = [%s, %s), want [%s, %s)", start, end, tc.start, tc.end)
			require.Equal(t, ts(tc.end), end, "window = [%s, %s), want [%s, %s)", start, end, tc.start, tc.end)
		})
	}
}

func TestWindowBadOverride(t *testing.T) {
	now := ts("2026-03-10T12:00:00Z")
	for _, in := range []string{
		"2026-01-01", "20261301", "20260230", "2026011", " 20260101", "abcdefgh",
		"20260100", "20260001", "00000101", "202601011", "20260101 ", "2026010a",
		"+2026010", "20250229", "19000229", "２0260101",
	} {
		start, end, err := notice.Window(now, in)
		var fe *billing.FieldError
		assert.ErrorIs(t, err, billing.ErrInvalidDate, "Window(%q) err = %v, want FieldError date wrapping billing.ErrInvalidDate", in, err)
		if assert.ErrorAs(t, err, &fe, "Window(%q) err = %v, want FieldError date wrapping billing.ErrInvalidDate", in, err) {
			assert.Equal(t, "date", fe.Field, "Window(%q) err = %v", in, err)
			assert.Equal(t, in, fe.Value, "Window(%q) err = %v", in, err)
		}
		assert.True(t, start.IsZero(), "Window(%q) = [%s, %s) with an error", in, start, end)
		assert.True(t, end.IsZero(), "Window(%q) = [%s, %s) with an error", in, start, end)
	}
	for _, in := range []string{"20000229", "20240229", "00010101", "99991231"} {
		_, _, err := notice.Window(now, in)
		assert.NoError(t, err, "Window(%q)", in)
	}
	_, _, err := notice.Window(time.Time{}, "")
	assert.ErrorIs(t, err, billing.ErrInvalidDate, "zero now: err = %v, want billing.ErrInvalidDate", err)
}

func FuzzWindowOverride(f *testing.F) {
	for _, s := range []string{"20260101", "20240229", "20250229", "2026-01-01", "20261301", "2026011", " 20260101", "abcdefgh", ""} {
		f.Add(s)
	}
	now := ts("2026-03-10T12:00:00Z")
	f.Fuzz(func(t *testing.T, s string) {
		start, end, err := notice.Window(now, s)
		if err != nil {
			require.ErrorIs(t, err, billing.ErrInvalidDate, "%q: error %v does not wrap billing.ErrInvalidDate", s, err)
			return
		}
		if s != "" {
			require.Equal(t, s, start.Format("20060102"), "%q accepted as another date", s)
		}
		require.Same(t, time.UTC, start.Location(), "%q: start %s is not midnight UTC", s, start)
		require.Zero(t, start.Hour(), "%q: start %s is not midnight UTC", s, start)
		require.Zero(t, start.Minute(), "%q: start %s is not midnight UTC", s, start)
		require.Zero(t, start.Second(), "%q: start %s is not midnight UTC", s, start)
		require.Zero(t, start.Nanosecond(), "%q: start %s is not midnight UTC", s, start)
		require.Equal(t, 24*time.Hour, end.Sub(start), "%q: window [%s, %s) is not one day", s, start, end)
	})
}
