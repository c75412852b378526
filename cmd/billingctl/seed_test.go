package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/dynabill/billing/internal/dynamotest"
)

// TestDayOneBothLayouts walks a host's first day on each layout: create
// the tables from one --tables prefix, seed them (twice: the second run
// writes nothing), list a user, see what the scheduled run would collect,
// and read a record's history.
func TestDayOneBothLayouts(t *testing.T) {
	for _, c := range []struct{ layout, user string }{
		{"legacy", "seed-user-04"},
		{"single", "seed-acct-04#seed-plan-04#PLUS"},
	} {
		t.Run(c.layout, func(t *testing.T) {
			t.Parallel()
			endpoint, client := dynamotest.Endpoint(t), dynamotest.Client(t)
			prefix := dynamotest.TableName(t, "day1")
			tables := []string{prefix + "-activity", prefix + "-activity-history", prefix + "-locks"}
			if c.layout == "single" {
				tables = []string{prefix, prefix + "-locks"}
			}
			dropTables(t, client, tables...)
			cli := cliWith(t, "--endpoint", endpoint, "--layout", c.layout, "--tables", prefix)
			r := cli("tables", "create")
			r.want(t, exitOK, append(tables, "created")...)

			r = cli("seed", "--users", "6", "--now", "2025-03-14")
			r.want(t, exitOK, "seed-00-due", "seed-02-declined", "ERROR", "seed-03-paused", "PAUSED", "seed-05-yearly", "created")
			assert.NotContains(t, r.stdout, "exists")
			r = cli("seed", "--users", "6", "--now", "2025-03-14")
			r.want(t, exitOK, "exists")
			assert.NotContains(t, r.stdout, "created", "a second seed writes nothing")

			cli("subs", "list", c.user).want(t, exitOK, "seed-04-paid", "COMPLETED", "seed-04-next", "SCHEDULED")
			cli("due", "--run", "scheduled", "--date", "2025-03-14").want(t, exitOK,
				"scheduled SCHEDULED 2 108.99", "collect 2 (108.99)")
			cli("history", "seed-04-paid").want(t, exitOK, "seed-04-paid", "COMPLETED", "txn-seed-04")
		})
	}
}

// TestSeedOnAppClock: without --now, seed builds its sample around the app
// clock's day (UTC), not the wall clock's.
func TestSeedOnAppClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	now := time.Date(2025, 3, 14, 5, 0, 0, 0, time.UTC)
	var got []seedRecord
	r := e.runAt(now, "seed", "--users", "2", "--json")
	r.want(t, exitOK)
	r.decode(t, &got)
	dates := map[string]string{}
	for _, s := range got {
		dates[s.ID] = s.Date
	}
	assert.Equal(t, map[string]string{
		"seed-00-due":   "2025-03-13T23:00:00Z", // an hour before the day
		"seed-01-later": "2025-03-24T00:00:00Z", // ten days later
	}, dates, "seed JSON: %s", r)
	// The same sample as --now gives: a rerun writes nothing.
	r = e.run("", "seed", "--users", "2", "--now", "2025-03-14", "--json")
	r.want(t, exitOK)
	assert.NotContains(t, r.stdout, "created", "seed --now 2025-03-14 after the clock's seed: %s", r)
}

// TestSeedRefusesAWSWithoutYes: seed is for local servers.
func TestSeedRefusesAWSWithoutYes(t *testing.T) {
	var env = func(k string) string { return "" }
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"seed"}, nil, &out, &errb, env)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errb.String(), "--yes")
}
