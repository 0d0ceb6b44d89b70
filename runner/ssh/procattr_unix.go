//go:build unix

package ssh

import (
	"os/exec"
	"syscall"
)

// isolate puts a gcloud process in a process group of its own, so a
// Ctrl-C at the terminal reaches only the coordinator, which cancels
// workers through the protocol instead of cutting their connections.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
