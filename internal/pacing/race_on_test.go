//go:build race

package pacing_test

// raceBuild: the race detector slows the call model about fivefold, so a
// -race build (CI's test command) skips its full-size runs.
const raceBuild = true
