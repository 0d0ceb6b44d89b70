package detach

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
)

// Exit codes of mst that the coordinator tells apart (internal/cli's).
const (
	exitOK          = 0
	exitPartial     = 3
	exitUnanswered  = 4
	exitGate        = 5
	exitInterrupted = 130
)

// ProgressFile is where the coordinator's commands report their progress
// (mst run and mst grade --progress-file), in the bundle folder.
const ProgressFile = "progress.json"

// Progress is what mst run and mst grade write to --progress-file as they
// go: the run, and its trials planned, collected and graded.
type Progress struct {
	Run       string `json:"run,omitempty"`
	Location  string `json:"location,omitempty"`
	GradeSet  string `json:"gradeSet,omitempty"`
	Planned   int    `json:"planned"`
	Collected int    `json:"collected"`
	Graded    int    `json:"graded"`
}

// Coordinator is a detached run's coordinator: it runs the run's commands
// one after the other on its machine and keeps its records up to date.
type Coordinator struct {
	Spec *Spec
	// Dir is the bundle folder (detach.json, the config, datasets.json);
	// the commands' progress file is written there too.
	Dir     string
	Records *Records
	// SecretsFile is the private copy of the secrets file ("" for none),
	// and SecretsEnv its values as KEY=value pairs: the commands get both.
	SecretsFile string
	SecretsEnv  []string
	// Env is the environment the commands get, with SecretsEnv after it.
	Env []string
	// Log receives the coordinator's output, and the commands': log.txt.
	// LogPath is that file, uploaded whole.
	Log     io.Writer
	LogPath string
	// RunFiles are files the run's id is written to once it is known:
	// beside the owner files of the coordinator's folders, they let mst
	// runner cleanup find those folders by the run's id.
	RunFiles []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// StopGrace is how long a command gets after its interrupt before it
	// is stopped harder; zero means two minutes.
	StopGrace time.Duration

	mu      sync.Mutex
	status  Status
	current *exec.Cmd
	tail    tailLines
	// writeMu orders the status writes.
	writeMu sync.Mutex
	// cancelled is closed, once, when the cancel marker is first seen.
	cancelled  chan struct{}
	cancelOnce sync.Once
}

func (c *Coordinator) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Coordinator) logf(format string, args ...any) {
	line := fmt.Sprintf("%s mst coordinate: %s\n", c.now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
	c.output().Write([]byte(line))
}

// output is the log, with the last lines kept for the status.
func (c *Coordinator) output() io.Writer { return io.MultiWriter(c.Log, &c.tail) }

// Start writes the first running status: once it is written, mst
// coordinate's launcher may return.
func (c *Coordinator) Start(ctx context.Context) error {
	s := c.Spec
	c.status = Status{
		ID: s.ID, Eval: s.Eval, Command: s.Command, State: StateRunning,
		Runner: s.Runner, Machine: s.Machine, Identity: s.Identity, PID: os.Getpid(),
		Launched: s.Launched, Deadline: s.Deadline, Run: s.Resume, Results: s.Results,
		Dir: s.Dir, DirHost: s.DirHost, Store: s.Store, StoreOptions: s.StoreOptions,
	}
	if s.Command == CommandGrade {
		c.status.Phase = PhaseGrade
	} else if s.Resume != "" {
		c.status.Phase = PhaseResume
	} else {
		c.status.Phase = PhaseCollect
	}
	return c.writeStatus(ctx)
}

func (c *Coordinator) writeStatus(ctx context.Context) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	c.status.Updated = c.now().UTC()
	c.status.LastLines = c.tail.lines()
	st := c.scrubber().status(c.status)
	c.mu.Unlock()
	return c.Records.WriteStatus(ctx, st)
}

// scrubber takes this machine's paths out of what goes to the store.
func (c *Coordinator) scrubber() Scrubber {
	return Scrubber{Bundle: c.Dir, SecretsFile: c.SecretsFile}
}

func (c *Coordinator) uploadLog(ctx context.Context) error {
	data, err := os.ReadFile(c.LogPath)
	if err != nil {
		return err
	}
	return c.Records.WriteLog(ctx, c.Spec.ID, []byte(c.scrubber().Text(string(data))))
}

// Run runs the detached run's commands, then ends it: the last status and
// log, the secrets removed (by the caller), the machine's finish command.
// ctx ending (the machine stopping the coordinator) interrupts the command
// under way; the run then ends failed, with what was collected kept.
func (c *Coordinator) Run(ctx context.Context) error {
	s := c.Spec
	ctx, stopDeadline := context.WithDeadlineCause(ctx, s.Deadline, errDeadline)
	defer stopDeadline()
	c.cancelled = make(chan struct{})
	// Each beat's reads and writes of the records get a bound of their
	// own: a request to the store that never answers must not stop the
	// heartbeat for good (the run would show lost while it runs); the
	// next beat tries again.
	beat := func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, recordsTimeout)
		defer cancel()
		c.readProgress()
		c.checkCancel(ctx)
		if err := c.writeStatus(ctx); err != nil {
			c.logf("warning: %v", err)
		}
	}
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		hb := time.NewTicker(s.heartbeat())
		lg := time.NewTicker(s.logEvery())
		pr := time.NewTicker(min(s.heartbeat(), progressPoll))
		defer hb.Stop()
		defer lg.Stop()
		defer pr.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-hb.C:
				beat(hbCtx)
			case <-pr.C:
				// A run's id is written as soon as the command reports
				// it, not at the next heartbeat: a coordinator lost
				// before then would leave no way to resume the run.
				if c.readProgress() {
					ctx, cancel := context.WithTimeout(hbCtx, recordsTimeout)
					if err := c.writeStatus(ctx); err != nil {
						c.logf("warning: %v", err)
					}
					cancel()
				}
			case <-lg.C:
				ctx, cancel := context.WithTimeout(hbCtx, recordsTimeout)
				if err := c.uploadLog(ctx); err != nil {
					c.logf("warning: uploading the log: %v", err)
				}
				cancel()
			}
		}
	}()
	// A cancel written before the coordinator started still counts.
	beat(ctx)

	state, errMsg := c.steps(ctx)
	stopHB()
	<-hbDone
	if context.Cause(ctx) == errDeadline && state != StateDone {
		state, errMsg = StateFailed, fmt.Sprintf("the coordinator reached its deadline (%s); what was collected is kept: finish the run with %s", s.Deadline.Format(time.RFC3339), ResumeHint(c.runID(), s.Results, StoreArgs(s.Store, s.StoreOptions)...))
	}
	c.readProgress()
	end := c.now().UTC()
	c.mu.Lock()
	c.status.State, c.status.Error, c.status.Ended = state, errMsg, &end
	c.mu.Unlock()
	c.logf("the detached run is %s%s", state, suffix(errMsg))
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	err := c.writeStatus(fctx)
	if lerr := c.uploadLog(fctx); lerr != nil && err == nil {
		err = lerr
	}
	return err
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

var errDeadline = errors.New("the coordinator's deadline passed")

// recordsTimeout bounds one heartbeat's (or one log upload's) requests
// to the store; a status older than LostAfter shows the run lost, so a
// beat must give up well before that.
const recordsTimeout = time.Minute

func (c *Coordinator) runID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.Run != "" {
		return c.status.Run
	}
	return "RUN"
}

// checkCancel reads the cancel marker; the first time it is there, the
// command under way is interrupted and no other starts. A marker that
// cannot be read counts as absent: the next look may see it.
func (c *Coordinator) checkCancel(ctx context.Context) {
	ok, err := c.Records.Cancelled(ctx, c.Spec.ID)
	if err != nil {
		c.logf("warning: looking for the cancel marker: %v", err)
		return
	}
	if !ok {
		return
	}
	c.cancelOnce.Do(func() {
		c.logf("the cancel marker is there: interrupting the command under way, and starting no other")
		c.mu.Lock()
		c.status.Cancelling = true
		c.mu.Unlock()
		close(c.cancelled)
		c.interrupt()
	})
}

// steps runs the commands and says how the run ended.
func (c *Coordinator) steps(ctx context.Context) (state, errMsg string) {
	s := c.Spec
	isCancelled := func() bool {
		select {
		case <-c.cancelled:
			return true
		default:
			return false
		}
	}
	if s.Command == CommandGrade {
		code, err := c.command(ctx, PhaseGrade, c.gradeArgs(s.Resume, s.Runner))
		return c.ended(ctx, code, err, isCancelled(), "mst grade")
	}
	first := PhaseCollect
	if s.Resume != "" {
		first = PhaseResume
	}
	code, err := c.command(ctx, first, c.runArgs(first == PhaseResume))
	resumed := first == PhaseResume
	if err == nil && code == exitPartial && !isCancelled() && ctx.Err() == nil && !c.pastRunDeadline() && c.runID() != "RUN" {
		// One more attempt at the trials still missing, as a person
		// would type it.
		code, err = c.command(ctx, PhaseResume, c.runArgs(true))
		resumed = true
	}
	if err != nil || isCancelled() || ctx.Err() != nil {
		return c.ended(ctx, code, err, isCancelled(), "mst run")
	}
	switch code {
	case exitOK, exitUnanswered, exitGate:
	case exitPartial:
		if c.pastRunDeadline() {
			return StateDone, ""
		}
		if resumed {
			return StateFailed, fmt.Sprintf("the run is still partial after a resume; finish it with %s", ResumeHint(c.runID(), s.Results, StoreArgs(s.Store, s.StoreOptions)...))
		}
		return StateFailed, "the run is partial"
	default:
		return c.ended(ctx, code, nil, false, "mst run")
	}
	if s.GradeRunner == "" {
		return StateDone, ""
	}
	code, err = c.command(ctx, PhaseGrade, c.gradeArgs(c.runID(), s.GradeRunner))
	return c.ended(ctx, code, err, isCancelled(), "mst grade")
}

// ended says what a last command's exit means.
func (c *Coordinator) ended(ctx context.Context, code int, err error, cancelled bool, what string) (string, string) {
	switch {
	case cancelled:
		return StateCancelled, ""
	case err != nil:
		return StateFailed, fmt.Sprintf("%s could not run: %v", what, err)
	case code == exitOK || code == exitUnanswered || code == exitGate:
		return StateDone, ""
	case ctx.Err() != nil:
		return StateFailed, fmt.Sprintf("%s was stopped: %v", what, context.Cause(ctx))
	}
	return StateFailed, fmt.Sprintf("%s exited with code %d: its last lines are in the status, its output in the log", what, code)
}

func (c *Coordinator) pastRunDeadline() bool {
	d := time.Duration(c.Spec.RunDeadline)
	return d > 0 && c.now().After(c.Spec.Launched.Add(d))
}

// common are the flags every command gets.
func (c *Coordinator) common() []string {
	s := c.Spec
	a := []string{"--results", s.Results, "--progress-file", filepath.Join(c.Dir, ProgressFile),
		"--loaded-datasets", filepath.Join(c.Dir, DatasetsFile), "--config-dir", s.ConfigDir, "--config-origin", s.ConfigOrigin}
	if c.SecretsFile != "" {
		a = append(a, "--secrets-file", c.SecretsFile)
	}
	return a
}

func (c *Coordinator) storeFlags() []string {
	var a []string
	if c.Spec.Store != "" {
		a = append(a, "--store", c.Spec.Store)
	}
	for _, o := range c.Spec.StoreOptions {
		a = append(a, "--store-option", o)
	}
	return a
}

// runArgs is mst run's command line: a new run, or a resume of the run.
func (c *Coordinator) runArgs(resume bool) []string {
	s := c.Spec
	a := append([]string(nil), s.MST...)
	a = append(a, "run", filepath.Join(c.Dir, s.Config))
	a = append(a, c.common()...)
	a = append(a, c.storeFlags()...)
	if s.MaxErrored != "" {
		a = append(a, "--max-errored", s.MaxErrored)
	}
	// A resume names the runner too: the one the run was launched with
	// (as resolved, with the options its run.json recorded), or the one
	// mst run --resume --detach was given.
	a = append(a, "--runner", s.Runner)
	for _, o := range s.RunnerOptions {
		a = append(a, "--runner-option", o)
	}
	if resume {
		a = append(a, "--resume", c.runID())
		if s.RetryErrored && (s.Resume != "" || c.runID() != "RUN") {
			a = append(a, "--retry-errored")
		}
		if d := time.Duration(s.RunDeadline); d > 0 {
			if left := s.Launched.Add(d).Sub(c.now()); left > time.Second {
				a = append(a, "--deadline", left.Round(time.Second).String())
			}
		}
		return a
	}
	for _, v := range s.Variants {
		a = append(a, "--variant", v)
	}
	for _, id := range s.Cases {
		a = append(a, "--case", id)
	}
	if s.Trials > 0 {
		a = append(a, "--trials", strconv.Itoa(s.Trials))
	}
	if s.Limit > 0 {
		a = append(a, "--limit", strconv.Itoa(s.Limit))
	}
	if s.NoGrade || s.GradeRunner != "" {
		// Grading on a runner is a step of its own, after every resume.
		a = append(a, "--no-grade")
	}
	if d := time.Duration(s.RunDeadline); d > 0 {
		a = append(a, "--deadline", d.String())
	}
	return a
}

// gradeArgs is mst grade's command line for run on runner.
func (c *Coordinator) gradeArgs(run, runner string) []string {
	s := c.Spec
	a := append([]string(nil), s.MST...)
	a = append(a, "grade", run, "-c", filepath.Join(c.Dir, s.Config))
	a = append(a, c.common()...)
	a = append(a, "--runner", runner)
	for _, o := range s.RunnerOptions {
		a = append(a, "--runner-option", o)
	}
	if s.Graders {
		a = append(a, "--graders", filepath.Join(c.Dir, GradersFile))
	}
	if s.GradeSet != "" {
		a = append(a, "--resume", s.GradeSet)
	}
	return a
}

// shown is argv as a person would read it: the secrets file's private
// path and the bundle's files named plainly.
func (c *Coordinator) shown(argv []string) string {
	var parts []string
	for i, a := range argv {
		if i == 0 {
			a = "mst"
		}
		a = strings.ReplaceAll(a, c.Dir+string(filepath.Separator), "")
		if c.SecretsFile != "" && a == c.SecretsFile {
			a = "SECRETS-FILE"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// command runs one command to its end and returns its exit code; err is
// set when it could not be started. It reads the cancel marker first: a
// cancel written since the last heartbeat starts nothing, as does one
// already seen.
func (c *Coordinator) command(ctx context.Context, phase string, argv []string) (int, error) {
	if ctx.Err() != nil {
		return -1, context.Cause(ctx)
	}
	c.checkCancel(ctx)
	c.mu.Lock()
	if c.status.Cancelling {
		c.mu.Unlock()
		return exitInterrupted, nil
	}
	c.status.Phase = phase
	c.status.Commands = append(c.status.Commands, c.shown(argv[len(c.Spec.MST)-1:]))
	c.status.ExitCode = nil
	cmd := exec.Command(argv[0], argv[1:]...)
	// The program sees itself as mst, whatever its file is named (a test
	// binary that acts as mst tells by it).
	cmd.Args[0] = "mst"
	cmd.Dir = c.Dir
	cmd.Env = append(append(append([]string(nil), c.Env...), c.Spec.Env...), c.SecretsEnv...)
	out := c.output()
	cmd.Stdout, cmd.Stderr = out, out
	// A process group of its own, so an interrupt reaches the command
	// and all it started, as Ctrl-C at a terminal would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.mu.Unlock()
	c.logf("%s: %s", phase, c.shown(argv))
	if err := c.writeStatus(ctx); err != nil {
		c.logf("warning: %v", err)
	}
	c.mu.Lock()
	err := cmd.Start()
	if err == nil {
		c.current = cmd
	}
	c.mu.Unlock()
	if err != nil {
		return -1, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			c.logf("stopping the command under way: %v", context.Cause(ctx))
			c.interrupt()
		case <-done:
		}
	}()
	werr := cmd.Wait()
	close(done)
	c.mu.Lock()
	c.current = nil
	code := cmd.ProcessState.ExitCode()
	c.status.ExitCode = &code
	c.mu.Unlock()
	c.readProgress()
	c.logf("%s ended with exit code %d", phase, code)
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) {
		return code, werr
	}
	return code, nil
}

// interrupt sends the command under way SIGINT, as Ctrl-C does; one that
// has not ended after the stop grace gets SIGTERM, then SIGKILL.
func (c *Coordinator) interrupt() {
	c.mu.Lock()
	cmd := c.current
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pid := cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGINT)
	grace := c.StopGrace
	if grace <= 0 {
		grace = 2 * time.Minute
	}
	go func() {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			time.Sleep(grace)
			c.mu.Lock()
			still := c.current == cmd
			c.mu.Unlock()
			if !still {
				return
			}
			syscall.Kill(-pid, sig)
		}
	}()
}

// progressPoll is how often the coordinator looks at the progress file
// for a run's id or a grade set not yet in its status.
const progressPoll = time.Second

// readProgress takes the counts the command under way reported, and says
// whether it named a run or a grade set the status did not have.
func (c *Coordinator) readProgress() (named bool) {
	data, err := os.ReadFile(filepath.Join(c.Dir, ProgressFile))
	if err != nil {
		return false
	}
	var p Progress
	if json.Unmarshal(data, &p) != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	named = (p.Run != "" && p.Run != c.status.Run) || (p.GradeSet != "" && p.GradeSet != c.status.GradeSet)
	if p.Run != "" && p.Run != c.status.Run {
		for _, f := range c.RunFiles {
			// A folder that is gone needs no note.
			atomicfile.Write(f, []byte(p.Run+"\n"))
		}
	}
	if p.Run != "" {
		c.status.Run = p.Run
	}
	if p.Location != "" {
		c.status.RunLocation = p.Location
	}
	if p.GradeSet != "" {
		c.status.GradeSet = p.GradeSet
	}
	c.status.Planned, c.status.Collected, c.status.Graded = p.Planned, p.Collected, p.Graded
	return named
}

// tailLines keeps the last lines written to it.
type tailLines struct {
	mu      sync.Mutex
	partial []byte
	last    []string
}

const keptLines = 20

func (t *tailLines) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(t.partial[:i]), "\r")
		// A live progress line redraws itself with \r: keep its last form.
		if j := strings.LastIndexByte(line, '\r'); j >= 0 {
			line = line[j+1:]
		}
		t.partial = t.partial[i+1:]
		if len(line) > 400 {
			line = strings.ToValidUTF8(line[:400], "") + "…"
		}
		t.last = append(t.last, line)
		if len(t.last) > keptLines {
			t.last = t.last[len(t.last)-keptLines:]
		}
	}
	if len(t.partial) > 4096 {
		t.partial = t.partial[len(t.partial)-4096:]
	}
	return len(p), nil
}

func (t *tailLines) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.last...)
}
