package main

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adminNow is the app's clock in the admin tests: the day after the
// records' billing dates, so the changes' window of billing dates does not
// move with the calendar.
var adminNow = time.Date(2024, 3, 15, 0, 0, 0, 0, time.UTC)

func TestAdminChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.now = adminNow
	paused := rec("u4", "a4", "2024-03-14T15:00:00Z", billing.StatusPaused, "4.99")
	paused.PauseDurationMonths = 2
	e.seed(
		rec("u1", "a1", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u2", "a2", "2024-03-14T15:00:00Z", billing.StatusError, "4.99"),
		rec("u3", "a3", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		paused,
		rec("u5", "a5", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u6", "a6", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u7", "a7", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
	)
	for _, tc := range []struct {
		name  string
		args  []string
		out   []string
		check func(t *testing.T, s billing.Period)
	}{{
		name: "waive", args: []string{"waive", "a1"},
		out: []string{"Change: waive a1: billing_status SCHEDULED -> WAIVED", "* billing_status WAIVED",
			"Created (the next period):", "2024-04-14T15:00:00Z"},
		check: func(t *testing.T, s billing.Period) {
			assert.Equal(t, billing.StatusWaived, s.Status, "status %s", s.Status)
		},
	}, {
		name: "cancel", args: []string{"cancel", "a2"},
		out: []string{"Change: cancel a2: billing_status ERROR -> CANCELLED", "* billing_status CANCELLED", "* completion_date"},
		check: func(t *testing.T, s billing.Period) {
			assert.Equal(t, billing.StatusCancelled, s.Status, "status %s completion %v", s.Status, s.CompletionDate)
			assert.False(t, s.CompletionDate.IsZero(), "status %s completion %v", s.Status, s.CompletionDate)
		},
	}, {
		name: "pause", args: []string{"pause", "a3", "--months", "3"},
		out: []string{"PAUSED for 3 billing period(s)", "* billing_status PAUSED", "* pause_duration_months 3"},
		check: func(t *testing.T, s billing.Period) {
			assert.Equal(t, billing.StatusPaused, s.Status, "status %s months %d", s.Status, s.PauseDurationMonths)
			assert.Equal(t, 3, s.PauseDurationMonths, "status %s months %d", s.Status, s.PauseDurationMonths)
		},
	}, {
		name: "resume", args: []string{"resume", "a4"},
		out: []string{"billing_status PAUSED -> SCHEDULED (pause-resume)", "* billing_status SCHEDULED",
			"* updated_event pause-resume", "* pause_duration_months (removed; was 2)"},
		check: func(t *testing.T, s billing.Period) {
			assert.Equal(t, billing.StatusScheduled, s.Status, "status %s months %d", s.Status, s.PauseDurationMonths)
			assert.Zero(t, s.PauseDurationMonths, "status %s months %d", s.Status, s.PauseDurationMonths)
		},
	}, {
		name: "change-date", args: []string{"change-date", "a5", "--date", "2024-03-20"},
		out: []string{"billing_date 2024-03-14T15:00:00Z -> 2024-03-20T15:00:00Z (anchor day 20)",
			"* billing_date 2024-03-20T15:00:00Z", "* billing_anchor_day 20"},
		check: func(t *testing.T, s billing.Period) {
			assert.True(t, s.BillingDate.Equal(time.Date(2024, 3, 20, 15, 0, 0, 0, time.UTC)), "billing date %v anchor %d", s.BillingDate, s.AnchorDay)
			assert.Equal(t, 20, s.AnchorDay, "billing date %v anchor %d", s.BillingDate, s.AnchorDay)
		},
	}, {
		name: "change-tier", args: []string{"change-tier", "a6", "--tier", "Premium:v1", "--amount", "9.99"},
		out: []string{"tier Plus:v2 -> Premium:v1, amount 4.99 -> 9.99", "* billing_amount 9.99", "* receipt_tier_name Premium:v1"},
		check: func(t *testing.T, s billing.Period) {
			assert.Equal(t, "Premium:v1", s.ReceiptTierName, "tier %s amount %s", s.ReceiptTierName, s.Amount)
			assert.Equal(t, billing.Amount(999), s.Amount, "tier %s amount %s", s.ReceiptTierName, s.Amount)
		},
	}, {
		name: "change-tier downgrade", args: []string{"change-tier", "a7", "--tier", "Lite:v1", "--amount", "1.99", "--downgrade"},
		out: []string{"pending downgrade to Lite:v1 at 1.99", "* is_pending_downgrade true", "* billing_pending_amount 1.99",
			"\n billing_amount 4.99"},
		check: func(t *testing.T, s billing.Period) {
			assert.True(t, s.IsPendingDowngrade, "downgrade %v %s amount %s", s.IsPendingDowngrade, s.PendingTierName, s.Amount)
			assert.Equal(t, "Lite:v1", s.PendingTierName, "downgrade %v %s amount %s", s.IsPendingDowngrade, s.PendingTierName, s.Amount)
			assert.Equal(t, billing.Amount(499), s.Amount, "downgrade %v %s amount %s", s.IsPendingDowngrade, s.PendingTierName, s.Amount)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.args[1]
			before := e.get(id)
			// Declined: nothing changes.
			r := e.run("n\n", tc.args...)
			r.want(t, exitFail, "Apply? [y/N]", "billingctl: aborted: nothing was changed")
			assert.Contains(t, r.stdout, "Before:", "the record was not shown before asking:\n%s", r)
			s := e.get(id)
			require.Equal(t, layout.LastRunDateKey(&before), layout.LastRunDateKey(&s), "declined change was applied: %+v", s)
			require.Equal(t, before.Status, s.Status, "declined change was applied: %+v", s)
			// With --yes.
			r = e.run("", append(tc.args, "--yes")...)
			r.want(t, exitOK, append([]string{"Before:", "After (* changed):", "Applied: "}, tc.out...)...)
			assert.NotContains(t, r.stderr, "Apply?", "asked despite --yes:\n%s", r)
			tc.check(t, e.get(id))
		})
	}
}

func TestAdminConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.now = adminNow
	e.seed(rec("u1", "c1", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"))

	for _, answer := range []string{"", "no\n", "maybe\n", "\n"} {
		e.run(answer, "cancel", "c1").want(t, exitFail, "aborted")
	}
	require.Equal(t, billing.StatusScheduled, e.get("c1").Status, "declined cancel applied")
	e.run("Y\n", "cancel", "c1").want(t, exitOK, "* billing_status CANCELLED", "Applied: cancel c1")
	require.Equal(t, billing.StatusCancelled, e.get("c1").Status, "confirmed cancel not applied")
}

func TestAdminJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.now = adminNow
	e.seed(rec("u1", "j1", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"))
	var got struct {
		Operation string           `json:"operation"`
		Before    map[string]any   `json:"before"`
		After     map[string]any   `json:"after"`
		Created   []map[string]any `json:"created"`
	}
	r := e.run("", "--json", "--yes", "waive", "j1")
	r.want(t, exitOK)
	r.decode(t, &got)
	assert.Equal(t, "waive", got.Operation, "waive JSON: %s", r)
	assert.Equal(t, "SCHEDULED", got.Before["billing_status"], "waive JSON: %s", r)
	assert.Equal(t, "WAIVED", got.After["billing_status"], "waive JSON: %s", r)
	if assert.Len(t, got.Created, 1, "waive JSON: %s", r) {
		assert.Equal(t, "2024-04-14T15:00:00Z", got.Created[0]["billing_date"], "waive JSON: %s", r)
	}
	assert.Equal(t, "", r.stderr, "stderr: %q", r.stderr)
}

func TestAdminErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.now = adminNow
	e.seed(
		rec("u1", "x1", "2024-03-14T15:00:00Z", billing.StatusCancelled, "4.99"),
		rec("u2", "x2", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u3", "x4", "2024-03-14T15:00:00Z", billing.StatusCompleted, "4.99"),
	)
	// u2's later period beside its open one, as a batch import writes it
	// (Add refuses a second open record of a legacy user).
	_, err := e.repo.AddAll(t.Context(), []billing.Period{rec("u2", "x3", "2024-04-14T15:00:00Z", billing.StatusScheduled, "4.99")})
	require.NoError(t, err, "seeding x3")

	t.Run("unknown ID", func(t *testing.T) {
		for _, args := range [][]string{{"waive", "nope"}, {"cancel", "nope"}, {"pause", "nope", "--months", "1"},
			{"resume", "nope"}, {"change-date", "nope", "--date", "2024-05-01"},
			{"change-tier", "nope", "--tier", "Plus:v2", "--amount", "1"}} {
			e.run("y\n", args...).want(t, exitFail, "billingctl: unknown subscription ID nope")
		}
	})
	t.Run("cancel a cancelled record", func(t *testing.T) {
		r := e.run("", "cancel", "x1", "--yes")
		r.want(t, exitFail, "billingctl: conflict: ", "record is CANCELLED")
		s := e.get("x1")
		assert.Equal(t, "2024-03-11T15:00:00.000000000Z", layout.LastRunDateKey(&s), "record rewritten: %+v", s)
	})
	t.Run("resume a record that is not paused", func(t *testing.T) {
		e.run("", "resume", "x4", "--yes").want(t, exitFail, "conflict: ", "record is COMPLETED")
	})
	t.Run("change-date onto another record", func(t *testing.T) {
		r := e.run("", "change-date", "x2", "--date", "2024-04-14T15:00:00Z", "--yes")
		r.want(t, exitFail, "billingctl: date out of order: ", "later period x3 (2024-04-14T15:00:00Z")
		assert.Equal(t, time.March, e.get("x2").BillingDate.Month(), "record moved")
	})
	t.Run("change-date past the next period", func(t *testing.T) {
		r := e.run("", "change-date", "x2", "--date", "2024-05-01T15:00:00Z", "--yes")
		r.want(t, exitFail, "billingctl: date out of order: ", "2024-05-01T15:00:00Z", "later period x3 (2024-04-14T15:00:00Z")
		assert.Equal(t, time.March, e.get("x2").BillingDate.Month(), "record moved")
	})
	t.Run("locked", func(t *testing.T) {
		locker, err := dynamostore.NewLocker(e.client, dynamostore.WithLockTable(e.tables.Locks))
		require.NoError(t, err)
		defer locker.Close(t.Context())
		lease, err := locker.Lock(t.Context(), "u2")
		require.NoError(t, err)
		r := e.run("", "pause", "x2", "--months", "1", "--yes")
		r.want(t, exitFail, "billingctl: locked: ", "try again later")
		require.NoError(t, lease.Release(t.Context()))
		assert.Equal(t, billing.StatusScheduled, e.get("x2").Status, "locked record changed")
		e.run("", "pause", "x2", "--months", "1", "--yes").want(t, exitOK, "* billing_status PAUSED")
	})
}

// TestAdminRefusesBeforePreview: a change the record's status does not
// allow, or an input the library refuses, is refused before the record is
// shown or a confirmation asked for, by every admin command.
func TestAdminRefusesBeforePreview(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.now = adminNow
	paused := rec("u4", "r4", "2024-03-14T15:00:00Z", billing.StatusPaused, "4.99")
	paused.PauseDurationMonths = 2
	e.seed(
		rec("u1", "r1", "2024-03-14T15:00:00Z", billing.StatusCompleted, "4.99"),
		rec("u2", "r2", "2024-03-14T15:00:00Z", billing.StatusCancelled, "4.99"),
		rec("u3", "r3", "2024-03-14T15:00:00Z", billing.StatusError, "4.99"),
		paused,
		rec("u5", "r5", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
	)
	_, err := e.repo.AddAll(t.Context(), []billing.Period{rec("u5", "r6", "2024-04-14T15:00:00Z", billing.StatusScheduled, "4.99")})
	require.NoError(t, err, "seeding r6")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"waive a completed record", []string{"waive", "r1"}, exitFail, []string{"billingctl: conflict: waive r1: ", "record is COMPLETED"}},
		{"cancel a cancelled record", []string{"cancel", "r2"}, exitFail, []string{"billingctl: conflict: cancel r2: ", "record is CANCELLED"}},
		{"pause a declined record", []string{"pause", "r3", "--months", "2"}, exitFail, []string{"conflict: pause r3: ", "record is ERROR"}},
		{"resume a scheduled record", []string{"resume", "r5"}, exitFail, []string{"conflict: resume r5: ", "record is SCHEDULED"}},
		{"move a completed record", []string{"change-date", "r1", "--date", "2024-03-20"}, exitFail, []string{"conflict: ", "record is COMPLETED"}},
		{"change a paused record's tier", []string{"change-tier", "r4", "--tier", "Premium:v1", "--amount", "9.99"}, exitFail, []string{"conflict: ", "record is PAUSED"}},
		{"reactivate a user with an open period", []string{"reactivate", "u5", "--date", "2024-05-20"}, exitFail, []string{"conflict: ", "open record r5 (SCHEDULED)"}},
		{"subscribe a user with an open period", []string{"subscribe", "u3", "--tier", "Plus:v2", "--amount", "4.99"}, exitFail, []string{"billingctl: open subscription: ", "is ERROR"}},
		{"an amount over the maximum charge", []string{"change-tier", "r5", "--tier", "Premium:v1", "--amount", "10000.01"}, exitUsage, []string{`billingctl: --amount "10000.01": billing: invalid amount: more than the largest charge allowed`}},
		{"a date older than the window", []string{"change-date", "r5", "--date", "2023-12-01"}, exitUsage, []string{`billingctl: --date "2023-12-01T15:00:00Z": billing: invalid date: before 2024-02-15`}},
		{"a date past the next period", []string{"change-date", "r5", "--date", "2024-04-20"}, exitFail, []string{"billingctl: date out of order: ", "later period r6 (2024-04-14T15:00:00Z"}},
		{"a reactivation too old", []string{"reactivate", "u2", "--date", "2023-12-01"}, exitUsage, []string{`billingctl: --date "2023-12-01T15:00:00Z": billing: invalid date`}},
		{"a subscription with a bad term", []string{"subscribe", "u9", "--tier", "Plus:v2", "--amount", "4.99", "--term", "daily"}, exitUsage, []string{`billingctl: --term "DAILY": billing: invalid term`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run("y\n", tc.args...) // asked, the operator would say yes
			r.want(t, tc.code, tc.want...)
			assert.Equal(t, "", r.stdout, "shown before refusing:\n%s", r)
			assert.NotContains(t, r.stderr, "Apply?", "asked before refusing:\n%s", r)
		})
	}
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5"} {
		s := e.get(id)
		assert.Equal(t, "2024-03-11T15:00:00.000000000Z", layout.LastRunDateKey(&s), "%s rewritten: %+v", id, s)
	}
	recs, err := e.repo.ListByUser(t.Context(), "u9")
	require.NoError(t, err)
	assert.Empty(t, recs, "u9 subscribed despite the refusal")
}
