package docker

import (
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
