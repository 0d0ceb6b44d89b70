// Package cliproc holds what the CLI clients (claude-code, codex-cli,
// gemini-cli) share about the program they drive: finding it (and saying how
// to install it) and opening a session on it (Program, Open), the session's
// folder, asking its version, the environment and PATH it runs with, quoting
// the end of what it printed, refusing what no CLI can honour yet (rewritten
// tool descriptions), and running it (Start).
//
// A trial's run: Start puts the program in a process group of its own,
// hands each stdout line to the client's parser as it arrives, keeps the
// tail of stderr, and looks for the processes the program starts every
// 250 ms. When the trial's context ends, or the client calls Stop (its
// maxActions reached), the tree gets SIGTERM and, Grace later, SIGKILL.
// Wait returns once the program has exited and nothing of its tree is
// left. Each client keeps only its command line, environment, parser and
// outcome rules.
package cliproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/servers"
)

// versionWithin bounds how long Version waits for the program: a bound for
// a program that hangs, not what it takes (a Node CLI on a loaded machine
// may take tens of seconds to start).
const versionWithin = 2 * time.Minute

// versions remembers what Version found, by program file: a session of a
// CLI client asks once per Open, and the answer does not change while the
// file does not.
var versions sync.Map // versionKey → string

type versionKey struct {
	bin, prefix string
	size        int64
	mod         time.Time
}

// Version runs bin --version with env and returns the version it printed:
// the last line (a CLI may print warnings first), without prefix (such as
// "codex-cli"). The answer is remembered for as long as bin's file stays
// the same.
func Version(ctx context.Context, bin string, env []string, prefix string) (string, error) {
	var key versionKey
	if fi, err := os.Stat(bin); err == nil {
		key = versionKey{bin: bin, prefix: prefix, size: fi.Size(), mod: fi.ModTime()}
		if v, ok := versions.Load(key); ok {
			return v.(string), nil
		}
	}
	v, err := askVersion(ctx, bin, env, prefix)
	if err == nil && key.bin != "" {
		versions.Store(key, v)
	}
	return v, err
}

func askVersion(ctx context.Context, bin string, env []string, prefix string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = env
	cmd.WaitDelay = 3 * time.Second
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return "", fmt.Errorf("%w: %s", err, Tail(string(ee.Stderr), 500))
		}
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	v := strings.TrimSpace(lines[len(lines)-1])
	v = strings.TrimSpace(strings.TrimPrefix(v, prefix))
	if v == "" {
		return "", errors.New("it printed no version")
	}
	return v, nil
}

// Installed returns the version of command as found on PATH, or "" when
// there is none: what a definition's Version reports.
func Installed(command, prefix string) string {
	bin, err := exec.LookPath(command)
	if err != nil {
		return ""
	}
	v, _ := Version(context.Background(), bin, append(os.Environ(), "PATH="+PathWith(bin)), prefix)
	return v
}

// PathWith returns the process's PATH with bin's folder first, so that a
// CLI installed by npm (a Node script) finds the node installed beside it.
func PathWith(bin string) string {
	p := os.Getenv("PATH")
	d := filepath.Dir(bin)
	if p == "" {
		return d
	}
	return d + string(os.PathListSeparator) + p
}

// Tail returns the last n bytes of s, trimmed, marked with "…" when cut.
func Tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// Find returns the absolute path of a CLI client's program, run as command
// (a name on PATH or a path); what names it and setup says how to install
// it, for the error.
func Find(what, command, setup string) (string, error) {
	bin, err := exec.LookPath(command)
	if err != nil {
		return "", fmt.Errorf("%s (%s) was not found (%v): install it with %s, or set clientOptions.command to its path", what, command, err, setup)
	}
	return filepath.Abs(bin)
}

// RefuseToolOverrides fails when a variant rewrites or hides a server's
// tools: a CLI takes tool descriptions from the server itself, so client
// cannot honour them until MST puts a rewriting proxy in between.
func RefuseToolOverrides(client string, list []servers.Server) error {
	for _, srv := range list {
		if len(srv.Tools) > 0 {
			return fmt.Errorf("server %s has tool overrides (rewritten descriptions or hidden tools), which %s cannot apply yet (tool overrides with %s come later: the CLI reads tools from the server itself); remove them from the variant, or use client api", srv.Name, client, client)
		}
	}
	return nil
}
