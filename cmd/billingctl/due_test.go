package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seedDue adds records around 2024-03-15 in every status the runs query,
// and some they never read.
func seedDue(e *testEnv) {
	e.t.Helper()
	noRetry := rec("u7", "e2", "2024-03-12T00:00:00Z", billing.StatusError, "4.99")
	noRetry.NoRetry = true
	retriedToday := rec("u8", "e3", "2024-03-14T00:00:00Z", billing.StatusError, "4.99")
	retriedToday.LastRunDate = time.Date(2024, 3, 15, 12, 0, 0, 0, time.UTC)
	paused2 := rec("u10", "p1", "2024-03-05T00:00:00Z", billing.StatusPaused, "4.99")
	paused2.PauseDurationMonths = 2
	paused1 := rec("u11", "p2", "2024-03-15T10:00:00Z", billing.StatusPaused, "4.99")
	paused1.PauseDurationMonths = 1
	pausedLater := rec("u12", "p3", "2024-04-05T00:00:00Z", billing.StatusPaused, "4.99")
	pausedLater.PauseDurationMonths = 1
	e.seed(
		rec("u1", "s1", "2024-03-15T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u2", "s2", "2024-03-01T00:00:00Z", billing.StatusScheduled, "9.99"),
		rec("u3", "s3", "2024-01-20T00:00:00Z", billing.StatusScheduled, "0.01"), // older than 30 days
		rec("u4", "s4", "2024-03-16T00:00:00Z", billing.StatusScheduled, "4.99"), // not due yet
		rec("u5", "s5", "2024-04-01T00:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u6", "e1", "2024-03-10T00:00:00Z", billing.StatusError, "4.99"),
		noRetry, retriedToday,
		rec("u9", "e4", "2023-12-01T00:00:00Z", billing.StatusError, "4.99"), // before the lookback
		paused2, paused1, pausedLater,
		rec("u1", "c1", "2024-02-15T15:00:00Z", billing.StatusCompleted, "4.99"),
	)
}

type dueJSON struct {
	IndexMode string       `json:"index_mode"`
	Runs      []dueSummary `json:"runs"`
	Total     dueSummary   `json:"total"`
}

func TestDue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode                   string
		schedRead, retryRead   int
		oldRead                int // the retry run's ERROR records older than its window
		pauseRead, totalRead   int
		schedRatio, totalRatio string
		schedPages2            int // pages with --page-size 2
	}{
		// Legacy: every record of the status is read, billing_date filters.
		{mode: "legacy", schedRead: 5, retryRead: 4, oldRead: 4, pauseRead: 3, totalRead: 16, schedRatio: "1.67", totalRatio: "1.78", schedPages2: 3},
		// Sorted: the date range is a key condition.
		{mode: "sorted", schedRead: 3, retryRead: 3, oldRead: 1, pauseRead: 2, totalRead: 9, schedRatio: "1.00", totalRatio: "1.00", schedPages2: 2},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.mode)
			seedDue(e)

			// Runs at 23:59 on the 15th: everything billed on the 15th
			// or before, and the 15th's retries done.
			var got dueJSON
			r := e.run("", "due", "--date", "2024-03-15", "--time", "23:59", "--json")
			r.want(t, exitOK)
			r.decode(t, &got)
			require.Equal(t, tc.mode, got.IndexMode, "due JSON: %s", r)
			// The retry run reads three queries, as the collector's does:
			// its window, ACH debits past their deadline, older ERRORs.
			require.Len(t, got.Runs, 5, "due JSON: %s", r)
			sched, retry, ach, old, pause := got.Runs[0], got.Runs[1], got.Runs[2], got.Runs[3], got.Runs[4]
			check := func(s dueSummary, run string, records int, amount string, read int) {
				t.Helper()
				msg := []any{"%s run: %+v, want %d records, amount %s, %d items read", run, s, records, amount, read}
				assert.Equal(t, run, s.Run, msg...)
				assert.Equal(t, records, s.Records, msg...)
				assert.Equal(t, amount, s.Amount.String(), msg...)
				assert.Equal(t, read, s.ItemsRead, msg...)
				assert.Equal(t, records, s.ItemsReturned, msg...)
				assert.Zero(t, s.Invalid, msg...)
				assert.NotNil(t, s.ReadPerReturned, msg...)
			}
			check(sched, "scheduled", 3, "14.99", tc.schedRead)
			check(retry, "retry", 3, "14.97", tc.retryRead)
			assert.Equal(t, "ACHSENT", ach.Status, "retry run's ACH query: %+v", ach)
			assert.Zero(t, ach.Records, "retry run's ACH query: %+v", ach)
			check(old, "retry", 1, "4.99", tc.oldRead) // e4, billed before the window: marked stale
			check(pause, "pause", 2, "9.98", tc.pauseRead)
			check(got.Total, "total", 9, "44.93", tc.totalRead)
			wantActions := func(s dueSummary, want ...dueAction) {
				t.Helper()
				if !assert.Len(t, s.Actions, len(want), "%s actions: %+v, want %+v", s.Run, s.Actions, want) {
					return
				}
				for _, w := range want {
					assert.Contains(t, s.Actions, w, "%s actions: %+v, want %+v", s.Run, s.Actions, w)
				}
			}
			wantActions(sched, dueAction{"collect", 2, 1498}, dueAction{"mark stale", 1, 1})
			wantActions(retry, dueAction{"retry", 1, 499}, dueAction{"skip (declined as final)", 1, 499},
				dueAction{"skip (retry policy: not now)", 1, 499})
			wantActions(old, dueAction{"mark stale", 1, 499})
			wantActions(pause, dueAction{"skip period, stay paused", 1, 499}, dueAction{"skip period, then resume", 1, 499})

			r = e.run("", "due", "--date", "2024-03-15", "--time", "23:59")
			r.want(t, exitOK, "Runs at 2024-03-15T23:59:00Z on "+e.tables.Subscriptions+", index "+e.tables.StatusIndex,
				"Due: records billed before 2024-03-15T23:59:00Z",
				"READ_PER_RETURNED", tc.schedRatio, tc.totalRatio, "44.93",
				"scheduled run (SCHEDULED with billing_date < 2024-03-15T23:59:00Z): ",
				"collect 2 (14.98)", "mark stale 1 (0.01)",
				"retry run (ERROR with billing_date > 2024-02-07T23:59:00Z): ")

			// Smaller pages; one run.
			r = e.run("", "due", "--date", "2024-03-15", "--time", "23:59", "--run", "scheduled", "--page-size", "2", "--json")
			r.want(t, exitOK)
			got = dueJSON{}
			r.decode(t, &got)
			if assert.Len(t, got.Runs, 1, "scheduled run with 2 items per page: %+v, want %d pages", got.Runs, tc.schedPages2) {
				assert.Equal(t, tc.schedPages2, got.Runs[0].Pages, "scheduled run with 2 items per page: %+v, want %d pages", got.Runs, tc.schedPages2)
				assert.Equal(t, 3, got.Runs[0].Records, "scheduled run with 2 items per page: %+v, want %d pages", got.Runs, tc.schedPages2)
			}

			// A run at noon: s1, billed at 15:00, is not due yet.
			r = e.run("", "due", "--at", "2024-03-15T12:00:00Z", "--run", "scheduled", "--json")
			r.want(t, exitOK)
			got = dueJSON{}
			r.decode(t, &got)
			assert.Equal(t, 2, got.Runs[0].Records, "scheduled run at noon: %+v", got.Runs[0])
			assert.Equal(t, billing.Amount(1000), got.Runs[0].Amount, "scheduled run at noon: %+v", got.Runs[0])
		})
	}
}

// TestDueOnAppClock: without --date or --at, due previews runs now by the
// app clock (to the second), not the wall clock.
func TestDueOnAppClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	seedDue(e)
	now := time.Date(2024, 3, 15, 16, 30, 0, 250, time.UTC)

	r := e.runAt(now, "due")
	r.want(t, exitOK, "Runs at 2024-03-15T16:30:00Z on ", "Due: records billed before 2024-03-15T16:30:00Z",
		"scheduled run (SCHEDULED with billing_date < 2024-03-15T16:30:00Z): ", "collect 2 (14.98)", "mark stale 1 (0.01)",
		"retry run (ERROR with billing_date > 2024-02-07T16:30:00Z): ")
	assert.NotContains(t, r.stdout, time.Now().UTC().Format(time.DateOnly), "due printed the wall clock's day:\n%s", r)

	var got struct {
		Now   string     `json:"now"`
		Total dueSummary `json:"total"`
	}
	r = e.runAt(now, "due", "--json")
	r.want(t, exitOK)
	r.decode(t, &got)
	assert.Equal(t, "2024-03-15T16:30:00Z", got.Now, "due JSON: %s", r)
	assert.Equal(t, 9, got.Total.Records, "due JSON: %s", r)
	assert.Equal(t, "44.93", got.Total.Amount.String(), "due JSON: %s", r)
}

func TestDueEmptyAndToday(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	r := e.run("", "due")
	r.want(t, exitOK, "Runs at "+time.Now().UTC().Format(time.DateOnly)+"T", "nothing to do")
	var got dueJSON
	r = e.run("", "due", "--json", "--run", "retry")
	r.want(t, exitOK)
	r.decode(t, &got)
	assert.Zero(t, got.Total.Records, "empty table: %+v", got)
	assert.Nil(t, got.Total.ReadPerReturned, "empty table: %+v", got)
	assert.Equal(t, 1, got.Runs[0].Pages, "empty table: %+v", got)
	assert.Equal(t, "", r.stderr, "stderr is not a terminal, yet something was drawn: %q", r.stderr)
}

func TestProgress(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.False(t, isTerminal(&buf), "a buffer is not a terminal")
	now := time.Unix(0, 0)
	p := &progress{w: &buf, on: true, label: "due: scheduled", now: func() time.Time { return now }}
	p.update(1, 100, 3)
	p.update(2, 200, 5) // within 100ms: not drawn
	now = now.Add(time.Second)
	p.update(3, 300, 7)
	p.finish()
	out := buf.String()
	for _, s := range []string{"\rdue: scheduled [====", "page 1, 100 items read, 3 returned", "page 3, 300 items read, 7 returned", "\r\x1b[K"} {
		assert.Contains(t, out, s, "progress output lacks %q", s)
	}
	assert.NotContains(t, out, "page 2", "redrawn within 100ms")
	var off bytes.Buffer
	q := &progress{w: &off, now: time.Now}
	q.update(1, 1, 1)
	q.finish()
	assert.Equal(t, 0, off.Len(), "disabled progress drew %q", off.String())
}

// TestDueAgreesWithTheRun: what is due is one rule. due previews a run at
// an instant, and a record billed at 18:00 is not due for a run at noon
// but is for a run at 19:00: exactly what Collector.Run collects at those
// instants on the same tables.
func TestDueAgreesWithTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.seed(
		rec("u1", "morning", "2024-03-15T11:00:00Z", billing.StatusScheduled, "1.00"),
		rec("u2", "evening", "2024-03-15T18:00:00Z", billing.StatusScheduled, "2.00"),
	)
	hist, err := dynamostore.NewHistory(dynamostore.Config{Client: e.client, Tables: e.tables})
	require.NoError(t, err)
	clock := billingtest.NewClock(time.Time{})
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	col, err := billing.NewCollector(billing.Config{Repository: e.repo, History: hist, Provider: pay, Clock: clock,
		Locker: billingtest.NewLocker(clock, time.Minute)})
	require.NoError(t, err)

	for _, tc := range []struct {
		at      time.Time
		args    []string
		id      string
		amount  string
		query   string
		charged []string
	}{
		{at: time.Date(2024, 3, 15, 12, 0, 0, 0, time.UTC), args: []string{"--date", "2024-03-15", "--time", "12:00"},
			amount: "1.00", query: "SCHEDULED with billing_date < 2024-03-15T12:00:00Z", charged: []string{"morning"}},
		{at: time.Date(2024, 3, 15, 19, 0, 0, 0, time.UTC), args: []string{"--at", "2024-03-15T19:00:00Z"},
			amount: "2.00", query: "SCHEDULED with billing_date < 2024-03-15T19:00:00Z", charged: []string{"morning", "evening"}},
	} {
		var got dueJSON
		r := e.run("", append([]string{"due", "--run", "scheduled", "--json"}, tc.args...)...)
		r.want(t, exitOK)
		r.decode(t, &got)
		require.Len(t, got.Runs, 1, "due at %v: %s", tc.at, r)
		s := got.Runs[0]
		assert.Equal(t, tc.query, s.Query, "due at %v: %+v", tc.at, s)
		assert.Equal(t, 1, s.Records, "due at %v: %+v", tc.at, s)
		assert.Equal(t, tc.amount, s.Amount.String(), "due at %v: %+v", tc.at, s)
		assert.Equal(t, []dueAction{{"collect", 1, billing.MustParseAmount(tc.amount)}}, s.Actions, "due at %v: %+v", tc.at, s)

		// The run at the same instant collects exactly that.
		clock.Set(tc.at)
		rep, err := col.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
		require.NoError(t, err, "run at %v", tc.at)
		assert.Equal(t, s.Records, rep.Collected, "run at %v: %+v, preview %+v", tc.at, rep, s)
		var charged []string
		for _, c := range pay.Charges() {
			charged = append(charged, c.SubscriptionID)
		}
		assert.Equal(t, tc.charged, charged, "charges after the run at %v", tc.at)
	}
}
