//go:build unix

package champ

import (
	"syscall"
	"time"
)

// processCPU is the CPU time of the whole process, user and system, every
// thread (the garbage collector's workers included): time spent waiting
// for a core of a shared machine is not in it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
