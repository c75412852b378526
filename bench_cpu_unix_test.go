//go:build unix

package billing_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the process has used, for
// benchmarks to report CPU per collection beside the wall clock's rate:
// on a shared machine the rate moves with the neighbours, CPU much less.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
