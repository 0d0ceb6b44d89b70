//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// atClockTick is AT_CLKTCK, the entry of the ELF auxiliary vector that
// holds the kernel's clock tick (what sysconf(_SC_CLK_TCK) returns in C).
const atClockTick = 17

// clockTick is how many ticks a second /proc/PID/stat counts CPU time in:
// the auxiliary vector's AT_CLKTCK, or 100 (USER_HZ on every Linux
// architecture Go runs on) when the vector cannot be read.
var clockTick = sync.OnceValue(func() int64 {
	if vec, err := unix.Auxv(); err == nil {
		for _, kv := range vec {
			if kv[0] == atClockTick && kv[1] > 0 {
				return int64(kv[1])
			}
		}
	}
	return 100
})

// sampleEvery is how often measure reads the memory of the process it
// waits for and the CPU time of the children it follows.
const sampleEvery = 10 * time.Millisecond

// measure starts cmd and waits for it to end, and returns its own CPU
// time, that of the descendants it waited for, and its peak memory. It
// waits for the exit without reaping the process (waitid with WNOWAIT),
// reads the exited process's accounting from /proc/PID/stat, and only
// then reaps it with cmd.Wait; cmd.Wait's error is returned with the
// figures.
//
// follow, when not nil, picks the direct children (by their argv) whose
// CPU time is sampled while they run, each every sampleEvery until it
// has exited: the last sample of each is in usage.kids. A child's
// sample is final only if it was read after the child exited and before
// its parent reaped it (kidSample.final); otherwise what the child spent
// after its last sample is missing from it.
func measure(cmd *exec.Cmd, follow func(argv []string) bool) (usage, error) {
	var u usage
	if err := cmd.Start(); err != nil {
		return u, err
	}
	pid := cmd.Process.Pid
	stop := make(chan struct{})
	done := make(chan struct{})
	s := &sampler{pid: pid, follow: follow, kids: map[int]*kidSample{}}
	go func() {
		defer close(done)
		s.loop(stop)
	}()
	var info unix.Siginfo
	var err error
	for {
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	close(stop)
	<-done
	if err == nil {
		var st procStat
		if st, err = readStat(pid); err == nil {
			u.own, u.children = st.own(), st.reaped()
		}
	}
	waitErr := cmd.Wait()
	if err != nil {
		return u, fmt.Errorf("reading the accounting of process %d: %w", pid, err)
	}
	u.peakRSS = s.peakRSS
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.treeRSS = ru.Maxrss * 1024
	}
	for _, k := range s.kids {
		u.kids = append(u.kids, *k)
	}
	return u, waitErr
}

// sampler reads, every sampleEvery, the peak memory of one process and
// the CPU time of the children of it that follow picks.
type sampler struct {
	pid     int
	follow  func(argv []string) bool
	peakRSS int64
	kids    map[int]*kidSample
}

func (s *sampler) loop(stop <-chan struct{}) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for n := 0; ; n++ {
		if hwm, err := readHWM(s.pid); err == nil {
			s.peakRSS = max(s.peakRSS, hwm)
		}
		if s.follow != nil {
			// New children are looked for less often than known ones are
			// read: a scan reads every process's stat.
			if n%10 == 0 {
				s.findKids()
			}
			for pid, k := range s.kids {
				if k.final {
					continue
				}
				st, err := readStat(pid)
				if err != nil || st.ppid != s.pid {
					continue // reaped: the last sample stands
				}
				k.own, k.children, k.final = st.own(), st.reaped(), st.state == "Z"
			}
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// findKids adds the children of s.pid that s.follow picks.
func (s *sampler) findKids() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || s.kids[pid] != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != s.pid {
			continue
		}
		// Until a child has exec'd, its argv is its parent's.
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if argv := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"); s.follow(argv) {
			s.kids[pid] = &kidSample{pid: pid}
		}
	}
}

// procStat holds the fields of /proc/PID/stat the bench reads, in clock
// ticks.
type procStat struct {
	state                        string
	ppid                         int
	utime, stime, cutime, cstime int64
}

func (st procStat) own() time.Duration    { return ticks(st.utime + st.stime) }
func (st procStat) reaped() time.Duration { return ticks(st.cutime + st.cstime) }

func ticks(n int64) time.Duration {
	return time.Duration(n) * time.Second / time.Duration(clockTick())
}

// readStat reads /proc/PID/stat: field 3 is the state, 4 the parent, 14
// and 15 the process's own user and system time (all its threads), 16 and
// 17 those of the children it has waited for, each including the children
// those waited for in turn.
func readStat(pid int) (procStat, error) {
	var st procStat
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return st, err
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses itself: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return st, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return st, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 15", pid, len(f))
	}
	st.state = f[0]
	n := make([]int64, 5)
	for j, idx := range []int{1, 11, 12, 13, 14} {
		if n[j], err = strconv.ParseInt(f[idx], 10, 64); err != nil {
			return st, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	st.ppid = int(n[0])
	st.utime, st.stime, st.cutime, st.cstime = n[1], n[2], n[3], n[4]
	return st, nil
}

// readHWM reads the peak resident set of a running process (VmHWM in
// /proc/PID/status), in bytes.
func readHWM(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmHWM (the process has exited)")
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
