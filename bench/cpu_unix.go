//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time this process has used.
// Under a shared machine it is steadier than wall time: it counts what a
// call costs, not how long it waited for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
