package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
// each package it names (the top level of a -run pattern; ./... is not
// checked). A command naming the wrong package runs nothing and passes.
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
			kind, pattern, pkgs := parseGoTest(cmd)
			if len(pkgs) == 0 || pkgs[0] == "./..." {
				continue
			}
			checked++
			re, err := regexp.Compile(pattern)
			if !assert.NoError(t, err, "%s: %q", filepath.Base(doc), cmd) {
				continue
			}
			for _, pkg := range pkgs {
				names := testFuncs(t, filepath.Join(repoRoot, pkg), kind)
				found := false
				for _, n := range names {
					found = found || re.MatchString(n)
				}
				assert.True(t, found, "%s: %q runs nothing in %s: no %s matches %q", filepath.Base(doc), cmd, pkg, kind, pattern)
			}
		}
	}
	t.Logf("%d go test commands checked", checked)
	assert.Greater(t, checked, 15, "go test commands found in the docs")
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
	top, _, _ := strings.Cut(pattern, "/")
	return kind, top, pkgs
}

// testFuncs returns the names of the functions of kind in the _test.go
// files of dir (Examples count as tests, as -run runs them).
func testFuncs(t *testing.T, dir, kind string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no test files in %s", dir)
	prefixes := kind
	if kind == "Test" {
		prefixes = "Test|Example"
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
	return names
}

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
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
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
	dropTables(t, client, prefix, prefix+"-activity", prefix+"-activity-history", prefix+"-locks")
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
