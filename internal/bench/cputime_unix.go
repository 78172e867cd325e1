//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU returns the process's user+system CPU time so far (every thread: the runner's,
// the GC's, wazero's), or 0 when the system does not tell.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
