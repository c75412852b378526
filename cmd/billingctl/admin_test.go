package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAdminChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
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
		check func(t *testing.T, s billing.Subscription)
	}{{
		name: "waive", args: []string{"waive", "a1"},
		out: []string{"Change: waive a1: billing_status SCHEDULED -> WAIVED", "* billing_status WAIVED",
			"Created (the next period):", "2024-04-14T15:00:00Z"},
		check: func(t *testing.T, s billing.Subscription) {
			assert.Equal(t, billing.StatusWaived, s.Status, "status %s", s.Status)
		},
	}, {
		name: "cancel", args: []string{"cancel", "a2"},
		out: []string{"Change: cancel a2: billing_status ERROR -> CANCELLED", "* billing_status CANCELLED", "* completion_date"},
		check: func(t *testing.T, s billing.Subscription) {
			if s.Status != billing.StatusCancelled || s.CompletionDate.IsZero() {
				t.Errorf("status %s completion %v", s.Status, s.CompletionDate)
			}
		},
	}, {
		name: "pause", args: []string{"pause", "a3", "--months", "3"},
		out: []string{"PAUSED for 3 billing period(s)", "* billing_status PAUSED", "* pause_duration_months 3"},
		check: func(t *testing.T, s billing.Subscription) {
			if s.Status != billing.StatusPaused || s.PauseDurationMonths != 3 {
				t.Errorf("status %s months %d", s.Status, s.PauseDurationMonths)
			}
		},
	}, {
		name: "resume", args: []string{"resume", "a4"},
		out: []string{"billing_status PAUSED -> SCHEDULED (pause-resume)", "* billing_status SCHEDULED",
			"* updated_event pause-resume", "* pause_duration_months (removed; was 2)"},
		check: func(t *testing.T, s billing.Subscription) {
			if s.Status != billing.StatusScheduled || s.PauseDurationMonths != 0 {
				t.Errorf("status %s months %d", s.Status, s.PauseDurationMonths)
			}
		},
	}, {
		name: "change-date", args: []string{"change-date", "a5", "--date", "2024-03-20"},
		out: []string{"billing_date 2024-03-14T15:00:00Z -> 2024-03-20T15:00:00Z (anchor day 20)",
			"* billing_date 2024-03-20T15:00:00Z", "* billing_anchor_day 20"},
		check: func(t *testing.T, s billing.Subscription) {
			if !s.BillingDate.Equal(time.Date(2024, 3, 20, 15, 0, 0, 0, time.UTC)) || s.AnchorDay != 20 {
				t.Errorf("billing date %v anchor %d", s.BillingDate, s.AnchorDay)
			}
		},
	}, {
		name: "change-tier", args: []string{"change-tier", "a6", "--tier", "Premium:v1", "--amount", "9.99"},
		out: []string{"tier Plus:v2 -> Premium:v1, amount 4.99 -> 9.99", "* billing_amount 9.99", "* receipt_tier_name Premium:v1"},
		check: func(t *testing.T, s billing.Subscription) {
			if s.ReceiptTierName != "Premium:v1" || s.Amount != 999 {
				t.Errorf("tier %s amount %s", s.ReceiptTierName, s.Amount)
			}
		},
	}, {
		name: "change-tier downgrade", args: []string{"change-tier", "a7", "--tier", "Lite:v1", "--amount", "1.99", "--downgrade"},
		out: []string{"pending downgrade to Lite:v1 at 1.99", "* is_pending_downgrade true", "* billing_pending_amount 1.99",
			"\n billing_amount 4.99"},
		check: func(t *testing.T, s billing.Subscription) {
			if !s.IsPendingDowngrade || s.PendingTierName != "Lite:v1" || s.Amount != 499 {
				t.Errorf("downgrade %v %s amount %s", s.IsPendingDowngrade, s.PendingTierName, s.Amount)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.args[1]
			before := e.get(id)
			// Declined: nothing changes.
			r := e.run("n\n", tc.args...)
			r.want(t, exitFail, "Apply? [y/N]", "billingctl: aborted: nothing was changed")
			if !strings.Contains(r.stdout, "Before:") {
				t.Errorf("the record was not shown before asking:\n%s", r)
			}
			if s := e.get(id); layout.LastRunDateKey(&s) != layout.LastRunDateKey(&before) || s.Status != before.Status {
				t.Fatalf("declined change was applied: %+v", s)
			}
			// With --yes.
			r = e.run("", append(tc.args, "--yes")...)
			r.want(t, exitOK, append([]string{"Before:", "After (* changed):", "Applied: "}, tc.out...)...)
			if strings.Contains(r.stderr, "Apply?") {
				t.Errorf("asked despite --yes:\n%s", r)
			}
			tc.check(t, e.get(id))
		})
	}
}

func TestAdminConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.seed(rec("u1", "c1", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"))

	for _, answer := range []string{"", "no\n", "maybe\n", "\n"} {
		e.run(answer, "cancel", "c1").want(t, exitFail, "aborted")
	}
	if s := e.get("c1"); s.Status != billing.StatusScheduled {
		t.Fatalf("declined cancel applied: %s", s.Status)
	}
	e.run("Y\n", "cancel", "c1").want(t, exitOK, "* billing_status CANCELLED", "Applied: cancel c1")
	if s := e.get("c1"); s.Status != billing.StatusCancelled {
		t.Fatalf("confirmed cancel not applied: %s", s.Status)
	}
}

func TestAdminJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
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
	if got.Operation != "waive" || got.Before["billing_status"] != "SCHEDULED" || got.After["billing_status"] != "WAIVED" ||
		len(got.Created) != 1 || got.Created[0]["billing_date"] != "2024-04-14T15:00:00Z" {
		t.Errorf("waive JSON: %s", r)
	}
	assert.Equal(t, "", r.stderr, "stderr: %q", r.stderr)
}

func TestAdminErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.seed(
		rec("u1", "x1", "2024-03-14T15:00:00Z", billing.StatusCancelled, "4.99"),
		rec("u2", "x2", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u2", "x3", "2024-04-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u3", "x4", "2024-03-14T15:00:00Z", billing.StatusCompleted, "4.99"),
	)

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
		if s := e.get("x1"); layout.LastRunDateKey(&s) != "2024-03-11T15:00:00.000000000Z" {
			t.Errorf("record rewritten: %+v", s)
		}
	})
	t.Run("resume a record that is not paused", func(t *testing.T) {
		e.run("", "resume", "x4", "--yes").want(t, exitFail, "conflict: ", "record is COMPLETED")
	})
	t.Run("change-date onto another record", func(t *testing.T) {
		r := e.run("", "change-date", "x2", "--date", "2024-04-14T15:00:00Z", "--yes")
		r.want(t, exitFail, "billingctl: date out of order: ", "later period x3 (2024-04-14T15:00:00Z")
		if s := e.get("x2"); s.BillingDate.Month() != time.March {
			t.Errorf("record moved: %v", s.BillingDate)
		}
	})
	t.Run("change-date past the next period", func(t *testing.T) {
		r := e.run("", "change-date", "x2", "--date", "2024-05-01T15:00:00Z", "--yes")
		r.want(t, exitFail, "billingctl: date out of order: ", "2024-05-01T15:00:00Z", "later period x3 (2024-04-14T15:00:00Z")
		if s := e.get("x2"); s.BillingDate.Month() != time.March {
			t.Errorf("record moved: %v", s.BillingDate)
		}
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
		if s := e.get("x2"); s.Status != billing.StatusScheduled {
			t.Errorf("locked record changed: %s", s.Status)
		}
		e.run("", "pause", "x2", "--months", "1", "--yes").want(t, exitOK, "* billing_status PAUSED")
	})
}
