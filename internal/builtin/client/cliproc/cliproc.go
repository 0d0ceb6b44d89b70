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

// VersionTimeout bounds one `--version` of a client's program. It is a
// bound for a program that hangs, not what one takes: a Node CLI takes
// seconds to start on a loaded machine (the Gemini CLI 12 s on a 2-core
// machine at a load of 50, and more when several start at once), so the
// bound is generous; a program that does not answer within it fails the
// shard at its start, with ErrVersionTimeout, rather than each of its
// trials.
const VersionTimeout = 2 * time.Minute

// ErrVersionTimeout is wrapped by the error of a `--version` that did not
// answer within its bound.
var ErrVersionTimeout = errors.New("the program did not answer --version in time")

// versions remembers what Version found, by program file: a CLI client's
// version is asked by the worker (for its hello), by the preflight and by
// each session's Open, and the answer does not change while the file does
// not.
var versions sync.Map // versionKey → string (the last line the program printed)

type versionKey struct {
	bin  string
	size int64
	mod  time.Time
}

// Version runs `bin --version` and returns the version it printed: the
// first word of its last line (a CLI may print warnings first, and a note
// after the number), without prefix (such as "codex-cli"). The program
// runs with VersionEnv(bin) and the variables in extra (KEY=value: what
// the program needs to answer quickly, never a secret), in a folder of
// the system's temporary folder, for VersionTimeout at most. The answer is
// remembered for as long as bin's file stays the same.
func Version(ctx context.Context, bin, prefix string, extra ...string) (string, error) {
	return version(ctx, bin, prefix, VersionTimeout, extra)
}

func version(ctx context.Context, bin, prefix string, within time.Duration, extra []string) (string, error) {
	var key versionKey
	if fi, err := os.Stat(bin); err == nil {
		key = versionKey{bin: bin, size: fi.Size(), mod: fi.ModTime()}
		if line, ok := versions.Load(key); ok {
			return versionIn(line.(string), prefix)
		}
	}
	line, err := askVersion(ctx, bin, within, extra)
	if err != nil {
		return "", err
	}
	if key.bin != "" {
		versions.Store(key, line)
	}
	return versionIn(line, prefix)
}

// versionIn reads the version from the last line a program printed.
func versionIn(line, prefix string) (string, error) {
	f := strings.Fields(strings.TrimPrefix(line, prefix))
	if len(f) == 0 {
		return "", errors.New("it printed no version")
	}
	return f[0], nil
}

// askVersion runs bin --version and returns the last line it printed.
func askVersion(ctx context.Context, bin string, within time.Duration, extra []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = append(VersionEnv(bin), extra...)
	cmd.Dir = os.TempDir()
	cmd.WaitDelay = 3 * time.Second
	out, err := cmd.Output()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "", fmt.Errorf("%w: `%s --version` did not answer within %s", ErrVersionTimeout, bin, within)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return "", fmt.Errorf("%w: %s", err, Tail(string(ee.Stderr), 500))
		}
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// versionVars are the variables of MST's environment a program's
// `--version` gets besides PATH: a home to read its own settings from,
// and on Windows what any program needs to start. Nothing else of MST's
// environment (keys, tokens, the run's secrets) reaches it.
var versionVars = []string{"HOME", "SYSTEMROOT", "USERPROFILE", "PATHEXT", "COMSPEC"}

// VersionEnv is the whole environment `bin --version` runs with: PATH
// with bin's folder first (see PathWith) and versionVars as MST's own
// environment has them.
func VersionEnv(bin string) []string {
	env := []string{"PATH=" + PathWith(bin)}
	for _, k := range versionVars {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
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
