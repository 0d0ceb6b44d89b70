//go:build unix

package desktop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// stopTimeout is how long an app gets to end after SIGTERM before it is
// killed.
const stopTimeout = 10 * time.Second

// stopProcess ends the process pid: SIGTERM, then SIGKILL when it has not
// ended within stopTimeout (or ctx ends first). A process already gone is
// no error.
func stopProcess(ctx context.Context, pid int) error {
	if pid <= 1 {
		return fmt.Errorf("no process to stop (pid %d)", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("stopping the app (pid %d): %w", pid, err)
	}
	deadline := time.NewTimer(stopTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || zombie(pid) {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			syscall.Kill(pid, syscall.SIGKILL)
			return nil
		case <-ctx.Done():
			syscall.Kill(pid, syscall.SIGKILL)
			return nil
		}
	}
}

// zombie reports whether pid has ended and waits for its parent to reap
// it (its state in /proc is Z); false where there is no /proc.
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) Z …".
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
