//go:build unix

package kubernetes

import (
	"os/exec"
	"syscall"
)

// isolate puts a kubectl process in a process group of its own, so a
// Ctrl-C at the terminal reaches only the coordinator, which cancels the
// run through the protocol while the worker's channel and the copies of
// its transcripts carry on.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
