//go:build unix

package runner

import (
	"os/exec"
	"syscall"
)

// isolate puts a worker in a process group of its own, so a Ctrl-C at the
// terminal reaches only the coordinator, which passes it on as a cancel
// message.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
