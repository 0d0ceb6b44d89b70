//go:build linux

package proctree

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes cmd receive sig when the process that starts it
// ends, however it ends (Linux's parent-death signal). Linux sends it
// when the thread that started cmd ends; Go ends a thread only when a
// goroutine locked to it returns, so start cmd from a goroutine that is
// not locked. Elsewhere it does nothing.
func DieWithParent(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = sig
}
