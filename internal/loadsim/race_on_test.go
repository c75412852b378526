//go:build race

package loadsim

// raceBuild: the race detector slows the simulation about fivefold, so a
// -race build (CI's test command) runs the -short sizes.
const raceBuild = true
