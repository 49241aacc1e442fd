//go:build unix

package bridge

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a new process group, whose id is its pid.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminateGroup sends SIGTERM to p's process group.
func terminateGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGTERM) }

// killGroup sends SIGKILL to p's process group.
func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }

// groupAlive reports whether p's process group still has a process (one
// that exited but was not yet reaped counts).
func groupAlive(p *os.Process) bool { return syscall.Kill(-p.Pid, 0) == nil }
