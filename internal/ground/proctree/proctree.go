// Package proctree stops a child program together with everything it
// started, such as the MCP servers a CLI client launches. A process group
// catches most of them; a program that puts its own children in groups or
// sessions of their own escapes it, so on Linux the descendants are also
// found through /proc, before anything is signalled (once a parent dies, its
// children are adopted elsewhere and can no longer be told apart).
package proctree

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Descendants lists the processes below pid (children, their children, …),
// read from /proc. It returns nil where /proc is not available.
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// statFields reads /proc/PID/stat and returns its fields from the state
// (the 3rd) on. The command name (the 2nd) is in parentheses and may hold
// spaces and parentheses, so the fields start after the last ")".
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(s[i+1:]), true
}

// parentOf reads a process's parent from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	fields, ok := statFields(pid)
	if !ok || len(fields) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(fields[1])
	return pp, err == nil
}

// stateOf reads a process's state (R, S, Z, …) from /proc/PID/stat.
func stateOf(pid int) (string, bool) {
	fields, ok := statFields(pid)
	if !ok || len(fields) < 1 {
		return "", false
	}
	return fields[0], true
}

// Ended reports whether process pid has exited: it is gone, or a zombie
// not reaped yet. It reads /proc, so it says true for every pid where
// there is no /proc: use it on Linux only.
func Ended(pid int) bool {
	st, ok := stateOf(pid)
	return !ok || st == "Z" || st == "X"
}
