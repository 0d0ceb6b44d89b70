package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// StopExec stops, inside a container, the processes of the command that
// Exec marked with marker: it finds every process whose environment holds
// MST_EXEC=marker (reading /proc), sends each SIGTERM, waits up to grace
// for them to end, and sends SIGKILL to those left. It returns once none is
// left, or ctx ends. Finding no process is not an error: the command may
// have ended by itself.
//
// It runs as mst's hidden `runner stop-exec` command, as the container's
// user, and needs Linux's /proc.
func StopExec(ctx context.Context, marker string, grace time.Duration) error {
	if marker == "" {
		return errors.New("stop-exec: no marker")
	}
	want := []byte(ExecMarkerEnv + "=" + marker)
	pids, err := markedProcesses(want)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		signal(pid, syscall.SIGTERM)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		pids = running(pids)
		if len(pids) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			for _, pid := range pids {
				signal(pid, syscall.SIGKILL)
			}
			return nil
		case <-tick.C:
		}
	}
}

// markedProcesses lists the processes, other than this one, whose
// environment holds the entry want.
func markedProcesses(want []byte) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("stop-exec: listing processes: %w", err)
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

// running keeps the processes that have not ended. A zombie has ended.
func running(pids []int) []int {
	var out []int
	for _, pid := range pids {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			continue
		}
		// The state follows the command name, which is in parentheses and
		// may hold spaces: "12 (sleep) S …".
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		out = append(out, pid)
	}
	return out
}

func signal(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Signal(sig)
	}
}
