//go:build unix

package proctree

import (
	"os/exec"
	"sync"
	"syscall"
)

// Group makes cmd start in a process group of its own.
func Group(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// Tree is a started command and the processes found below it.
type Tree struct {
	pid  int
	mu   sync.Mutex
	seen map[int]bool
}

// Of returns the tree of a started command.
func Of(cmd *exec.Cmd) *Tree {
	if cmd.Process == nil {
		return &Tree{seen: map[int]bool{}}
	}
	return &Tree{pid: cmd.Process.Pid, seen: map[int]bool{}}
}

// Scan remembers the descendants found now, so that they are signalled
// even after their parent has died. Call it while the command runs.
func (t *Tree) Scan() {
	if t.pid == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range Descendants(t.pid) {
		t.seen[p] = true
	}
}

// Signal sends sig to the command's process group and to every descendant
// found now or at an earlier Scan or Signal.
func (t *Tree) Signal(sig syscall.Signal) {
	if t.pid == 0 {
		return
	}
	t.Scan()
	syscall.Kill(-t.pid, sig)
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.seen {
		syscall.Kill(p, sig)
	}
}

// KillGroup sends sig to every process of the process group pgid (a
// command started with Group has its pid as its group's id). A group
// with no process left is not an error.
func KillGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		syscall.Kill(-pgid, sig)
	}
}

// exists reports whether a process has pid (it may be a zombie).
func exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
