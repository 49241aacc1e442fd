//go:build unix

package gateway

import (
	"errors"
	"syscall"
)

// processGone reports whether no process of this host has the id pid.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
