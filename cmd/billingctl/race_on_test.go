//go:build race

package main

// raceEnabled: the race detector slows the pacing model about fivefold,
// so a -race build skips its full-size call model run.
const raceEnabled = true
