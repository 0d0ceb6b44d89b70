package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
)

// remote is a shell on a host: how both runners reach their machines.
// Methods may be called from several goroutines at once.
type remote interface {
	// run runs cmdline, a POSIX shell command line, on the host. stdin
	// (nil: none) feeds the command and ends its input at EOF; stdout and
	// stderr (nil: discarded) get its output. A command that exits with
	// a non-zero code returns an *exitError, and one whose connection
	// dropped an error wrapping errLost. When ctx ends, run ends the
	// command's session (or gcloud process) and returns an error wrapping
	// ctx.Err(); machine.Exec stops a command more gently first.
	run(ctx context.Context, cmdline string, stdin io.Reader, stdout, stderr io.Writer) error
	// copyTo copies the local folder localDir to remoteDir, creating it.
	copyTo(ctx context.Context, localDir, remoteDir string) error
	// copyFrom copies a file or folder to localPath, replacing a file.
	copyFrom(ctx context.Context, remotePath, localPath string) error
	// name says which host this is, for messages.
	name() string
	// close releases the connection.
	close() error
}

// errLost means the connection to a host ended under a command.
var errLost = errors.New("connection lost")

// exitError is a command that ended with a non-zero code or a signal.
type exitError struct {
	host   string
	code   int
	signal string
	msg    string
}

// ExitCode is the command's exit code (-1 when a signal ended it).
func (e *exitError) ExitCode() int {
	if e.signal != "" {
		return -1
	}
	return e.code
}

func (e *exitError) Error() string {
	s := fmt.Sprintf("the command on %s exited with code %d", e.host, e.code)
	if e.signal != "" {
		s = fmt.Sprintf("the command on %s was ended by SIG%s", e.host, e.signal)
	}
	if e.msg != "" {
		s += ": " + e.msg
	}
	return s
}

// output runs cmdline and returns its stdout. A failure says what the
// command printed on stderr.
func output(ctx context.Context, r remote, cmdline string) (string, error) {
	var stdout, stderr bytes.Buffer
	if err := r.run(ctx, cmdline, nil, &stdout, &limited{buf: &stderr, n: 4096}); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return stdout.String(), fmt.Errorf("%w: %s", err, msg)
		}
		return stdout.String(), err
	}
	return stdout.String(), nil
}

// limited keeps the first n bytes written to it and drops the rest.
type limited struct {
	buf *bytes.Buffer
	n   int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// quote quotes s for a POSIX shell: as is when it holds only characters
// the shell leaves alone, else in single quotes.
func quote(s string) string {
	if s == "" {
		return "''"
	}
	if plain.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var (
	plain  = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)
	digits = regexp.MustCompile(`^[0-9]+$`)
)

// commandLine quotes argv into one shell command line.
func commandLine(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = quote(a)
	}
	return strings.Join(q, " ")
}

// hostPath resolves a path on a host against its HOME: ~ and ~/… start at
// home, and so do relative paths (where an SSH session starts).
func hostPath(p, home string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return path.Join(home, p[2:])
	case path.IsAbs(p):
		return path.Clean(p)
	}
	return path.Join(home, p)
}

// machine is a work folder on a host: the runner.Machine both runners
// return.
type machine struct {
	r     remote
	id    string
	dir   string
	mst   []string
	image string
	// remove deletes the machine; nil deletes the work folder.
	remove func(ctx context.Context) error

	mu      sync.Mutex
	removed bool
	// orphans are the process ids of commands whose connection dropped
	// under them.
	orphans []string
}

// orphan records the process id of a command whose connection dropped.
func (m *machine) orphan(pid string) {
	if pid == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.orphans = append(m.orphans, pid)
}

// stopOrphans ends the commands whose connection dropped, in steps:
// SIGTERM, up to five seconds, then SIGKILL to their process groups. A
// worker that lost its coordinator ends by itself; this makes sure of it
// before its folder goes.
func (m *machine) stopOrphans(ctx context.Context) {
	if len(m.orphans) == 0 {
		return
	}
	pids := strings.Join(m.orphans, " ")
	script := "for p in " + pids + "; do kill -TERM $p 2>/dev/null; done; n=0; " +
		"while [ $n -lt 25 ]; do alive=; for p in " + pids + "; do kill -0 $p 2>/dev/null && alive=1; done; " +
		"[ -z \"$alive\" ] && break; sleep 0.2; n=$((n+1)); done; " +
		"for p in " + pids + "; do kill -KILL -- -$p 2>/dev/null; kill -KILL $p 2>/dev/null; done; true"
	output(ctx, m.r, script)
	m.orphans = nil
}

func (m *machine) ID() string      { return m.id }
func (m *machine) WorkDir() string { return m.dir }
func (m *machine) MST() []string   { return m.mst }
func (m *machine) Image() string   { return m.image }

// Exec runs argv from the work folder. The shell first reports its
// process id on stderr (a line Exec takes out) and then execs argv, so
// the program keeps that id. When ctx ends, Exec stops the program in
// steps, each given stopStep: it closes the program's stdin (a worker
// then cancels its trials and says done), sends SIGTERM to the program,
// then SIGKILL to its process group, and last closes the session. The
// signals go through commands of their own (kill), because OpenSSH
// refuses session signals to root logins, and gcloud compute ssh has none.
func (m *machine) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) == 0 {
		return errors.New("exec: no command")
	}
	var token [6]byte
	rand.Read(token[:])
	pid := &pidFilter{w: orDiscard(stderr), marker: "mst-exec-pid-" + hex.EncodeToString(token[:]) + " "}
	defer pid.flush()
	cmdline := "cd " + quote(m.dir) + " && echo " + pid.marker + "$$ >&2 && exec " + commandLine(argv)

	// The command's stdin is a pipe Exec can close whatever stdin does.
	var in io.Reader
	var closeIn func()
	if stdin != nil {
		pr, pw := io.Pipe()
		go func() {
			io.Copy(pw, stdin)
			pw.Close()
		}()
		in, closeIn = pr, func() { pw.Close() }
	} else {
		in, closeIn = nil, func() {}
	}
	runCtx, closeSession := context.WithCancel(context.WithoutCancel(ctx))
	defer closeSession()
	done := make(chan error, 1)
	go func() { done <- m.r.run(runCtx, cmdline, in, stdout, pid) }()
	select {
	case err := <-done:
		if errors.Is(err, errLost) {
			// The command may outlive its connection: Remove ends it.
			m.orphan(pid.get())
		}
		return err
	case <-ctx.Done():
	}

	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*stopStep)
	defer cancel()
	kill := func(sig, target string) func() {
		return func() {
			if p := pid.get(); p != "" {
				output(stopCtx, m.r, "kill -"+sig+" "+target+p+" 2>/dev/null; true")
			}
		}
	}
	steps := []func(){closeIn, kill("TERM", ""), kill("KILL", "-- -"), closeSession}
	for _, step := range steps {
		step()
		select {
		case err := <-done:
			if err == nil {
				return fmt.Errorf("stopped: %w", ctx.Err())
			}
			return fmt.Errorf("stopped (%w): %w", ctx.Err(), err)
		case <-time.After(stopStep):
		}
	}
	return fmt.Errorf("stopped (%w): the command on %s did not end", ctx.Err(), m.r.name())
}

// pidFilter passes a command's stderr on, except for the first line when
// it carries marker: that line gives the command's process id.
type pidFilter struct {
	w      io.Writer
	marker string

	mu   sync.Mutex
	buf  []byte
	done bool
	pid  string
}

func (f *pidFilter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return f.w.Write(p)
	}
	f.buf = append(f.buf, p...)
	i := bytes.IndexByte(f.buf, '\n')
	if i < 0 && len(f.buf) < 256 {
		return len(p), nil
	}
	f.done = true
	rest := f.buf
	if i >= 0 {
		if id, ok := strings.CutPrefix(string(f.buf[:i]), f.marker); ok {
			if id = strings.TrimSpace(id); digits.MatchString(id) {
				f.pid = id
			}
			rest = f.buf[i+1:]
		}
	}
	f.buf = nil
	if len(rest) > 0 {
		if _, err := f.w.Write(rest); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// get returns the process id, or "" when it is not known (yet).
func (f *pidFilter) get() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pid
}

// flush passes on what is still held back.
func (f *pidFilter) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done && len(f.buf) > 0 {
		f.w.Write(f.buf)
	}
	f.done, f.buf = true, nil
}

func (m *machine) CopyTo(ctx context.Context, localDir, remoteDir string) error {
	return m.r.copyTo(ctx, localDir, remoteDir)
}

func (m *machine) CopyFrom(ctx context.Context, remotePath, localPath string) error {
	return m.r.copyFrom(ctx, remotePath, localPath)
}

// Remove deletes the machine and closes the connection. By default it logs
// in again if the connection dropped, ends any command that lost its
// connection and is still running, and deletes the work folder. Once it has
// succeeded, later calls do nothing.
func (m *machine) Remove(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.removed {
		return nil
	}
	remove := m.remove
	if remove == nil {
		remove = func(ctx context.Context) error {
			m.stopOrphans(ctx)
			_, err := output(ctx, m.r, "rm -rf "+quote(m.dir))
			return err
		}
	}
	if err := remove(ctx); err != nil {
		return fmt.Errorf("removing %s: %w", m.id, err)
	}
	m.removed = true
	return m.r.close()
}
