//go:build !race

package pacing_test

const raceBuild = false
