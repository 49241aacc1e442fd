//go:build !unix

package bridge

import (
	"os"
	"os/exec"
)

// On platforms without process groups (Windows) the bridge ends the child
// only; what the child started may outlive it.

func ownGroup(*exec.Cmd) {}

func terminateGroup(p *os.Process) error { return p.Kill() }

func killGroup(p *os.Process) error { return p.Kill() }

func groupAlive(*os.Process) bool { return false }
