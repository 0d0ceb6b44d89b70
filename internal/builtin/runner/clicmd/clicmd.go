// Package clicmd runs the command-line programs (docker, kubectl) through
// which the docker and kubernetes runners reach their machines: a command
// whose stdout is its answer, a command whose stdout or stdin is a stream,
// and a long command with stdin attached that stops in steps.
//
// Every command starts in a process group of its own, so a Ctrl-C at the
// terminal reaches only the coordinator: it cancels the run through the
// protocol, and the worker's channel and the copies of its files outlive
// the signal. Every command inherits MST's environment (DOCKER_HOST,
// KUBECONFIG and the user's configuration apply).
package clicmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mst-eval/mst/internal/ground/proctree"
)

// waitDelay is how long a command gets, once its context has ended, before
// it is killed and its pipes are closed.
const waitDelay = 5 * time.Second

// CLI is one program.
type CLI struct {
	// Name is the program as errors name it ("docker").
	Name string
	// Bin is its path.
	Bin string
	// Short shortens a command's arguments for errors; nil keeps the first
	// three.
	Short func(args []string) []string
	// Limit bounds how long a command of Run, RunWriting or RunReading
	// may take, by its arguments (0: no bound); nil means DefaultLimit.
	// A program that hangs (a daemon that stopped answering) thus ends the
	// command with an error that says so, rather than hold the run.
	Limit func(args []string) time.Duration
}

// Bounds of DefaultLimit.
const (
	// ShortLimit bounds a command that asks, creates, copies or removes.
	ShortLimit = 10 * time.Minute
	// LongLimit bounds a command that builds, loads or fetches an image,
	// or runs a setup script in a throwaway container.
	LongLimit = 30 * time.Minute
)

// DefaultLimit is LongLimit for the commands that build or move images
// (build, load, save, import, pull, push, and a throwaway run --rm), and
// ShortLimit for every other.
func DefaultLimit(args []string) time.Duration {
	if len(args) == 0 {
		return ShortLimit
	}
	verb := args[0]
	if (verb == "image" || verb == "buildx") && len(args) > 1 {
		verb = args[1] // docker image load, docker buildx build
	}
	switch verb {
	case "build", "load", "save", "import", "pull", "push":
		return LongLimit
	case "run":
		for _, a := range args[1:] {
			if a == "--rm" {
				return LongLimit
			}
		}
	}
	return ShortLimit
}

// bound is ctx with the command's limit, and how to tell afterwards that
// the limit, not ctx, ended it.
func (c *CLI) bound(ctx context.Context, args []string) (context.Context, context.CancelFunc, time.Duration) {
	limit := DefaultLimit
	if c.Limit != nil {
		limit = c.Limit
	}
	d := limit(args)
	if d <= 0 {
		return ctx, func() {}, 0
	}
	bctx, cancel := context.WithTimeoutCause(ctx, d, errLimit)
	return bctx, cancel, d
}

// errLimit is the cause of a command's context that its limit ended.
var errLimit = errors.New("the command's time limit passed")

// limited turns the error of a command its limit ended into one that says
// so.
func (c *CLI) limited(ctx context.Context, err error, d time.Duration) error {
	if err == nil || d == 0 || !errors.Is(context.Cause(ctx), errLimit) {
		return err
	}
	return fmt.Errorf("%w: it did not finish within %s (is the %s daemon or cluster answering?)", err, d, c.Name)
}

// Find looks name up on PATH; missing is the error when it is not there.
func Find(name string, missing error) (*CLI, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, missing
	}
	return &CLI{Name: name, Bin: bin}, nil
}

// Error is a command that failed, with the end of what it printed on
// stderr.
type Error struct {
	Name   string
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("%s %s: %s", e.Name, strings.Join(e.Args, " "), msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Says reports whether err is a failed command whose stderr holds text,
// such as "No such container".
func Says(err error, text string) bool {
	var ce *Error
	return errors.As(err, &ce) && strings.Contains(ce.Stderr, text)
}

// stderrTail is how much of a command's stderr an Error keeps: the end,
// where the reason is.
const stderrTail = 8 << 10

// tail keeps the last stderrTail bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func (c *CLI) command(ctx context.Context, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	proctree.Group(cmd)
	cmd.WaitDelay = waitDelay
	return cmd
}

func (c *CLI) fail(args []string, stderr *tail, err error) error {
	short := c.Short
	if short == nil {
		short = ShortArgs
	}
	return &Error{Name: c.Name, Args: short(args), Stderr: stderr.String(), Err: err}
}

// ShortArgs keeps the first three arguments of a command, for errors: a
// docker run has dozens.
func ShortArgs(args []string) []string {
	if len(args) > 3 {
		return append(append([]string(nil), args[:3]...), "…")
	}
	return args
}

// Run runs the program with args and returns its stdout, trimmed. stdin
// may be nil. A failure is an *Error quoting its stderr.
func (c *CLI) Run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	ctx, cancel, d := c.bound(ctx, args)
	defer cancel()
	var stdout bytes.Buffer
	stderr := &tail{}
	cmd := c.command(ctx, args)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, stderr
	if err := cmd.Run(); err != nil {
		return "", c.limited(ctx, c.fail(args, stderr, err), d)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// RunWriting runs the program with args, its stdin fed by write (a tar
// stream for a copy in, say). write's error, if the program did not fail
// first, is the error.
func (c *CLI) RunWriting(ctx context.Context, write func(io.Writer) error, args ...string) error {
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		err := write(pw)
		pw.CloseWithError(err)
		werr <- err
	}()
	_, err := c.Run(ctx, pr, args...)
	// A program that ended without reading everything must not hold the
	// writer.
	pr.CloseWithError(io.ErrClosedPipe)
	if w := <-werr; err == nil && w != nil && !errors.Is(w, io.ErrClosedPipe) {
		return w
	}
	return err
}

// RunReading runs the program with args and hands its stdout to read (a
// tar stream for a copy out, say). The program's failure comes first, then
// read's error.
func (c *CLI) RunReading(ctx context.Context, read func(io.Reader) error, args ...string) error {
	ctx, cancel, d := c.bound(ctx, args)
	defer cancel()
	stderr := &tail{}
	cmd := c.command(ctx, args)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return c.fail(args, stderr, err)
	}
	rerr := read(out)
	// Drain, so the program can end.
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return c.limited(ctx, c.fail(args, stderr, err), d)
	}
	return rerr
}

// Stop says how Exec stops a command when its context ends. First the
// command's stdin is closed, which lets a command that reads it (a worker)
// end by itself. Then, with Remote, Remote stops the command's processes
// on the machine (SIGTERM, Grace, SIGKILL there) and the program gets
// Grace and a few seconds more to see it end; without Remote, the program
// is sent SIGTERM and gets Grace. Then it is killed.
type Stop struct {
	// Grace is how long each step waits.
	Grace time.Duration
	// Remote stops the command's processes on the machine; it gets a
	// context detached from Exec's. nil when it cannot.
	Remote func(ctx context.Context) error
}

// Exec runs the program with args, stdout and stderr attached, and stdin
// copied in by a goroutine of Exec's own, which Exec does not wait for: a
// caller keeps a worker's stdin open for the whole shard, and Exec must
// return as soon as the program has ended. When ctx ends the command is
// stopped as stop says. A non-zero exit comes back as an *exec.ExitError
// (docker exec and kubectl exec exit with the command's code).
func (c *CLI) Exec(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, stop Stop) error {
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	proctree.Group(cmd)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	pipe, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	// Wait returns only after Cancel has returned, so the Go happens
	// before stopping.Wait below.
	var stopping sync.WaitGroup
	cmd.Cancel = func() error {
		pipe.Close()
		if stop.Remote == nil {
			return cmd.Process.Signal(syscall.SIGTERM)
		}
		stopping.Go(func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*stop.Grace+waitDelay)
			defer cancel()
			stop.Remote(rctx)
		})
		return nil
	}
	cmd.WaitDelay = stop.Grace
	if stop.Remote != nil {
		// The remote stop takes its grace and the time to reach the
		// machine.
		cmd.WaitDelay += waitDelay
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		// Wait closes pipe once the program has exited; the copy then
		// ends at its next write, or when stdin ends.
		if stdin != nil {
			io.Copy(pipe, stdin)
		}
		pipe.Close()
	}()
	err = cmd.Wait()
	stopping.Wait()
	if ctx.Err() != nil {
		if err == nil {
			err = ctx.Err()
		}
		return fmt.Errorf("stopped: %w", err)
	}
	return err
}
