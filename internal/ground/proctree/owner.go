package proctree

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
)

// OwnerFile is the file, in a folder MST makes for a while (bundles, shard
// folders, work folders, token folders), that names the run and the
// process the folder belongs to, so that `mst runner cleanup` can tell
// the folders of a live run from those a dead process left.
const OwnerFile = ".mst-owner"

// Owner is what an OwnerFile holds.
type Owner struct {
	// Run is the run's id, or "" when the maker did not know it.
	Run string `json:"run,omitempty"`
	PID int    `json:"pid"`
	// Started tells the process apart from a later one that got the same
	// pid: its start time from /proc (clock ticks since boot); 0 where
	// there is no /proc.
	Started uint64 `json:"started,omitempty"`
	Host    string `json:"host"`
}

// MarkOwner writes dir's OwnerFile naming run and this process.
func MarkOwner(dir, run string) error {
	host, _ := os.Hostname()
	o := Owner{Run: run, PID: os.Getpid(), Host: host}
	o.Started, _ = startTime(o.PID)
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFrom(filepath.Join(dir, OwnerFile), strings.NewReader(string(b)+"\n"), 0o600); err != nil {
		return fmt.Errorf("marking %s as this process's: %w", dir, err)
	}
	return nil
}

// ReadOwner reads dir's OwnerFile.
func ReadOwner(dir string) (Owner, error) {
	var o Owner
	b, err := os.ReadFile(filepath.Join(dir, OwnerFile))
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("%s: %w", filepath.Join(dir, OwnerFile), err)
	}
	if o.PID <= 0 {
		return o, fmt.Errorf("%s names no process", filepath.Join(dir, OwnerFile))
	}
	return o, nil
}

// Alive reports whether the owner may still run: it is false only when
// the owner is known to have ended (it ran on this host, and no process
// has its pid, or the one that has it started at another time, or is a
// zombie). When that cannot be told, it is true.
func (o Owner) Alive() bool {
	if host, err := os.Hostname(); err != nil || host != o.Host {
		return true
	}
	if st, ok := stateOf(o.PID); ok {
		if st == "Z" {
			return false
		}
		if started, ok := startTime(o.PID); ok && o.Started != 0 && started != o.Started {
			return false
		}
		return true
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		return false // /proc works and has no such process
	}
	return exists(o.PID)
}

// startTime reads when a process started, from /proc/PID/stat: the 22nd
// field, the 20th from the state on.
func startTime(pid int) (uint64, bool) {
	fields, ok := statFields(pid)
	if !ok || len(fields) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	return v, err == nil
}
