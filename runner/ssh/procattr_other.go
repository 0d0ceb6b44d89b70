//go:build !unix

package ssh

import "os/exec"

// isolate does nothing where process groups are not available.
func isolate(cmd *exec.Cmd) {}
