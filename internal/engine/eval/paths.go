package eval

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// CheckFiles checks, on this machine and without starting anything, the
// files a config's stdio servers need: that each cwd is an existing
// folder, and that each command given as a path (./server, bin/server, an
// absolute path) is an existing file that can be run. Load resolved both
// against the config's folder, as a run does. A command named without a
// folder (node, npx) is looked up on PATH when the server starts and is
// not checked. A server whose cwd is missing gets that one problem: its
// command is not reported missing for it.
//
// It applies where servers start on this machine: mst validate, and the
// plan of a run on the local or processes runner, call it. Other runners'
// servers start on their own machines, which check these files there.
func CheckFiles(cfg *Config) Errors {
	var errs Errors
	add := func(name, key, msg string) {
		errs = append(errs, Error{File: cfg.File, Path: formatPath(nil, []string{"servers", name, key}), Msg: msg})
	}
	for _, name := range sortedKeys(cfg.Servers) {
		s := cfg.Servers[name]
		if s.Command == "" {
			continue
		}
		if s.Cwd != "" {
			st, err := os.Stat(s.Cwd)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				add(name, "cwd", fmt.Sprintf("no such folder %s (cwd is relative to the config's folder, %s)", s.Cwd, cfg.Dir))
				continue
			case err != nil:
				add(name, "cwd", fmt.Sprintf("cannot use the folder %s: %v", s.Cwd, unwrapPath(err)))
				continue
			case !st.IsDir():
				add(name, "cwd", fmt.Sprintf("%s is a file, not a folder", s.Cwd))
				continue
			}
		}
		if !strings.ContainsRune(s.Command, filepath.Separator) && !strings.ContainsRune(s.Command, '/') {
			continue
		}
		st, err := os.Stat(s.Command)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			add(name, "command", fmt.Sprintf("no such file %s (a command given as a path is relative to the config's folder, %s; a command on PATH is named without a folder)", s.Command, cfg.Dir))
		case err != nil:
			add(name, "command", fmt.Sprintf("cannot use %s: %v", s.Command, unwrapPath(err)))
		case st.IsDir():
			add(name, "command", fmt.Sprintf("%s is a folder, not a program", s.Command))
		case runtime.GOOS != "windows" && st.Mode().Perm()&0o111 == 0:
			add(name, "command", fmt.Sprintf("%s is not executable (chmod +x %s, or run it through its interpreter: command: node, args: [%s])", s.Command, s.Command, filepath.Base(s.Command)))
		}
	}
	return errs
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
