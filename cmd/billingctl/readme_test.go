package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's commands stay honest: its go test commands name the
// package of what they run, and its billingctl samples are what
// billingctl prints.

// repoRoot is the module's root, from this package's directory.
const repoRoot = "../.."

// goTestCommand matches a go test command of the docs, in a code block or
// a code span, up to the span's end, a comment or the line's end.
var goTestCommand = regexp.MustCompile("(?:[A-Z_]+=\\S+ +)*go test [^`#\\n]*")

// flagsWithValue are the go test flags the docs give a separate value.
var flagsWithValue = map[string]bool{"-run": true, "-bench": true, "-fuzz": true, "-timeout": true, "-benchtime": true,
	"-fuzztime": true, "-count": true, "-cpuprofile": true, "-memprofile": true, "-parallel": true}

// TestDocsGoTestCommandsRunSomething: every go test command in README.md
// and docs/*.md selects a test, benchmark or fuzz target that exists in
// each package it names, and each alternative of the top level of its
// pattern ('A|B' is A and B) selects one in some package it names, so a
// renamed test is noticed even when another alternative still matches
// (./... is not checked). A command naming the wrong package, or a test
// that no longer exists, runs nothing and passes.
func TestDocsGoTestCommandsRunSomething(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	docs = append([]string{filepath.Join(repoRoot, "README.md")}, docs...)
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, cmd := range goTestCommand.FindAllString(string(b), -1) {
			cmd = strings.TrimSpace(cmd)
			problems, ok := goTestSelects(t, cmd)
			if !ok {
				continue
			}
			checked++
			assert.Empty(t, problems, "%s: %q", filepath.Base(doc), cmd)
		}
	}
	t.Logf("%d go test commands checked", checked)
	assert.Greater(t, checked, 15, "go test commands found in the docs")
}

// TestGoTestSelects: the check of a docs command finds a package where it
// runs nothing and an alternative of its pattern that selects nothing,
// even when the other alternatives do.
func TestGoTestSelects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		cmd      string
		problems int
	}{
		{name: "one test", cmd: "go test -run TestGoTestSelects ./cmd/billingctl", problems: 0},
		{name: "both alternatives exist", cmd: "go test -run 'TestGoTestSelects|TestDocsGoTest' ./cmd/billingctl", problems: 0},
		{name: "a renamed alternative", cmd: "go test -run 'TestGoTestSelects|TestRenamedAway' ./cmd/billingctl", problems: 1},
		{name: "the renamed one first", cmd: "go test -run 'TestRenamedAway|TestGoTestSelects' ./cmd/billingctl", problems: 1},
		{name: "alternation inside a group is one alternative", cmd: "go test -run '(TestGoTestSelects|TestRenamedAway)$' ./cmd/billingctl", problems: 0},
		{name: "subtest level not split", cmd: "go test -run 'TestGoTestSelects/x|y' ./cmd/billingctl", problems: 0},
		{name: "nothing at all", cmd: "go test -run TestRenamedAway ./cmd/billingctl", problems: 2},
		{name: "an alternative per package", cmd: "go test -run XXX -bench 'Collector|ScheduledRun' . ./dynamostore", problems: 0},
		{name: "an alternative in no package", cmd: "go test -run XXX -bench 'Collector|ScheduledRun|NoSuchBench' . ./dynamostore", problems: 1},
		{name: "fuzz target run as a test", cmd: "go test -run FuzzParseAmount .", problems: 0},
		{name: "./... is not checked", cmd: "go test -run TestRenamedAway ./...", problems: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			problems, _ := goTestSelects(t, tc.cmd)
			assert.Len(t, problems, tc.problems, "%q", problems)
		})
	}
}

// goTestSelects checks what a go test command of the docs selects and
// returns what is wrong: a package where it runs nothing, an alternative
// of its pattern that selects nothing in any of its packages. ok is false
// for a command not checked (no package, or ./...).
func goTestSelects(t *testing.T, cmd string) (problems []string, ok bool) {
	t.Helper()
	kind, pattern, pkgs := parseGoTest(cmd)
	if len(pkgs) == 0 || pkgs[0] == "./..." {
		return nil, false
	}
	var alts []*regexp.Regexp
	for _, alt := range splitPattern(pattern, '|') {
		re, err := regexp.Compile(alt)
		if err != nil {
			problems = append(problems, fmt.Sprintf("pattern %q: %v", pattern, err))
			continue
		}
		alts = append(alts, re)
	}
	matched := make([]bool, len(alts)) // alternative i selects something somewhere
	for _, pkg := range pkgs {
		found := false
		for _, n := range testFuncs(t, filepath.Join(repoRoot, pkg), kind) {
			for i, re := range alts {
				if re.MatchString(n) {
					matched[i], found = true, true
				}
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("runs nothing in %s: no %s matches %q", pkg, kind, pattern))
		}
	}
	for i, re := range alts {
		if !matched[i] {
			problems = append(problems, fmt.Sprintf("the alternative %q of %q selects no %s in %s", re, pattern, kind, strings.Join(pkgs, " ")))
		}
	}
	return problems, true
}

// splitPattern splits a -run, -bench or -fuzz pattern at each sep outside
// brackets and parentheses and not escaped, as the testing package splits
// a pattern at '/' into levels: splitPattern("A|(B|C)/x", '/') is
// ["A|(B|C)", "x"], and splitPattern("A|(B|C)", '|') is ["A", "(B|C)"].
func splitPattern(pattern string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\':
			i++ // the escaped byte is never a separator
		case c == '(' || c == '[':
			depth++
		case (c == ')' || c == ']') && depth > 0:
			depth--
		case c == sep && depth == 0:
			out = append(out, pattern[start:i])
			start = i + 1
		}
	}
	return append(out, pattern[start:])
}

// parseGoTest returns what a go test command selects: the kind of
// function (Test, Benchmark or Fuzz), the top level of its pattern, and
// its packages.
func parseGoTest(cmd string) (kind, pattern string, pkgs []string) {
	var run, bench, fuzz string
	fields := strings.Fields(strings.ReplaceAll(cmd, "'", ""))
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "-args":
			i = len(fields)
		case flagsWithValue[f] && i+1 < len(fields):
			switch f {
			case "-run":
				run = fields[i+1]
			case "-bench":
				bench = fields[i+1]
			case "-fuzz":
				fuzz = fields[i+1]
			}
			i++
		case f == "." || strings.HasPrefix(f, "./"):
			pkgs = append(pkgs, f)
		}
	}
	kind, pattern = "Test", run
	switch {
	case fuzz != "":
		kind, pattern = "Fuzz", fuzz
	case bench != "" && run == "XXX":
		kind, pattern = "Benchmark", bench
	}
	return kind, splitPattern(pattern, '/')[0], pkgs
}

// testFuncs returns the names of the functions of kind in the _test.go
// files of dir (Examples and fuzz targets count as tests, as -run runs
// them, the fuzz targets on their seed corpus).
func testFuncs(t *testing.T, dir, kind string) []string {
	t.Helper()
	testFuncsMu.Lock()
	defer testFuncsMu.Unlock()
	key := dir + "\x00" + kind
	if names, ok := testFuncsSeen[key]; ok {
		return names // the docs name one package in many commands: read it once (14 s under -race otherwise)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no test files in %s", dir)
	prefixes := kind
	if kind == "Test" {
		prefixes = "Test|Example|Fuzz"
	}
	re := regexp.MustCompile(`(?m)^func ((?:` + prefixes + `)\w*)\(`)
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
	}
	testFuncsSeen[key] = names
	return names
}

var (
	testFuncsMu   sync.Mutex
	testFuncsSeen = map[string][]string{}
)

// readmeSample is a command of a README sample and what it printed.
type readmeSample struct {
	cmd  string
	want string
}

// comment is a shell comment after a command.
var comment = regexp.MustCompile(`\s+#\s.*$`)

// readmeSamples returns the billingctl commands of the README's text
// blocks, in order, each with the output shown after it.
func readmeSamples(t *testing.T) []readmeSample {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operate.md"))
	require.NoError(t, err)
	var out []readmeSample
	for _, m := range regexp.MustCompile("(?s)```text\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		var cur *readmeSample
		for _, line := range strings.SplitAfter(m[1], "\n") {
			if cmd, ok := strings.CutPrefix(line, "$ "); ok {
				out = append(out, readmeSample{cmd: comment.ReplaceAllString(strings.TrimSpace(cmd), "")})
				cur = &out[len(out)-1]
				continue
			}
			if cur != nil {
				cur.want += line
			}
		}
	}
	return out
}

// TestReadmeSamplesArePrinted runs the README's billingctl samples, in
// order, on the local server (with a table prefix of its own for "demo",
// and the interrupted backfill stopped in its second pause as Ctrl-C
// stops it there) and checks each prints what the README shows: the same
// lines, spaces squeezed, the progress lines of stderr before or after
// stdout. A sample without output must succeed.
func TestReadmeSamplesArePrinted(t *testing.T) {
	t.Parallel()
	endpoint, client := dynamotest.Endpoint(t), dynamotest.Client(t)
	prefix := dynamotest.TableName(t, "demo")
	dropTables(t, client, prefix, prefix+"-activity", prefix+"-activity-history", prefix+"-locks", prefix+"-invoices")
	env := func(k string) string {
		if k == endpointEnv {
			return endpoint
		}
		return ""
	}
	samples := readmeSamples(t)
	require.Greater(t, len(samples), 15, "samples found in the README")
	tokens := map[string]string{} // the README's resume tokens -> this run's
	var resumeTokens = regexp.MustCompile(`--from (\S+)`)
	for _, s := range samples {
		cmd, interrupted := strings.CutPrefix(s.cmd, "timeout -s INT 1.5 ")
		for from, to := range tokens {
			cmd = strings.ReplaceAll(cmd, from, to)
		}
		args := strings.Fields(cmd)
		require.Equal(t, "billingctl", args[0], "a README sample that is not billingctl: %q", s.cmd)
		for i := range args {
			if args[i] == "demo" {
				args[i] = prefix
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		var out, errb bytes.Buffer
		a := &app{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errb, env: env}
		if interrupted {
			(&fakeClock{now: time.Unix(1e9, 0), onSleep: func(n int) error {
				if n == 2 {
					cancel()
					return context.Canceled
				}
				return nil
			}}).hook(a)
		}
		code := a.exit(a.main(args[1:]))
		cancel()
		r := result{code: code, stdout: out.String(), stderr: errb.String()}
		if strings.TrimSpace(s.want) == "" {
			assert.Equal(t, exitOK, r.code, "$ %s\n%s", s.cmd, r)
			continue
		}
		// This run's resume tokens stand for the README's, in order.
		got := resumeTokens.FindAllStringSubmatch(r.stderr, -1)
		want := resumeTokens.FindAllStringSubmatch(s.want, -1)
		if assert.Equal(t, len(want), len(got), "$ %s: resume lines\n%s", s.cmd, r) {
			for i := range want {
				tokens[want[i][1]] = got[i][1]
			}
		}
		wantText := strings.ReplaceAll(s.want, "demo", prefix)
		for from, to := range tokens {
			wantText = strings.ReplaceAll(wantText, from, to)
		}
		norm := func(s string) string { return squeeze(strings.TrimSpace(s)) }
		if norm(r.stdout+r.stderr) != norm(wantText) && norm(r.stderr+r.stdout) != norm(wantText) {
			assert.Equal(t, norm(wantText), norm(r.stdout+r.stderr), "$ %s\nprints something else than the README shows:\n%s", s.cmd, r)
		}
	}
}
