//go:build !unix

package kubernetes

import "os/exec"

// isolate does nothing where there are no process groups.
func isolate(cmd *exec.Cmd) {}
