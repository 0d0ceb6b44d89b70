package proctree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// StopMarked stops the processes, other than this one, whose environment
// holds the entry env ("MST_EXEC=…", read from /proc): it sends each
// SIGTERM, waits up to grace for them to end, and sends SIGKILL to those
// left. It returns once none is left, or ctx ends. Finding no process is
// not an error: they may have ended by themselves. It needs Linux's /proc.
func StopMarked(ctx context.Context, env string, grace time.Duration) error {
	want := []byte(env)
	pids, err := marked(want)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		signalPID(pid, syscall.SIGTERM)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(min(100*time.Millisecond, max(grace/10, time.Millisecond)))
	defer tick.Stop()
	for looks := 0; ; looks++ {
		// Look again each time: a process in the middle of an exec shows
		// no environment for a moment, and a marked process may have
		// started another since.
		if again, err := marked(want); err == nil {
			for _, pid := range again {
				if !slices.Contains(pids, pid) {
					signalPID(pid, syscall.SIGTERM)
					pids = append(pids, pid)
				}
			}
		}
		pids = alive(pids)
		if len(pids) == 0 && looks > 0 {
			return nil // none found twice, a tick apart
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			for _, pid := range pids {
				signalPID(pid, syscall.SIGKILL)
			}
			return nil
		case <-tick.C:
		}
	}
}

// marked lists the processes, other than this one, whose environment
// holds the entry want.
func marked(want []byte) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// alive keeps the processes that have not ended. A zombie has ended.
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if st, ok := stateOf(pid); ok && st != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

func signalPID(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Signal(sig)
	}
}
