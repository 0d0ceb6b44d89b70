//go:build linux

package proctree

import (
	"os"
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

// SignalOnParentExit asks for sig when this process's parent ends, and
// sends it at once when the parent has already ended (this process was
// adopted before it could ask). Elsewhere it does nothing.
func SignalOnParentExit(sig syscall.Signal) error {
	parent := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(sig), 0); errno != 0 {
		return errno
	}
	if os.Getppid() != parent {
		return syscall.Kill(os.Getpid(), sig)
	}
	return nil
}
