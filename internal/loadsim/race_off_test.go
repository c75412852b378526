//go:build !race

package loadsim

const raceBuild = false
