package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
)

// fakeClock is the clock of a paced command: time moves only when the
// command sleeps. onSleep, if set, runs on each sleep (numbered from 1)
// and may cancel the command or fail the sleep.
type fakeClock struct {
	now     time.Time
	sleeps  []time.Duration
	onSleep func(n int) error
}

func (c *fakeClock) hook(a *app) {
	a.now = func() time.Time { return c.now }
	a.sleep = func(ctx context.Context, d time.Duration) error {
		c.sleeps = append(c.sleeps, d)
		c.now = c.now.Add(d)
		if c.onSleep != nil {
			return c.onSleep(len(c.sleeps))
		}
		return ctx.Err()
	}
}

// runApp runs billingctl like runCLI, with ctx and with hook applied to
// the app first (its clock, say).
func runApp(t *testing.T, ctx context.Context, hook func(*app), args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errb, env: noEnv}
	hook(a)
	code := a.exit(a.main(args))
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

var resumeLine = regexp.MustCompile(`resume: (billingctl .* index backfill.* --from (\S+))\n`)

// resumeToken returns the command and token of the last resume line of
// stderr.
func resumeToken(t *testing.T, r result) (cmd, token string) {
	t.Helper()
	m := resumeLine.FindAllStringSubmatch(r.stderr, -1)
	require.NotEmpty(t, m, "no resume line:\n%s", r)
	last := m[len(m)-1]
	return last[1], last[2]
}

// TestIndexBackfillMigration moves a legacy table to the due index the
// way an operator would: tables without it, seeded records, a backfill
// that creates the index and is interrupted after two pages, a resume
// whose page fails, a resume to the end, a second pass that updates
// nothing; then the runs read the same records from the due index as
// from the legacy status index.
func TestIndexBackfillMigration(t *testing.T) {
	t.Parallel()
	endpoint, client := dynamotest.Endpoint(t), dynamotest.Client(t)
	prefix := dynamotest.TableName(t, "backfill")
	dropTables(t, client, prefix+"-activity", prefix+"-activity-history", prefix+"-locks")
	global := []string{"--endpoint", endpoint, "--layout", "legacy", "--tables", prefix}
	cli := cliWith(t, global...)

	// Tables without the due index, and records written without due keys.
	cli("tables", "create", "--due-shards", "0").want(t, exitOK, prefix+"-activity", "created")
	cli("seed", "--users", "12", "--now", "2025-03-14").want(t, exitOK, "created")
	r := cli("--due-shards", "4", "tables", "describe")
	r.want(t, exitFail, "tables differ")
	assert.Contains(t, r.stdout, "DIFFERS: index billing_due-billing_date-index (billing_due:S HASH, billing_date:S RANGE) is missing")
	var before dueJSON
	r = cli("due", "--date", "2025-03-14", "--status-index", "legacy", "--json")
	r.want(t, exitOK)
	r.decode(t, &before)
	require.Equal(t, 4, before.Runs[0].Records, "scheduled records due on 2025-03-14: %s", r)

	// Reading the due index before any backfill is refused by the table:
	// there is no index yet.
	cli("--due-shards", "4", "--status-index", "due", "due", "--date", "2025-03-14").want(t, exitFail)

	// A first pass that creates the index, paced at 4 items a second in
	// pages of 2, interrupted (Ctrl-C) in the pause after its second page.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clock := &fakeClock{now: time.Unix(1e9, 0), onSleep: func(n int) error {
		if n == 2 {
			cancel()
			return context.Canceled
		}
		return nil
	}}
	r = runApp(t, ctx, clock.hook, append(slices.Clone(global), "--due-shards", "4", "index", "backfill", "--create-index", "--page", "2", "--rate", "4")...)
	r.want(t, exitFail, "creating index billing_due-billing_date-index (billing_due:S HASH, billing_date:S RANGE) on "+prefix+"-activity",
		"index billing_due-billing_date-index is ACTIVE",
		"backfill: 1 page, 2 scanned,", "backfill: 2 pages, 4 scanned,",
		"backfill stopped after 2 pages: 4 scanned,", "index backfill interrupted: context canceled")
	assert.Equal(t, []time.Duration{500 * time.Millisecond, 500 * time.Millisecond}, clock.sleeps, "2 items a page at 4 a second")
	assert.Empty(t, r.stdout, "no summary for an interrupted pass")
	cmd, token := resumeToken(t, r)
	assert.Equal(t, "billingctl --endpoint "+endpoint+" --layout legacy --tables "+prefix+" --due-shards 4 index backfill --page 2 --rate 4 --from "+token, cmd)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	assert.Contains(t, lines[len(lines)-3], "backfill: 2 pages", "the last page's line:\n%s", r)
	assert.Contains(t, lines[len(lines)-3], "--from "+token, "the interruption resumes where the last page's line says:\n%s", r)
	updated := countUpdated(t, r.stderr)

	// The index now exists; describe agrees with the definition (the
	// table's other attribute definitions survived UpdateTable).
	cli("--due-shards", "4", "tables", "describe").want(t, exitOK, "billing_due-billing_date-index billing_due:S HASH, billing_date:S RANGE projection ALL ACTIVE")

	// A token belongs to its table and shard count.
	cli("--due-shards", "8", "index", "backfill", "--from", token).want(t, exitUsage, "--from: not a token of a backfill of "+prefix+"-activity with --due-shards 8")
	cli("--due-shards", "4", "index", "backfill", "--from", "garbage").want(t, exitUsage, "--from: not a token")

	// Resuming; the page after the first fails (the context ends while
	// the command paces), and the line says where to retry.
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	clock = &fakeClock{now: time.Unix(1e9, 0), onSleep: func(int) error { cancel2(); return nil }}
	r = runApp(t, ctx2, clock.hook, append(slices.Clone(global), "--due-shards", "4", "index", "backfill", "--page", "2", "--rate", "4", "--from", token)...)
	r.want(t, exitFail, "backfill: 1 page, 2 scanned,", "backfill stopped after 1 page: 2 scanned,", "index backfill: page 2 failed", "context canceled")
	updated += countUpdated(t, r.stderr)
	_, retry := resumeToken(t, r)
	m := resumeLine.FindAllStringSubmatch(r.stderr, -1)
	require.Len(t, m, 2, "a line for the page and one for the failure:\n%s", r)
	assert.Equal(t, m[0][2], retry, "the failed page is retried from where the last good page ended")
	assert.NotEqual(t, token, retry)

	// Resuming to the end, unpaced.
	r = cli("--due-shards", "4", "index", "backfill", "--rate", "0", "--from", retry)
	r.want(t, exitOK, prefix+"-activity billing_due-billing_date-index ACTIVE 4 --from", "Run again to confirm: a pass that updates 0 items means reads can switch to --status-index due.")
	assert.Contains(t, r.stderr, "done: the scan reached the end of the table")
	updated += countUpdated(t, r.stderr)
	var sum backfillSummary
	r = cli("--due-shards", "4", "index", "backfill", "--rate", "0", "--from", retry, "--json")
	r.want(t, exitOK)
	r.decode(t, &sum)
	assert.Equal(t, 0, sum.Updated, "a rerun of the same stretch writes nothing: %+v", sum)
	// 12 users: 14 records, 12 in a status runs read (the 2 others COMPLETED).
	assert.Equal(t, 12, updated, "every record in a due status was keyed once")

	// A second full pass updates nothing: reads may switch.
	r = cli("--due-shards", "4", "index", "backfill", "--json")
	r.want(t, exitOK)
	sum = backfillSummary{}
	r.decode(t, &sum)
	assert.Equal(t, backfillSummary{Table: prefix + "-activity", Index: "billing_due-billing_date-index", DueShards: 4, IndexStatus: "ACTIVE",
		Pages: 1, Scanned: 14, Clean: true,
		Hint: "a full pass updated 0 items: every record has its due key; reads can switch to --status-index due (with --due-shards 4)"}, sum)
	cli("--due-shards", "4", "index", "backfill", "--create-index").want(t, exitOK, "A full pass updated 0 items")

	// The runs read the same records from the due index.
	requireSameRunsFromDueIndex(t, before, cli("due", "--date", "2025-03-14", "--status-index", "due", "--due-shards", "4", "--json"))
	cli("due", "--run", "scheduled", "--date", "2025-03-14", "--status-index", "due", "--due-shards", "4").want(t, exitOK,
		"index billing_due-billing_date-index (due: 4 shards, one query per shard, billing_date is a key condition)",
		"scheduled SCHEDULED 4 217.98 0 4 4 1.00", "collect 4 (217.98)")

	// Record by record, through the library.
	legacy, err := dynamostore.NewRepository(dynamostore.Config{Client: client, Tables: dynamostore.TableConfig{
		Subscriptions: prefix + "-activity", History: prefix + "-activity-history"}})
	require.NoError(t, err)
	due, err := dynamostore.NewRepository(dynamostore.Config{Client: client, Tables: dynamostore.TableConfig{
		Subscriptions: prefix + "-activity", History: prefix + "-activity-history", DueShards: 4, StatusIndexMode: dynamostore.StatusIndexDue}})
	require.NoError(t, err)
	for _, st := range []billing.Status{billing.StatusScheduled, billing.StatusError, billing.StatusPaused} {
		q := billing.StatusQuery{Status: st, Before: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
		want, got := statusIDs(t, legacy, q), statusIDs(t, due, q)
		assert.NotEmpty(t, want, st)
		assert.Equal(t, want, got, "%s records, legacy index and due index", st)
	}
}

// TestIndexBackfillSingleTable moves a single table to the due index:
// a table without it, seeded periods, a backfill that creates the index
// and keys the periods in a due status, a second pass that updates
// nothing; then the runs read the same records from the due index as
// from the payment-index walk, one item read per record.
func TestIndexBackfillSingleTable(t *testing.T) {
	t.Parallel()
	endpoint, client := dynamotest.Endpoint(t), dynamotest.Client(t)
	prefix := dynamotest.TableName(t, "single-backfill")
	dropTables(t, client, prefix, prefix+"-locks")
	global := []string{"--endpoint", endpoint, "--layout", "single", "--tables", prefix}
	cli := cliWith(t, global...)
	cli("tables", "create").want(t, exitOK, "created")
	cli("seed", "--users", "12", "--now", "2025-03-14").want(t, exitOK, "created")
	var before dueJSON
	r := cli("due", "--date", "2025-03-14", "--json")
	r.want(t, exitOK)
	r.decode(t, &before)
	require.Equal(t, 4, before.Runs[0].Records, "scheduled records due on 2025-03-14: %s", r)

	r = cli("--due-shards", "4", "index", "backfill", "--create-index", "--page", "5", "--rate", "0")
	r.want(t, exitOK, prefix+" billing_due-billing_date-index ACTIVE 4 start")
	for _, line := range []string{"creating index billing_due-billing_date-index (billing_due:S HASH, billing_date:S RANGE) on " + prefix,
		"index billing_due-billing_date-index is ACTIVE", "done: the scan reached the end of the table"} {
		assert.Contains(t, r.stderr, line)
	}
	assert.Equal(t, 12, countUpdated(t, r.stderr), "every period in a due status keyed once:\n%s", r)
	var sum backfillSummary
	r = cli("--due-shards", "4", "index", "backfill", "--json")
	r.want(t, exitOK)
	r.decode(t, &sum)
	assert.True(t, sum.Clean, "a second pass updates nothing: %+v", sum)
	assert.Zero(t, sum.Updated)

	requireSameRunsFromDueIndex(t, before, cli("--due-shards", "4", "--status-index", "due", "due", "--date", "2025-03-14", "--json"))
}

var updatedCount = regexp.MustCompile(`(\d+) updated, \d+ changed; (?:resume|done)`)

// countUpdated returns the items a backfill updated by its last progress
// line (0 without one).
func countUpdated(t *testing.T, stderr string) int {
	t.Helper()
	m := updatedCount.FindAllStringSubmatch(stderr, -1)
	if len(m) == 0 {
		return 0
	}
	n, err := strconv.Atoi(m[len(m)-1][1])
	require.NoError(t, err)
	return n
}

// statusIDs returns the sorted subscription IDs of every page of q.
func statusIDs(t *testing.T, repo billing.Repository, q billing.StatusQuery) []string {
	t.Helper()
	var ids []string
	for {
		page, err := repo.QueryStatus(t.Context(), q)
		require.NoError(t, err)
		for _, s := range page.Items {
			ids = append(ids, s.SubscriptionID)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	slices.Sort(ids)
	return ids
}

// TestIndexBackfillRefuses: the flags that make no sense, and AWS without
// --yes.
func TestIndexBackfillRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no shards", []string{"index", "backfill"}, exitUsage, "index backfill needs --due-shards K"},
		{"zero shards", []string{"--due-shards", "0", "index", "backfill"}, exitUsage, "needs --due-shards K"},
		{"negative shards", []string{"--due-shards", "-1", "index", "backfill"}, exitUsage, "--due-shards -1: want 0 to 1024"},
		{"too many shards", []string{"index", "backfill", "--due-shards", "1025"}, exitUsage, "--due-shards 1025: want 0 to 1024"},
		{"zero page", []string{"--due-shards", "4", "index", "backfill", "--page", "0"}, exitUsage, "--page 0: want at least 1"},
		{"negative rate", []string{"--due-shards", "4", "index", "backfill", "--rate", "-5"}, exitUsage, "--rate -5"},
		{"extra argument", []string{"--due-shards", "4", "index", "backfill", "now"}, exitUsage, `unexpected argument "now"`},
		{"group without subcommand", []string{"index"}, exitUsage, `"index" needs a subcommand: backfill`},
		{"single table without shards", []string{"--layout", "single", "index", "backfill"}, exitUsage, "index backfill needs --due-shards K"},
		{"single table sorted", []string{"--layout", "single", "--status-index", "sorted", "due"}, exitUsage, "the single table has no sorted status index"},
		{"single table due mode without shards", []string{"--layout", "single", "--status-index", "due", "due"}, exitUsage, "--status-index due needs --due-shards K"},
		{"due mode without shards", []string{"--status-index", "due", "due"}, exitUsage, "--status-index due needs --due-shards K"},
		{"AWS without yes", []string{"--due-shards", "4", "index", "backfill", "--create-index"}, exitFail, "no --endpoint (or DYNAMODB_ENDPOINT) means AWS: to go ahead, pass --yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, "", tc.args...)
			r.want(t, tc.code, tc.want)
			assert.Empty(t, r.stdout)
			if tc.code == exitUsage {
				assert.Contains(t, r.stderr, "Run 'billingctl help")
			} else {
				assert.NotContains(t, r.stderr, "for usage", "a runtime error, not a usage error")
			}
		})
	}
}

// TestBackfillCommand: the resume line repeats the flags that name the
// tables and the pace, quoted for a shell, but not an endpoint taken
// from the environment.
func TestBackfillCommand(t *testing.T) {
	t.Parallel()
	a := &app{g: globals{endpoint: "http://127.0.0.1:8000", layout: "legacy", table: "my table", dueShards: 8, yes: true}}
	assert.Equal(t, "billingctl --endpoint http://127.0.0.1:8000 --layout legacy --table 'my table' --due-shards 8 --yes index backfill --rate 100 --from T0k-_",
		a.backfillCommand(defaultBackfillPage, 100, "T0k-_"))
	a = &app{g: globals{endpoint: "http://127.0.0.1:8000", tablesPrefix: "demo", dueShards: 8, json: true}, endpointFromEnv: true}
	assert.Equal(t, "billingctl --tables demo --due-shards 8 --json index backfill --page 50 --from T",
		a.backfillCommand(50, defaultBackfillRate, "T"))
	assert.Equal(t, `'it'\''s'`, shellQuote("it's"))
}

// TestTablesCreateDueIndex: with --due-shards, tables create makes the
// due index, and says how to add it to an existing table that lacks it.
func TestTablesCreateDueIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy") // without the due index
	e.run("", "--due-shards", "4", "tables", "create").want(t, exitOK, "exists", "'billingctl index backfill --create-index'")

	client := dynamotest.Client(t)
	prefix := dynamotest.TableName(t, "due")
	dropTables(t, client, prefix+"-activity", prefix+"-activity-history", prefix+"-locks")
	cli := cliWith(t, "--endpoint", e.endpoint, "--tables", prefix, "--due-shards", "4")
	cli("tables", "create").want(t, exitOK, prefix+"-activity", "created")
	cli("tables", "describe").want(t, exitOK, "index: billing_due-billing_date-index billing_due:S HASH, billing_date:S RANGE projection ALL")
	r := cli("tables", "create")
	r.want(t, exitOK, "exists")
	assert.NotContains(t, r.stdout, "index backfill", "the table has the index")

	// Written with due keys from the start: the backfill has nothing to
	// do, and the due mode reads what the legacy mode reads.
	cli("seed", "--users", "6", "--now", "2025-03-14").want(t, exitOK, "created")
	r = cli("index", "backfill")
	r.want(t, exitOK, "A full pass updated 0 items")
	assert.NotContains(t, r.stderr, "note:", "the index exists")
	cli("due", "--run", "scheduled", "--date", "2025-03-14", "--status-index", "due").want(t, exitOK, "collect 2 (108.99)")
	cli("due", "--run", "scheduled", "--date", "2025-03-14").want(t, exitOK, "collect 2 (108.99)")
}

// requireSameRunsFromDueIndex checks that r, a `due --json` on the due
// index, shows the runs of before, read from the legacy index, reading
// only the records that are due.
func requireSameRunsFromDueIndex(t *testing.T, before dueJSON, r result) {
	t.Helper()
	var after dueJSON
	r.want(t, exitOK)
	r.decode(t, &after)
	assert.Equal(t, "due", after.IndexMode)
	require.Len(t, after.Runs, len(before.Runs))
	for i, b := range before.Runs {
		a := after.Runs[i]
		assert.Equal(t, []any{b.Run, b.Records, b.Amount, b.Actions, b.Invalid}, []any{a.Run, a.Records, a.Amount, a.Actions, a.Invalid}, "run %s", b.Run)
		assert.Equal(t, a.Records, a.ItemsRead, "%s run: the due index reads only what is due", a.Run)
	}
}
