package proctree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	pids, err := marked([]byte(env))
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
	for {
		pids = alive(pids)
		if len(pids) == 0 {
			return nil
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
