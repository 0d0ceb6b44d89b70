//go:build unix

package docker

import (
	"os/exec"
	"syscall"
)

// isolate puts a docker CLI process in a process group of its own, so a
// Ctrl-C at the terminal reaches only the coordinator: it cancels the run
// through the protocol, and the worker's channel (docker exec) and the
// copies of its transcripts (docker cp) must outlive the signal.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
