package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pacingLine is a line of billingctl pacing; pacingCallsLine, of pacing
// --calls.
var (
	pacingLine      = regexp.MustCompile(`^pacing K=(\d+) shared (\d+\.\d) % span (\d+h\d\dm) static (\d+\.\d) % span (\d+h\d\dm)$`)
	pacingCallsLine = regexp.MustCompile(`^pacing calls K=(\d+) shared (\d+\.\d) % span (\d+h\d\dm) busiest second (\d+) ` +
		`\(missed windows (\d+), 429s (\d+), deaths (\d+)\) static (\d+\.\d) % span (\d+h\d\dm) busiest second (\d+)$`)
)

// pacingLines checks that out is one line of re a K, in the order of ks,
// each maybe followed by a bound line, and returns each line's
// submatches.
func pacingLines(t *testing.T, re *regexp.Regexp, out string, ks ...int) [][]string {
	t.Helper()
	var lines []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(line, "bound K=") {
			lines = append(lines, line)
		}
	}
	require.Len(t, lines, len(ks), "one line a K:\n%s", out)
	var got [][]string
	for i, line := range lines {
		m := re.FindStringSubmatch(line)
		require.NotNil(t, m, "line %q is not a pacing line", line)
		assert.Equal(t, strconv.Itoa(ks[i]), m[1], line)
		got = append(got, m)
	}
	return got
}

// percent parses an efficiency of a line.
func percent(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return v
}

// spanMinutes parses a span of a line, 11h07m, to minutes.
func spanMinutes(t *testing.T, s string) int {
	t.Helper()
	h, m, ok := strings.Cut(strings.TrimSuffix(s, "m"), "h")
	require.True(t, ok, s)
	hours, err := strconv.Atoi(h)
	require.NoError(t, err)
	minutes, err := strconv.Atoi(m)
	require.NoError(t, err)
	return 60*hours + minutes
}

// docsLines returns the lines of docs/capacity.md that start with prefix.
func docsLines(t *testing.T, prefix string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "capacity.md"))
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return out
}

// TestPacing runs billingctl pacing at its default size (4M charges at
// 100/s, K = 8, 32 and 128; well under a second): one line a K, the
// shared budget at 99 % or more and within 1 % of the 11h07m the limit
// allows, the static split printed beside it, slower; and the lines are
// those docs/capacity.md shows. Not in -race builds (about 12 s of CPU
// there): CI's pacing step runs it.
func TestPacing(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	r := runCLI(t, "", "pacing")
	r.want(t, exitOK)
	assert.Empty(t, r.stderr)
	for _, m := range pacingLines(t, pacingLine, r.stdout, 8, 32, 128) {
		shared, static := percent(t, m[2]), percent(t, m[4])
		assert.GreaterOrEqual(t, shared, 99.0, m[0])
		span := spanMinutes(t, m[3])
		assert.GreaterOrEqual(t, span, 666, "at least the 11h06m40s the limit allows: %s", m[0])
		assert.LessOrEqual(t, span, 673, "within 1 %% of 11h06m40s: %s", m[0])
		assert.Less(t, static, shared, m[0])
	}
	assert.Equal(t, docsLines(t, "pacing K="), strings.Split(strings.TrimSpace(r.stdout), "\n"),
		"docs/capacity.md shows what billingctl pacing prints")
}

// skipUnderRace skips a test of the pacing model's output under -race,
// where the model takes 12 to 15 s instead of under one; CI's pacing step
// runs it without -race.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("the pacing model takes 12 to 15 s under -race: .ci/run's pacing step runs this without it")
	}
}

// TestPacingFlags: the flags reach the model; a small call model run has
// the --calls line, the shared budget never over the limit a second.
func TestPacingFlags(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	r := runCLI(t, "", "pacing", "--processes", "8", "--limit", "50", "--charges", "1000000", "--seed", "2")
	r.want(t, exitOK)
	m := pacingLines(t, pacingLine, r.stdout, 8)[0]
	assert.GreaterOrEqual(t, percent(t, m[2]), 99.0, m[0])
	assert.Equal(t, "5h33m", m[3], "1,000,000 at 50/s is 5h33m20s, and a bit under a minute: %s", m[0])

	r = runCLI(t, "", "pacing", "--calls", "--processes", "4,8", "--charges", "200000")
	r.want(t, exitOK)
	for _, m := range pacingLines(t, pacingCallsLine, r.stdout, 4, 8) {
		assert.GreaterOrEqual(t, percent(t, m[2]), 95.0, m[0])
		busiest, err := strconv.Atoi(m[4])
		require.NoError(t, err)
		assert.LessOrEqual(t, busiest, 100, m[0])
		assert.Less(t, percent(t, m[8]), percent(t, m[2]), m[0])
	}
}

// TestPacingJSON: --json has a row a K with both budgets' measures.
func TestPacingJSON(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	r := runCLI(t, "", "--json", "pacing", "--processes", "8,16", "--charges", "200000", "--calls")
	r.want(t, exitOK)
	var got struct {
		Inputs struct {
			Limit   int  `json:"limit"`
			Charges int  `json:"charges"`
			Calls   bool `json:"calls"`
		} `json:"inputs"`
		Rows []pacingRow `json:"rows"`
	}
	r.decode(t, &got)
	assert.Equal(t, 100, got.Inputs.Limit)
	assert.Equal(t, 200_000, got.Inputs.Charges)
	assert.True(t, got.Inputs.Calls)
	require.Len(t, got.Rows, 2, r.stdout)
	for i, k := range []int{8, 16} {
		row := got.Rows[i]
		assert.Equal(t, k, row.Processes)
		for _, run := range []pacingRun{row.Shared, row.Static} {
			assert.Equal(t, 200_000, run.Charges, "K=%d: every record charged", k)
			assert.Positive(t, run.SpanSeconds, "K=%d", k)
			assert.InDelta(t, 100*200_000/(100*float64(run.SpanSeconds)), run.EfficiencyPercent, 1e-9, "K=%d", k)
		}
		assert.LessOrEqual(t, row.Shared.BusiestSecond, 100, "K=%d", k)
		assert.Positive(t, row.Shared.RateLimited, "K=%d: the 429 bursts", k)
		assert.Positive(t, row.Shared.Deaths, "K=%d: one process dies in a fleet of fewer than 20", k)
		assert.Greater(t, row.Static.SpanSeconds, row.Shared.SpanSeconds, "K=%d", k)
	}
}

// pacingDocsRuns are the runs of billingctl pacing --calls whose lines
// docs/capacity.md shows, in its order: the default 100/s day, 1,000/s
// (the skew at its default 3x and at 5x) and 25/s; each at 99 % or more
// (98 % for the 5x skew) with no second over its limit.
var pacingDocsRuns = []struct {
	args  []string
	limit int
	least float64
}{
	{[]string{"pacing", "--calls"}, 100, 99},
	{[]string{"pacing", "--calls", "--limit", "1000", "--charges", "1000000"}, 1000, 99},
	{[]string{"pacing", "--calls", "--limit", "1000", "--charges", "1000000", "--skew", "5"}, 1000, 98},
	{[]string{"pacing", "--calls", "--limit", "25", "--charges", "1000000"}, 25, 99},
}

// TestPacingCallsMatchesDocs runs billingctl pacing --calls at its
// default size and at 1,000/s and 25/s (about 50 s, so only with
// BILLING_LONG_TESTS set): each K's shared budget paces at the least its
// run asks with no second over the limit, no line says the fleet is
// bound, and docs/capacity.md shows exactly these lines.
func TestPacingCallsMatchesDocs(t *testing.T) {
	if !dynamotest.LongTests() || raceEnabled {
		t.Skipf("about 50 s: %s=1 runs it (not in -race builds)", dynamotest.LongEnv)
	}
	t.Parallel()
	var got []string
	for _, run := range pacingDocsRuns {
		r := runCLI(t, "", run.args...)
		r.want(t, exitOK)
		assert.NotContains(t, r.stdout, "bound K=", "%v: the default workers keep the limit", run.args)
		for _, m := range pacingLines(t, pacingCallsLine, r.stdout, 8, 32, 128) {
			assert.GreaterOrEqual(t, percent(t, m[2]), run.least, "%v: %s", run.args, m[0])
			busiest, err := strconv.Atoi(m[4])
			require.NoError(t, err)
			assert.LessOrEqual(t, busiest, run.limit, "%v: %s", run.args, m[0])
			got = append(got, m[0])
		}
	}
	assert.Equal(t, docsLines(t, "pacing calls K="), got,
		"docs/capacity.md shows what billingctl pacing --calls prints")
}

// TestPacingBound: a fleet too small for the limit (1,000/s, 40 workers a
// process) has a bound line after each K's line saying what binds it,
// and the --workers it names paces at 99 %; in JSON too.
func TestPacingBound(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	r := runCLI(t, "", "pacing", "--calls", "--processes", "8", "--limit", "1000", "--charges", "200000", "--workers", "40")
	r.want(t, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	m := pacingCallsLine.FindStringSubmatch(lines[0])
	require.NotNil(t, m, lines[0])
	bound := regexp.MustCompile(`^bound K=8: at most (\d+\.\d) %: from \d+h\d\dm (\d+) process(es have| has) records left, 40 workers each at 345 ms a collection make 116 calls a second: \d+ of the limit's 1000 \(--workers (\d+): 99 % but for faults\)$`)
	b := bound.FindStringSubmatch(lines[1])
	require.NotNil(t, b, lines[1])
	assert.InDelta(t, percent(t, m[2]), percent(t, b[1]), 3, "the bound is what the run made: %s", r.stdout)
	workers := b[4]

	r = runCLI(t, "", "pacing", "--calls", "--processes", "8", "--limit", "1000", "--charges", "200000", "--workers", workers)
	r.want(t, exitOK)
	assert.NotContains(t, r.stdout, "bound K=")
	m = pacingLines(t, pacingCallsLine, r.stdout, 8)[0]
	assert.GreaterOrEqual(t, percent(t, m[2]), 95.0, "with --workers %s: %s", workers, m[0])

	r = runCLI(t, "", "--json", "pacing", "--processes", "8", "--limit", "1000", "--charges", "200000", "--workers", "40")
	r.want(t, exitOK)
	var got struct {
		Rows []pacingRow `json:"rows"`
	}
	r.decode(t, &got)
	require.Len(t, got.Rows, 1)
	require.NotNil(t, got.Rows[0].Bound, r.stdout)
	assert.Equal(t, 1, got.Rows[0].Bound.ProcessesLeft, "the one-second model: the 3x shard alone at the end, 125 a second")
	assert.Equal(t, 320, int(got.Rows[0].Bound.CycleMillis))
	assert.Contains(t, got.Rows[0].Bound.Line, "bound K=8: ")
	assert.Less(t, got.Rows[0].Bound.EfficiencyPercent, 99.0)
}

func TestPacingUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--processes", "0"}, "--processes 0: want 1 to 100000"},
		{[]string{"--processes", "8,x"}, `"x" is not a whole number`},
		{[]string{"--limit", "0"}, "--limit 0: want at least 1"},
		{[]string{"--charges", "99"}, "--charges 99: want at least --limit, 100"},
		{[]string{"--charges", "2000000", "--limit", "1"}, "--charges 2000000 at --limit 1: want a day of at most 1000000 s"},
		{[]string{"--workers", "-1", "--calls"}, "--workers -1: want at least 1 (0: by --limit)"},
		{[]string{"--skew", "0"}, "--skew 0: want 1 to 100"},
		{[]string{"--batch", "-1"}, "--batch -1: want at least 1"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		r := runCLI(t, "", append([]string{"pacing"}, tc.args...)...)
		r.want(t, exitUsage, tc.want, "Run 'billingctl help pacing' for usage.")
		assert.Empty(t, r.stdout, "%v", tc.args)
	}
}

func TestPacingHelp(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "help", "pacing")
	r.want(t, exitOK, "Usage: billingctl pacing [--processes 8,32,128]", "--calls", "--charges", "(default 4000000)")
	r = runCLI(t, "", "help")
	r.want(t, exitOK, "pacing how well a fleet keeps the processor at its limit")
}
