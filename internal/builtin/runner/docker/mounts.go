package docker

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/mst-eval/mst/runner"
)

// systemDirs are folders whose contents belong to the image: a server
// command found there is the image's to provide, never mounted from the
// host over it.
var systemDirs = []string{"/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot",
	"/proc", "/sys", "/dev", "/run", "/var/run"}

// bindMounts lists the host paths a shard's containers bind-mount
// read-only at the same path, so its stdio servers can start:
//
//   - for each server command given as an absolute path, the folder that
//     holds it; when that folder is the root or /tmp, or holds mst or the
//     work folder, only the command itself;
//   - for each server working folder, the eval config's folder when the
//     working folder is inside it, else the working folder itself;
//   - each absolute path in the servers' arguments that exists here (a
//     database file, a folder a filesystem server serves), read-only like
//     the rest: a server that writes there needs its own image or volume.
//
// The coordinator lists the commands and folders in the shard's HostPaths.
//
// Paths in system folders (/usr, /bin, …) and paths that do not exist on
// this machine are left out, and so is a path inside another one on the
// list. Windows paths cannot be mounted at the same path in a Linux
// container, so on Windows the list is empty.
func bindMounts(hp runner.HostPaths, set settings) []string {
	if runtime.GOOS == "windows" {
		return nil
	}
	configDir := ""
	if filepath.IsAbs(hp.ConfigDir) {
		configDir = filepath.Clean(hp.ConfigDir)
	}
	// Folders a whole-folder mount must not cover: mst's and the work
	// folder would be hidden by it, and /tmp is the container's own tmpfs
	// (a folder inside it can be mounted).
	covers := func(dir string) bool {
		return dir == "/" || dir == "/tmp" || dir == path.Dir(set.mst) || within(set.workDir, dir) || within(set.mst, dir)
	}
	var paths []string
	add := func(p string) {
		if p == "" || inSystemDir(p) {
			return
		}
		if _, err := os.Stat(p); err != nil {
			return
		}
		paths = append(paths, p)
	}
	for _, cmd := range hp.Commands {
		if cmd != "" && filepath.IsAbs(cmd) {
			dir := filepath.Dir(cmd)
			if covers(dir) {
				add(cmd)
			} else {
				add(dir)
			}
		}
	}
	// A path in a server's arguments is mounted itself (a file alone, a
	// folder whole), unless mounting it would hide mst, the work folder or
	// the container's /tmp.
	for _, a := range hp.Args {
		if a != "" && filepath.IsAbs(a) && !covers(filepath.Clean(a)) {
			add(filepath.Clean(a))
		}
	}
	for _, d := range hp.Dirs {
		if d != "" && filepath.IsAbs(d) {
			switch {
			case configDir != "" && within(d, configDir) && !covers(configDir):
				add(configDir)
			case !covers(d):
				add(d)
			}
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	var out []string
	for _, p := range paths {
		if len(out) > 0 && within(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func inSystemDir(p string) bool {
	for _, d := range systemDirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

// runsInBareImage says why the server command at path (on this machine)
// cannot start in MST's default worker image, which holds mst alone: a
// dynamically linked executable (it needs its loader and libraries) or a
// script (it needs its interpreter). Anything else, or a path it cannot
// read, it leaves for the container to try.
func runsInBareImage(path string) error {
	if inSystemDir(path) {
		return nil // the image's to provide; the readiness check says more
	}
	howTo := "build it static (for Go, CGO_ENABLED=0 GOOS=linux go build), or run an image that has what it needs, with this MST in it (--runner-option image=REF; see docs/docker.md)"
	if f, err := elf.Open(path); err == nil {
		defer f.Close()
		for _, prog := range f.Progs {
			if prog.Type != elf.PT_INTERP {
				continue
			}
			interp, _ := io.ReadAll(io.LimitReader(prog.Open(), 4096))
			return fmt.Errorf("the server command %s is linked dynamically (it needs %s and its libraries), and MST's default worker image holds nothing but mst: %s", path, strings.TrimRight(string(interp), "\x00"), howTo)
		}
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	if line, ok := strings.CutPrefix(string(head[:n]), "#!"); ok {
		line, _, _ = strings.Cut(line, "\n")
		return fmt.Errorf("the server command %s is a script for %s, and MST's default worker image holds nothing but mst: %s", path, strings.TrimSpace(line), howTo)
	}
	return nil
}
