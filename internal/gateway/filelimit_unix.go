//go:build unix

package gateway

import "syscall"

// fileLimit returns the process's soft limit of open files, which Go has
// raised to the hard limit at start; 0 if it cannot be read.
func fileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return uint64(rl.Cur)
}
