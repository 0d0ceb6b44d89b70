package claudecode

import (
	"github.com/mst-eval/mst/internal/tailbuf"
	"syscall"

	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/mst-eval/mst/internal/proctree"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/transcript"
)

// killGrace is how long the CLI's process group has after SIGTERM before
// SIGKILL.
const killGrace = 3 * time.Second

// stderrTail bounds how much of the CLI's stderr a trial keeps.
const stderrTail = 4096

// Run runs one trial: one CLI process, read line by line.
func (s *session) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return client.Result{}, errors.New("the claude-code session is closed")
	}
	version := s.version
	if ctx.Err() != nil {
		return s.interrupted(ctx, client.Result{ClientVersion: version}), nil
	}

	tdir, err := os.MkdirTemp(s.dir, "trial-")
	if err != nil {
		return client.Result{}, fmt.Errorf("making the trial's folder: %w", err)
	}
	defer os.RemoveAll(tdir)
	home, work := filepath.Join(tdir, "home"), filepath.Join(tdir, "work")
	for _, d := range []string{filepath.Join(home, ".claude"), work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return client.Result{}, fmt.Errorf("making the trial's folder: %w", err)
		}
	}

	lines := &lineWriter{}
	stderr := tailbuf.New(stderrTail)
	cmd := exec.Command(s.cli, s.args(t.Prompt)...)
	cmd.Dir = work
	cmd.Env = s.env(home)
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = lines
	cmd.Stderr = stderr
	// A straggler that escaped the group and holds the pipes open cannot
	// keep the trial waiting.
	cmd.WaitDelay = killGrace
	proctree.Group(cmd)
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return client.Result{ClientVersion: version, Outcome: transcript.Outcome{
			Status: transcript.Errored, Cause: transcript.CauseClient,
			Detail: fmt.Sprintf("starting the Claude Code CLI (%s): %v", s.cli, err),
		}}, nil
	}
	if s.started != nil {
		s.started(cmd.Process.Pid)
	}
	tree := proctree.Of(cmd)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		// Servers the CLI starts are remembered as they appear, so they
		// can be stopped even if they leave its process group.
		scan := time.NewTicker(250 * time.Millisecond)
		defer scan.Stop()
	wait:
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				break wait
			case <-scan.C:
				tree.Scan()
			}
		}
		tree.Signal(syscall.SIGTERM)
		timer := time.NewTimer(killGrace)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
		}
		tree.Signal(syscall.SIGKILL)
	}()
	waitErr := cmd.Wait()
	close(done)
	<-stopped
	// Whatever the CLI left behind (a server it did not stop) goes with it.
	tree.Signal(syscall.SIGKILL)

	res := parse(lines.take(), t.Prompt, s.params.Servers, s.infos)
	res.ClientVersion = version
	if res.ClientTelemetry == nil {
		res.ClientTelemetry = map[string]any{}
	}
	res.ClientTelemetry["wall_ms"] = float64(time.Since(started).Microseconds()) / 1000
	if res.Servers == nil {
		res.Servers = s.infos
	}
	if ctx.Err() != nil {
		return s.interrupted(ctx, res), nil
	}
	if res.Outcome.Status == "" {
		detail := "the Claude Code CLI ended without a result line"
		if waitErr != nil {
			detail = fmt.Sprintf("the Claude Code CLI failed (%v) without a result line", waitErr)
		}
		if tl := strings.TrimSpace(stderr.String()); tl != "" {
			detail += "; its stderr ends with: " + tl
		}
		res.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: detail}
	}
	if res.Outcome.Status == transcript.Errored && res.Outcome.Cause == transcript.CauseServer {
		res.Next = client.Continue // the next trial starts its servers afresh
	}
	return res, nil
}

// interrupted is the result of a trial whose context ended: timed out at
// its deadline, cancelled otherwise. MST decides which in the end.
func (s *session) interrupted(ctx context.Context, res client.Result) client.Result {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.Outcome = transcript.Outcome{Status: transcript.TimedOut, Detail: "the trial's timeout passed before the CLI answered"}
	} else {
		res.Outcome = transcript.Outcome{Status: transcript.Cancelled, Detail: ctx.Err().Error()}
	}
	res.Answer = ""
	return res
}

// line is one stdout line of the CLI and when it arrived.
type line struct {
	at   time.Time
	text []byte
}

// lineWriter splits what the CLI writes into lines, stamping each with its
// arrival time.
type lineWriter struct {
	mu      sync.Mutex
	partial []byte
	lines   []line
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if l := bytes.TrimSpace(w.partial[:i]); len(l) > 0 {
			w.lines = append(w.lines, line{at: now, text: append([]byte(nil), l...)})
		}
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

// take returns every line, the unterminated last one included.
func (w *lineWriter) take() []line {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.lines
	if l := bytes.TrimSpace(w.partial); len(l) > 0 {
		out = append(out, line{at: time.Now(), text: append([]byte(nil), l...)})
	}
	w.lines, w.partial = nil, nil
	return out
}
