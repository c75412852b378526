package main

import (
	"testing"
	"time"

	"github.com/dynabill/billing"

	"github.com/stretchr/testify/assert"
)

func TestNotifyPreview(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	cancelling := rec("u3", "n3", "2024-03-14T18:00:00Z", billing.StatusScheduled, "9.99")
	cancelling.UpdatedEvent = billing.UpdatedPendingCancellation
	e.seed(
		rec("u1", "n1", "2024-03-14T00:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u2", "n2", "2024-03-14T23:59:59Z", billing.StatusScheduled, "4.99"),
		cancelling,
		rec("u4", "n4", "2024-03-15T00:00:00Z", billing.StatusScheduled, "4.99"), // the next day
		rec("u5", "n5", "2024-03-13T23:59:59Z", billing.StatusScheduled, "4.99"), // the day before
		rec("u6", "n6", "2024-03-14T12:00:00Z", billing.StatusError, "4.99"),     // another status
	)

	r := e.run("", "notify", "preview", "--date", "20240314")
	r.want(t, exitOK, "SCHEDULED records billed in [2024-03-14T00:00:00Z, 2024-03-15T00:00:00Z)",
		"u1", "n1", "u2", "n2", "u3", "no: pending cancellation",
		"2 to message, 1 skipped (pending cancellation), 0 undecodable",
		"1 page in 1 scheduler invocation, 5 items read")
	for _, s := range []string{"n4", "n5", "n6"} {
		assert.NotContains(t, r.stdout, s, "%s is outside the window, yet listed:\n%s", s, r)
	}

	// A daily run notifies the records billed NoticeLeadDays later;
	// small pages make the scheduler hand back continuations.
	runDay := time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -billing.NoticeLeadDays)
	var got struct {
		WindowStart string      `json:"window_start"`
		Messages    []notifyRow `json:"messages"`
		ToMessage   int         `json:"to_message"`
		Skipped     int         `json:"skipped_pending_cancellation"`
		Pages       int         `json:"pages"`
		Invocations int         `json:"invocations"`
		ItemsRead   int         `json:"items_read"`
	}
	r = e.run("", "notify", "preview", "--run-date", runDay.Format("20060102"), "--page-size", "1", "--json")
	r.want(t, exitOK)
	r.decode(t, &got)
	preview := []any{"preview of the run on %s: %+v", runDay.Format(time.DateOnly), got}
	assert.Equal(t, "2024-03-14T00:00:00Z", got.WindowStart, preview...)
	assert.Equal(t, 2, got.ToMessage, preview...)
	assert.Equal(t, 1, got.Skipped, preview...)
	assert.Len(t, got.Messages, 3, preview...)
	assert.Equal(t, 5, got.ItemsRead, preview...)
	assert.GreaterOrEqual(t, got.Pages, 5, preview...)
	assert.GreaterOrEqual(t, got.Invocations, 2, preview...)
	for _, m := range got.Messages {
		if m.UserID == "u3" {
			assert.False(t, m.Notify, "u3's message: %+v", m)
			assert.Equal(t, "pending cancellation", m.Skip, "u3's message: %+v", m)
			assert.Equal(t, billing.Amount(999), m.Amount, "u3's message: %+v", m)
		}
	}

	r = e.run("", "notify", "preview", "--date", "20240314", "--status", "ERROR")
	r.want(t, exitOK, "ERROR records billed", "n6", "1 to message")

	e.run("", "notify", "preview", "--date", "20240399").want(t, exitUsage, `--date "20240399": want YYYYMMDD`)
	e.run("", "notify", "preview", "--date", "20240314", "--run-date", "20240310").want(t, exitUsage, "not both")
}

// TestNotifyPreviewOnAppClock: without --date or --run-date, the preview
// is of the run on the app clock's day (UTC), not the wall clock's.
func TestNotifyPreviewOnAppClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.seed(
		rec("u1", "n1", "2024-03-14T00:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u2", "n2", "2024-03-15T00:00:00Z", billing.StatusScheduled, "4.99"), // the next day
	)
	// Late on the run's day (UTC) and later still in a zone east of UTC:
	// the window counts from the UTC day.
	now := time.Date(2024, 3, 14, 23, 30, 0, 0, time.UTC).AddDate(0, 0, -billing.NoticeLeadDays).
		In(time.FixedZone("UTC+3", 3*60*60))

	r := e.runAt(now, "notify", "preview")
	r.want(t, exitOK, "SCHEDULED records billed in [2024-03-14T00:00:00Z, 2024-03-15T00:00:00Z)", "u1", "n1",
		"1 to message")
	assert.NotContains(t, r.stdout, "n2", "n2 is outside the window, yet listed:\n%s", r)

	var got struct {
		WindowStart string `json:"window_start"`
		ToMessage   int    `json:"to_message"`
	}
	r = e.runAt(now, "notify", "preview", "--json")
	r.want(t, exitOK)
	r.decode(t, &got)
	assert.Equal(t, "2024-03-14T00:00:00Z", got.WindowStart, "preview JSON: %s", r)
	assert.Equal(t, 1, got.ToMessage, "preview JSON: %s", r)
}
