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

// parentOf reads a process's parent from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after the last ")" are the state and the parent.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(fields[1])
	return pp, err == nil
}

// stateOf returns a process's state letter (R, S, Z, …).
func stateOf(pid int) (string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[i+1:])
	if i < 0 || len(fields) < 1 {
		return "", false
	}
	return fields[0], true
}
