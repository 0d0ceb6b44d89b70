//go:build windows

package proctree

import (
	"os/exec"
	"strconv"
	"syscall"
)

// Group starts cmd in a process group of its own.
func Group(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= syscall.CREATE_NEW_PROCESS_GROUP
}

// Tree is a started command.
type Tree struct {
	cmd *exec.Cmd
}

// Of returns the tree of a started command.
func Of(cmd *exec.Cmd) *Tree { return &Tree{cmd: cmd} }

// Scan does nothing on Windows: taskkill finds the tree itself.
func (t *Tree) Scan() {}

// Signal ends the command's whole tree with taskkill (Windows has no
// signals to send), while the command runs: once it has exited its PID may
// be reused, so nothing is killed by PID then.
func (t *Tree) Signal(sig syscall.Signal) {
	if t.cmd == nil || t.cmd.Process == nil || t.cmd.ProcessState != nil {
		return
	}
	exec.Command("taskkill", "/T", "/F", "/PID", strconv.Itoa(t.cmd.Process.Pid)).Run()
}

// KillGroup does nothing on Windows: Tree.Signal ends a whole tree there.
func KillGroup(pgid int, sig syscall.Signal) {}

// exists cannot tell here: every process may exist.
func exists(pid int) bool { return true }
