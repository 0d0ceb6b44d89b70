// Package canarytest helps the canary tests of secrets: a test plants a
// value no one else knows (a judge key, a server token), runs MST, and
// searches every place the value must not reach. It reads processes from
// Linux's /proc: the argv and environment of those under a process, or of
// those inside a container (its PID namespace); and it says whether bytes
// hold a value in any form the redactor knows.
package canarytest

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/secrets"
)

// Process is one process as /proc shows it.
type Process struct {
	PID int
	// Cmdline and Environ are /proc/PID/cmdline and environ:
	// NUL-separated, empty when they could not be read.
	Cmdline, Environ []byte
}

// Descendants reads the argv and environment of every process under root
// (children, their children, and so on).
func Descendants(root int) []Process {
	parent := map[int]int{}
	for _, pid := range pids() {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				parent[pid], _ = strconv.Atoi(f[1])
			}
		}
	}
	var out []Process
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out = append(out, read(pid))
				break
			}
		}
	}
	return out
}

// InNamespaceOf reads the argv and environment of every process in the
// PID namespace of pid, pid included: for a container's main process, every
// process of the container, those started by docker exec too. It returns
// nothing when pid's namespace cannot be read, or is this process's own (a
// process that is not in a container).
func InNamespaceOf(pid int) []Process {
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return nil
	}
	if own, _ := os.Readlink("/proc/self/ns/pid"); own == ns {
		return nil
	}
	var out []Process
	for _, p := range pids() {
		if l, err := os.Readlink("/proc/" + strconv.Itoa(p) + "/ns/pid"); err == nil && l == ns {
			out = append(out, read(p))
		}
	}
	return out
}

// Holds says whether b holds value, the secret name, in any form the
// redactor removes.
func Holds(b []byte, name, value string) bool {
	one := secrets.New()
	if err := one.Add(name, value); err != nil {
		panic("canarytest: " + err.Error())
	}
	return !bytes.Equal(secrets.NewRedactor(one).Bytes(b), b)
}

// pids lists the processes of /proc.
func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func read(pid int) Process {
	dir := "/proc/" + strconv.Itoa(pid)
	c, _ := os.ReadFile(dir + "/cmdline")
	env, _ := os.ReadFile(dir + "/environ")
	return Process{PID: pid, Cmdline: c, Environ: env}
}
