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

// TestMainBillsAndCancels runs the program: one collection of the
// plan's price, then a subscription that renews no more.
func TestMainBillsAndCancels(t *testing.T) {
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
	assert.Regexp(t, `^collected 1, amount 9\.99; subscription ENDED, paid through \d{4}-\d\d-\d\d\n$`, out.String())
}
