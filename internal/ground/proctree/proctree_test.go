//go:build linux

package proctree

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalReachesEscapedChildren starts a shell whose child leaves the
// process group (setsid), and checks that Signal ends both.
func TestSignalReachesEscapedChildren(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "setsid sleep 300 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	Group(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	child, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	tree := Of(cmd)
	tree.Signal(syscall.SIGKILL)
	cmd.Wait()
	// The escaped child is gone once it has been reaped by its new parent;
	// poll briefly for that (signals are asynchronous).
	for i := 0; i < 200; i++ {
		if syscall.Kill(child, 0) != nil {
			return
		}
		if st, _ := stateOf(child); st == "Z" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("process %d (in a session of its own) survived Signal", child)
}
