package main

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeBlock is the part of this program the README shows.
func readmeBlock(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)// readme:begin\n(.*?)\n// readme:end`).FindSubmatch(src)
	require.NotNil(t, m, "main.go marks the README's block")
	return strings.TrimSpace(string(m[1]))
}

// TestReadmeShowsThisProgram: the README's "Embed it" block is this
// program's main, verbatim, and within the 40 lines a first screen
// allows; so `go run ./examples/embed` runs exactly what it shows.
func TestReadmeShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	sec := regexp.MustCompile("(?s)## Embed it\n.*?```go\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, sec, "the README has an \"Embed it\" section with a Go block")
	block := readmeBlock(t)
	assert.Equal(t, block, strings.TrimSpace(string(sec[1])), "the README's block is examples/embed/main.go's")
	assert.LessOrEqual(t, strings.Count(block, "\n")+1, 40, "the README's block fits a first screen")
}

// TestMainGatesAccessOnStatus runs the program: a subscription cancelled
// at period end is ACTIVE until the month paid for ends (it said ENDED at
// once), a trialing one is charged first on the trial's end (it said the
// trial's start), a paused one on the date the pause resumes it (it said
// the date skipped); access follows the status.
func TestMainGatesAccessOnStatus(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	main()
	os.Stdout = stdout
	require.NoError(t, w.Close())
	var out bytes.Buffer
	_, err = io.Copy(&out, r)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ann: ACTIVE, access true, cancel at 2025-02-15, next charge 0.00 on -",
		"bob: TRIALING, access true, cancel at -, next charge 9.99 on 2025-01-29",
		"cy: PAUSED, access false, cancel at -, next charge 9.99 on 2025-03-15",
	}, strings.Split(strings.TrimSpace(out.String()), "\n"))
}
