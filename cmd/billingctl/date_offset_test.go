package main

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseNewBillingDate: every date flag of billingctl reads a time
// with an offset as the collector does, its wall-clock date and time in
// UTC: the offset never moves the day.
func TestParseNewBillingDate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		ok      bool
		want    time.Time
		dayOnly bool
	}{
		{in: "2025-04-16", ok: true, want: time.Date(2025, 4, 16, 0, 0, 0, 0, time.UTC), dayOnly: true},
		{in: "2025-04-16T09:30:00Z", ok: true, want: time.Date(2025, 4, 16, 9, 30, 0, 0, time.UTC)},
		{in: "2025-04-16T09:30:00+00:00", ok: true, want: time.Date(2025, 4, 16, 9, 30, 0, 0, time.UTC)},
		// Converted to UTC these would be the 15th at 19:30 and the 17th
		// at 10:30.
		{in: "2025-04-16T09:30:00+14:00", ok: true, want: time.Date(2025, 4, 16, 9, 30, 0, 0, time.UTC)},
		{in: "2025-04-16T23:30:00-11:00", ok: true, want: time.Date(2025, 4, 16, 23, 30, 0, 0, time.UTC)},
		{in: "2025-04-16T00:00:00+05:30", ok: true, want: time.Date(2025, 4, 16, 0, 0, 0, 0, time.UTC)},
		{in: "2025-04-16T09:30:00.25+14:00", ok: true, want: time.Date(2025, 4, 16, 9, 30, 0, 250_000_000, time.UTC)},
		{in: "2025-04-31", ok: false},
		{in: "20250416", ok: false},
		{in: "2025-04-16T09:30:00", ok: false},
		{in: "2025-04-16 09:30:00+14:00", ok: false},
		{in: "", ok: false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := parseNewBillingDate(tc.in)
			require.Equal(t, tc.ok, ok, "parsed %q: %+v", tc.in, got)
			if !ok {
				return
			}
			assert.Equal(t, tc.want, got.t, "parsed %q", tc.in)
			assert.Equal(t, time.UTC, got.t.Location(), "parsed %q", tc.in)
			assert.Equal(t, tc.dayOnly, got.dayOnly, "parsed %q", tc.in)
		})
	}
}

// TestDateOffsetKeepsTheDay: change-date, subscribe and reactivate given a
// time with a +14:00 or -11:00 offset store the billing date on the day
// and at the time written, in UTC, and say so in the preview.
func TestDateOffsetKeepsTheDay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.now = adminNow
	e.seed(
		rec("c1", "d1", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("c2", "d2", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("r1", "old1", "2024-03-01T15:00:00Z", billing.StatusCancelled, "7.99"),
		rec("r2", "old2", "2024-03-01T15:00:00Z", billing.StatusCancelled, "7.99"),
	)
	for _, tc := range []struct {
		name string
		user string
		args []string
		want time.Time // the stored billing date
		out  []string
	}{{
		name: "change-date +14:00", user: "c1",
		args: []string{"change-date", "d1", "--date", "2024-03-20T09:30:00+14:00"},
		want: time.Date(2024, 3, 20, 9, 30, 0, 0, time.UTC),
		out:  []string{"billing_date 2024-03-14T15:00:00Z -> 2024-03-20T09:30:00Z (anchor day 20)"},
	}, {
		name: "change-date -11:00", user: "c2",
		args: []string{"change-date", "d2", "--date", "2024-03-20T23:30:00-11:00"},
		want: time.Date(2024, 3, 20, 23, 30, 0, 0, time.UTC),
		out:  []string{"billing_date 2024-03-14T15:00:00Z -> 2024-03-20T23:30:00Z (anchor day 20)"},
	}, {
		name: "subscribe +14:00", user: "s1",
		args: []string{"subscribe", "s1", "--tier", "Plus:v2", "--amount", "4.99", "--first-date", "2024-03-20T09:30:00+14:00"},
		want: time.Date(2024, 3, 20, 9, 30, 0, 0, time.UTC),
		out:  []string{"billed 2024-03-20T09:30:00Z", "request key billingctl:Plus:v2:2024-03-20"},
	}, {
		name: "subscribe -11:00", user: "s2",
		args: []string{"subscribe", "s2", "--tier", "Plus:v2", "--amount", "4.99", "--first-date", "2024-03-20T23:30:00-11:00"},
		want: time.Date(2024, 3, 20, 23, 30, 0, 0, time.UTC),
		out:  []string{"billed 2024-03-20T23:30:00Z", "request key billingctl:Plus:v2:2024-03-20"},
	}, {
		name: "reactivate +14:00", user: "r1",
		args: []string{"reactivate", "r1", "--date", "2024-03-20T09:30:00+14:00"},
		want: time.Date(2024, 3, 20, 9, 30, 0, 0, time.UTC),
		out:  []string{"billed 2024-03-20T09:30:00Z"},
	}, {
		name: "reactivate -11:00", user: "r2",
		args: []string{"reactivate", "r2", "--date", "2024-03-20T23:30:00-11:00"},
		want: time.Date(2024, 3, 20, 23, 30, 0, 0, time.UTC),
		out:  []string{"billed 2024-03-20T23:30:00Z"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run("", append(tc.args, "--yes")...)
			r.want(t, exitOK, tc.out...)
			recs, err := e.repo.ListByUser(t.Context(), tc.user)
			require.NoError(t, err)
			var open []billing.Period
			for _, s := range recs {
				if s.Status == billing.StatusScheduled {
					open = append(open, s)
				}
			}
			require.Len(t, open, 1, "records of %s: %+v", tc.user, recs)
			got := open[0]
			assert.True(t, got.BillingDate.Equal(tc.want), "billing date %v, want %v", got.BillingDate, tc.want)
			assert.Equal(t, 20, got.BillingDate.UTC().Day(), "billing date %v", got.BillingDate)
			assert.Equal(t, 20, got.AnchorDay, "billing date %v anchor %d", got.BillingDate, got.AnchorDay)
		})
	}
}
