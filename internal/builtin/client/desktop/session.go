// Package desktop is what the desktop app clients (cowork, chatgpt,
// codex-app) share: a session that runs one conversation at a time in an
// installed app, under MST's rules (a deadline from prompt to transcript,
// readiness before the first prompt, one reset and diagnosis policy).
//
// How a session drives the app depends on the OS of the machine that runs
// the trials, decided when the session opens: on Linux, the accessibility
// bus (package atspi), with no planner model; on macOS, Computer Use with
// the computerUseModel option as its planner. A Profile holds everything
// specific to one app; the rest is shared.
//
// On Linux a session needs an owned desktop (OwnedEnv): before a
// variant's first trial MST writes the app's managed settings so that its
// MCP servers are MST's front for this session (front.go), restarts the
// app (RestartEnv), and waits for its window. Several variants may share
// one app, one trial at a time (the seat); the app is prepared again when
// the variant changes. The file is put back at the end.
package desktop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/transcript"
)

// App describes one desktop app client for Open.
type App struct {
	// Client is the client's name ("cowork").
	Client string
	// Product is the app's name for people ("Claude Desktop").
	Product string
	// Linux is the app's built-in Linux profile (ProfileEnv may replace it).
	Linux Profile
	// NativeInTelemetry keeps the app's own record of the conversation in
	// the transcript's client telemetry, redacted, instead of reading the
	// transcript's messages from it.
	NativeInTelemetry bool
}

// options are the desktop clients' options this package reads.
type options struct {
	MaxActions       int    `json:"maxActions"`
	AppVersion       string `json:"appVersion"`
	ComputerUseModel string `json:"computerUseModel"`
}

// driver is the per-OS part of a session.
type driver interface {
	// kind names the automation ("at-spi", "computer-use").
	kind() string
	// running reports whether the app is up with its main window.
	running(ctx context.Context) bool
	// ready waits until the app can take a prompt after a (re)start.
	ready(ctx context.Context) error
	// owned is true when MST prepares the app for each variant (writes its
	// settings and restarts it).
	owned() bool
	// converse starts a new conversation, submits prompt and waits for
	// the answer.
	converse(ctx context.Context, prompt string, budget *budget) (seen, error)
	// reset brings the app back to an empty conversation, restarting it
	// when it is gone or stuck.
	reset(ctx context.Context) error
	// diagnose describes the app's state now.
	diagnose(ctx context.Context) map[string]any
	// stop ends the app MST started (owned mode), when it runs: the last
	// session of a run calls it, so that nothing MST started outlives it.
	stop(ctx context.Context) error
	close() error
}

// seen is what the automation saw of one conversation.
type seen struct {
	Answer string
	// Failed is the app's own report of a failure ("error: …" status).
	Failed string
	// Gone is true when the app exited during the trial.
	Gone bool
	// Strays are the titles of stray windows closed on the way.
	Strays []string
	Sent   time.Time
	// Telemetry is the driver's own account (the planner's cost).
	Telemetry map[string]any
}

// budget counts a trial's UI actions against maxActions.
type budget struct {
	max, used int
}

var errBudget = errors.New("the trial used all of its UI actions (maxActions)")

func (b *budget) take() error {
	if b.max > 0 && b.used >= b.max {
		return fmt.Errorf("%w: %d", errBudget, b.max)
	}
	b.used++
	return nil
}

// Session is an open desktop client.
type Session struct {
	app     App
	p       client.OpenParams
	opts    options
	prof    Profile
	front   *front
	seat    *seat
	drv     driver
	version string
	home    string
	closed  sync.Once
}

// Open opens a session on this machine's app.
func Open(ctx context.Context, app App, p client.OpenParams) (client.Session, error) {
	var opts options
	if len(p.Options) > 0 {
		if err := json.Unmarshal(p.Options, &opts); err != nil {
			return nil, fmt.Errorf("%s: reading clientOptions: %w", app.Client, err)
		}
	}
	switch runtime.GOOS {
	case "linux":
		return openLinux(ctx, app, p, opts)
	case "darwin":
		return openMacOS(ctx, app, p, opts)
	}
	return nil, fmt.Errorf("%s runs only on macOS and Linux, not %s", app.Client, runtime.GOOS)
}

func openLinux(ctx context.Context, app App, p client.OpenParams, opts options) (client.Session, error) {
	if !owned() {
		return nil, notOwned(app)
	}
	prof, err := LoadProfile(app.Client, app.Linux)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", app.Client, err)
	}
	home, _ := os.UserHomeDir()
	s := &Session{app: app, p: p, opts: opts, prof: prof, home: home}
	s.version = appVersion(ctx, prof)
	if opts.AppVersion != "" && s.version != opts.AppVersion {
		found := s.version
		if found == "" {
			found = "no version MST could read"
		}
		return nil, fmt.Errorf("%s: clientOptions.appVersion asks for %s %s, and this machine has %s", app.Client, app.Product, opts.AppVersion, found)
	}
	if len(p.Servers) > 0 && !p.Proxied {
		return nil, fmt.Errorf("%s: the variant's servers must come through MST's proxy (an internal error: the worker did not proxy them)", app.Client)
	}
	names := make([]string, len(p.Servers))
	for i, srv := range p.Servers {
		names[i] = srv.Name
	}
	if s.front, err = newFront(names, p.Logger); err != nil {
		return nil, err
	}
	drv, err := newLinuxDriver(ctx, s)
	if err != nil {
		s.front.close()
		return nil, fmt.Errorf("%s: %w", app.Client, err)
	}
	s.drv = drv
	s.seat = takeSeat(prof.SettingsPath)
	return s, nil
}

// notOwned is why a Linux desktop client cannot run on this machine.
func notOwned(app App) error {
	return setupError{fmt.Errorf("%s on Linux needs an owned desktop (%s=1): MST writes %s's managed settings for each variant and restarts it, which it does only on a machine made for it. "+
		"Run the eval in the desktop worker image (`mst runner setup docker --desktop`, see docs/desktop.md)", app.Client, OwnedEnv, app.Product)}
}

// setupError is an error that says how to get a machine that can run the
// client (client.ErrMachineSetup).
type setupError struct{ error }

func (e setupError) Unwrap() []error { return []error{e.error, client.ErrMachineSetup} }

// appVersion reads the app's version: VersionCommand's output, or the
// Debian package's version; "" when neither says.
func appVersion(ctx context.Context, prof Profile) string {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	switch {
	case len(prof.VersionCommand) > 0:
		cmd = exec.CommandContext(cctx, prof.VersionCommand[0], prof.VersionCommand[1:]...)
	case prof.Package != "":
		cmd = exec.CommandContext(cctx, "dpkg-query", "-W", "-f", "${Version}", prof.Package)
	default:
		return ""
	}
	// The command needs none of MST's environment (its keys least of all).
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(string(out))
	if f := strings.Fields(v); len(f) == 2 && len(prof.VersionCommand) > 0 {
		v = f[1] // "name 1.2.3"
	}
	return v
}

// Run runs one trial: it takes the machine's seat, attaches the trial's
// proxies to the front, prepares the app when another variant (or
// nothing) had it, and converses.
func (s *Session) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	if err := s.seat.acquire(ctx); err != nil {
		return client.Result{}, err
	}
	defer s.seat.release()
	tel := map[string]any{
		"clientApp":  map[string]any{"name": s.app.Product, "version": s.version},
		"os":         runtime.GOOS,
		"automation": s.drv.kind(),
	}
	res := client.Result{ClientVersion: s.version, ClientTelemetry: tel}
	proxies := s.p.TrialServers(t)
	if len(s.p.Servers) > 0 && t.Servers == nil {
		return res, fmt.Errorf("%s: the trial brought no proxies for the variant's servers", s.app.Client)
	}
	changed, err := s.front.attach(ctx, proxies)
	if err != nil {
		return res, err
	}
	defer s.front.detach()
	if s.drv.owned() && (s.seat.prepared != s || changed || !s.drv.running(ctx)) {
		start := time.Now()
		if err := s.prepare(ctx); err != nil {
			res.Next = client.Reset
			return res, err
		}
		tel["preparedMs"] = time.Since(start).Milliseconds()
	}
	b := &budget{max: s.opts.MaxActions}
	sw, err := s.drv.converse(ctx, t.Prompt, b)
	tel["actions"] = b.used
	for k, v := range sw.Telemetry {
		tel[k] = v
	}
	if len(sw.Strays) > 0 {
		tel["strayWindows"] = sw.Strays
	}
	res.Messages = []transcript.Message{{Role: "user", Text: t.Prompt}}
	switch {
	case sw.Gone:
		s.seat.prepared = nil
		res.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: s.app.Product + " exited during the trial"}
		res.Next = client.Reset
		return res, nil
	case errors.Is(err, errBudget):
		res.Outcome = transcript.Outcome{Status: transcript.NoAnswer, Detail: err.Error()}
		res.Next = client.Reset
		return res, nil
	case err != nil:
		// When ctx ended (the deadline or the run's end), MST's worker
		// says which and overrides the outcome.
		res.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: err.Error()}
		res.Next = client.Reset
		return res, nil
	}
	tel["seen"] = map[string]any{"answer": sw.Answer}
	res.Answer = sw.Answer
	rec, ok := s.native(sw.Sent, t.Prompt)
	if ok {
		if rec.answer != "" {
			res.Answer = rec.answer
		}
		res.Usage = rec.usage
	}
	if ok && !s.app.NativeInTelemetry {
		// The app's record is the transcript's source of truth.
		res.Messages, res.ToolCalls = rec.messages, rec.calls
		tel["native"] = map[string]any{"record": rec.id}
	} else {
		if ok {
			// The app's record stays whole in the telemetry (redacted,
			// as all MST stores); the messages are the prompt and the
			// answer.
			tel["native"] = rec.raw
		}
		if res.Answer != "" {
			res.Messages = append(res.Messages, transcript.Message{Role: "assistant", Text: res.Answer})
		}
	}
	if sw.Failed != "" {
		res.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: s.app.Product + " reported: " + sw.Failed}
		return res, nil
	}
	res.Outcome = transcript.Outcome{Status: transcript.Answered}
	return res, nil
}

// prepare writes the app's managed settings for this session's variant,
// restarts the app and waits until it is ready.
func (s *Session) prepare(ctx context.Context) error {
	data, err := settingsFor(s.prof.SettingsFormat, s.front.endpoints())
	if err != nil {
		return err
	}
	s.seat.prepared = nil
	if err := writeSettings(s.prof.SettingsPath, data); err != nil {
		return err
	}
	if err := restart(ctx, s.p.Env); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(s.prof.readyTimeout())*time.Second)
	defer cancel()
	if err := s.drv.ready(rctx); err != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%s was not ready within %ds of its restart: %w", s.app.Product, s.prof.readyTimeout(), err)
		}
		return err
	}
	s.seat.prepared = s
	return nil
}

// Reset brings the app back to an empty conversation (restarting it if it
// is gone or stuck).
func (s *Session) Reset(ctx context.Context) error {
	if err := s.seat.acquire(ctx); err != nil {
		return err
	}
	defer s.seat.release()
	if s.drv.owned() && s.seat.prepared != s {
		return nil // the next trial prepares the app anyway
	}
	if err := s.drv.reset(ctx); err != nil {
		s.seat.prepared = nil // the next trial restarts it
		return err
	}
	return nil
}

// Diagnose describes the app's state: a screenshot of the display, the
// tail of the app's log and its window's controls.
func (s *Session) Diagnose(ctx context.Context) (map[string]any, error) {
	return s.drv.diagnose(ctx), nil
}

// Close releases the session; the last session on the machine puts the
// app's managed settings back.
func (s *Session) Close() error {
	var err error
	s.closed.Do(func() {
		if s.seat != nil {
			err = s.seat.leave(s)
		}
		if s.drv != nil {
			s.drv.close()
		}
		if s.front != nil {
			s.front.close()
		}
	})
	return err
}

// seat is one app on one machine: one trial at a time, whichever session
// it belongs to, and the session whose settings the app has now.
type seat struct {
	path     string
	sem      chan struct{}
	prepared *Session // guarded by sem
	mu       sync.Mutex
	users    int
}

var seats = struct {
	sync.Mutex
	m map[string]*seat
}{m: map[string]*seat{}}

// takeSeat joins the seat of the app whose settings are at path.
func takeSeat(path string) *seat {
	seats.Lock()
	defer seats.Unlock()
	st := seats.m[path]
	if st == nil {
		st = &seat{path: path, sem: make(chan struct{}, 1)}
		seats.m[path] = st
	}
	st.mu.Lock()
	st.users++
	st.mu.Unlock()
	return st
}

func (st *seat) acquire(ctx context.Context) error {
	select {
	case st.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (st *seat) release() { <-st.sem }

// leave ends s's use of the seat; the last one out stops the app MST
// started (owned mode) and restores the settings.
func (st *seat) leave(s *Session) error {
	st.sem <- struct{}{}
	defer st.release()
	if st.prepared == s {
		st.prepared = nil
	}
	st.mu.Lock()
	st.users--
	last := st.users == 0
	st.mu.Unlock()
	if !last {
		return nil
	}
	var errs []error
	if s.drv.owned() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout+5*time.Second)
		errs = append(errs, s.drv.stop(ctx))
		cancel()
	}
	return errors.Join(append(errs, restoreSettings(st.path))...)
}

// Define completes a desktop app client's definition: MST's proxies in
// front of its servers, the planner's key on macOS, the app's version as
// found on this machine, and Open.
func Define(app App, d *client.Definition) *client.Definition {
	d.ProxiedServers = true
	d.OneTrialPerMachine = true
	d.KeyVars = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"}
	d.Version = func(ctx context.Context, _ json.RawMessage) (string, error) {
		if runtime.GOOS != "linux" {
			return "", nil
		}
		prof, err := LoadProfile(app.Client, app.Linux)
		if err != nil {
			return "", err
		}
		return appVersion(ctx, prof), nil
	}
	d.Open = func(ctx context.Context, p client.OpenParams) (client.Session, error) { return Open(ctx, app, p) }
	// On a run's own machine, a Linux desktop MST does not own is refused
	// when the eval loads, before anything starts.
	d.Preflight = func(json.RawMessage) error {
		if runtime.GOOS == "linux" && !owned() {
			return notOwned(app)
		}
		return nil
	}
	return d
}
