//go:build !linux

package proctree

import (
	"os/exec"
	"syscall"
)

// DieWithParent does nothing outside Linux, which alone has a
// parent-death signal.
func DieWithParent(cmd *exec.Cmd, sig syscall.Signal) {}
