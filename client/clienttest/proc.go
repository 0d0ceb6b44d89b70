package clienttest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// process is a process as /proc shows it: its pid and its start time,
// which together tell it from a later process with the same pid.
type process struct {
	pid   int
	start string
}

type processes []process

func (p process) String() string { return fmt.Sprint(p.pid) }

// trialProcesses returns the processes whose command line holds tag (a
// test server), and their ancestors up to, not including, this process:
// the client's program and whatever it runs the server through. It
// returns nil where there is no /proc.
func trialProcesses(tag string) processes {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	seen := map[int]bool{}
	var out processes
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(tag)) {
			continue
		}
		for p := pid; p > 1 && p != self && !seen[p]; {
			seen[p] = true
			parent, start, ok := stat(p)
			if !ok {
				break
			}
			out = append(out, process{pid: p, start: start})
			p = parent
		}
	}
	return out
}

// alive returns the processes that are still running (not exited, not a
// zombie).
func (ps processes) alive() processes {
	var out processes
	for _, p := range ps {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "stat"))
		if err != nil {
			continue
		}
		f := statFields(string(b))
		if len(f) > 19 && f[19] == p.start && f[0] != "Z" && f[0] != "X" {
			out = append(out, p)
		}
	}
	return out
}

// stat returns a process's parent and start time.
func stat(pid int) (parent int, start string, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", false
	}
	f := statFields(string(b))
	if len(f) < 20 {
		return 0, "", false
	}
	parent, err = strconv.Atoi(f[1])
	return parent, f[19], err == nil
}

// statFields are the fields of /proc/PID/stat after the command name
// (which is in parentheses and may hold spaces): state, parent, … .
func statFields(s string) []string {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}
