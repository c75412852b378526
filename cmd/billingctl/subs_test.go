package main

import (
	"strings"
	"testing"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSubs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	feb := rec("u1", "sub-feb", "2024-02-14T15:00:00Z", billing.StatusCompleted, "4.99")
	feb.TransactionID = "tx-1"
	mar := rec("u1", "sub-mar", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99")
	mar.BillingWeek = 2
	e.seed(mar, feb, rec("u2", "sub-other", "2024-03-01T00:00:00Z", billing.StatusScheduled, "9.99"))

	t.Run("list", func(t *testing.T) {
		r := e.run("", "subs", "list", "u1")
		r.want(t, exitOK, "SUBSCRIPTION_ID", "sub-feb", "COMPLETED", "sub-mar", "SCHEDULED", "4.99", "Plus:v2", "MONTHLY")
		assert.LessOrEqual(t, strings.Index(r.stdout, "sub-feb"), strings.Index(r.stdout, "sub-mar"), "records not oldest first:\n%s", r)
		assert.NotContains(t, r.stdout, "sub-other", "another user's record listed:\n%s", r)
	})
	t.Run("list json", func(t *testing.T) {
		var items []map[string]any
		r := e.run("", "subs", "list", "--json", "u1")
		r.want(t, exitOK)
		r.decode(t, &items)
		require.Len(t, items, 2, "want 2 records, got %d:\n%s", len(items), r)
		got := items[1]
		assert.Equal(t, "sub-mar", got["subscription_id"], "record JSON: %v", got)
		assert.Equal(t, "4.99", got["billing_amount"], "record JSON: %v", got)
		assert.Equal(t, "SCHEDULED", got["billing_status"], "record JSON: %v", got)
		assert.Equal(t, "2024-03-14T15:00:00Z", got["billing_date"], "record JSON: %v", got)
		assert.Equal(t, float64(2), got["billing_week"], "record JSON: %v", got)
	})
	t.Run("list unknown user", func(t *testing.T) {
		e.run("", "subs", "list", "nobody").want(t, exitOK, "no records for user nobody")
		r := e.run("", "subs", "list", "nobody", "--json")
		r.want(t, exitOK)
		assert.Equal(t, "[]", strings.TrimSpace(r.stdout), "want [], got %s", r)
	})
	t.Run("get", func(t *testing.T) {
		r := e.run("", "subs", "get", "sub-feb")
		r.want(t, exitOK, "subscription_id", "sub-feb", "billing_status", "COMPLETED", "transaction_id", "tx-1",
			"last_run_date", "2024-02-11T15:00:00.000000000Z")
		var item map[string]any
		r = e.run("", "--json", "subs", "get", "sub-mar")
		r.want(t, exitOK)
		r.decode(t, &item)
		assert.Equal(t, "u1", item["user_id"], "record JSON: %v", item)
		assert.Equal(t, "03/2024", item["billing_period"], "record JSON: %v", item)
		assert.Equal(t, "Plus:v2", item["receipt_tier_name"], "record JSON: %v", item)
	})
	t.Run("get unknown ID", func(t *testing.T) {
		r := e.run("", "subs", "get", "nope")
		r.want(t, exitFail, "billingctl: unknown subscription ID nope")
		assert.Equal(t, "", r.stdout, "output on stdout: %s", r)
	})
	t.Run("missing table", func(t *testing.T) {
		r := runCLI(t, "", "--endpoint", e.endpoint, "--table", "no-such-table", "subs", "get", "sub-feb")
		r.want(t, exitFail, "table not found")
	})
}

func TestHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.seed(rec("u1", "sub-1", "2024-03-14T15:00:00Z", billing.StatusScheduled, "4.99"),
		rec("u1", "sub-0", "2024-02-14T15:00:00Z", billing.StatusCompleted, "4.99"))
	e.run("", "cancel", "sub-1", "--yes").want(t, exitOK)

	r := e.run("", "history", "sub-1")
	r.want(t, exitOK, "WRITTEN", "SCHEDULED", "CANCELLED", "2024-03-11T15:00:00.000Z")
	// The cancel's row names its change; the seeded row, written by no
	// engine call, shows none.
	assert.Regexp(t, `(?m)^WRITTEN +CHANGE +SUBSCRIPTION_ID`, r.stdout)
	assert.Regexp(t, `(?m) subscription_cancelled +sub-1 .* CANCELLED `, r.stdout)
	assert.Regexp(t, `(?m) - +sub-1 .* SCHEDULED `, r.stdout)
	assert.Equal(t, 2, strings.Count(r.stdout, "sub-1"), "want two rows of sub-1, oldest first:\n%s", r)
	assert.LessOrEqual(t, strings.Index(r.stdout, "SCHEDULED"), strings.Index(r.stdout, "CANCELLED"), "want two rows of sub-1, oldest first:\n%s", r)
	assert.NotContains(t, r.stdout, "sub-0", "another record's rows listed:\n%s", r)

	var rows []map[string]any
	r = e.run("", "history", "sub-1", "--json")
	r.want(t, exitOK)
	r.decode(t, &rows)
	if assert.Len(t, rows, 2, "history JSON: %v", rows) {
		assert.Equal(t, "CANCELLED", rows[1]["billing_status"], "history JSON: %v", rows)
		assert.Equal(t, "2024-03-11T15:00:00.000000000Z", rows[0]["last_run_date"], "history JSON: %v", rows)
	}

	r = e.run("", "history", "--user", "u1")
	r.want(t, exitOK, "sub-0", "sub-1")
	assert.Equal(t, 4, strings.Count(r.stdout, "\n"), "want three rows:\n%s", r) // header and three rows

	e.run("", "history", "nope").want(t, exitFail, "unknown subscription ID nope")
	e.run("", "history", "--user", "nobody").want(t, exitOK, "no history rows")
}
