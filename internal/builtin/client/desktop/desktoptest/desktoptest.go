// Package desktoptest gives tests a private Linux desktop session: an X
// display (Xvfb), a session D-Bus with the accessibility bus on demand,
// and a HOME of its own, so a test can start GTK apps and drive them
// through package atspi without touching the machine's own desktop.
//
// It needs Debian's xvfb, dbus, at-spi2-core, python3-gi and
// gir1.2-gtk-3.0 (scripts/test installs them); a missing one fails the
// test under CI and skips it elsewhere (testneed).
package desktoptest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/testkit/testneed"
)

// Python is the interpreter with GTK's bindings: Debian's, whatever
// python3 comes first on PATH.
const Python = "/usr/bin/python3"

// Desktop is one private desktop session.
type Desktop struct {
	// Display is the X display (":N").
	Display string
	// BusAddr is the session bus's address (DBUS_SESSION_BUS_ADDRESS).
	BusAddr string
	// Home is the session's HOME.
	Home string
}

// Env is the environment a program of the session gets: the machine's
// PATH and locale, and the session's display, bus and HOME.
func (d *Desktop) Env(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"DISPLAY=" + d.Display,
		"DBUS_SESSION_BUS_ADDRESS=" + d.BusAddr,
		"HOME=" + d.Home,
		"XDG_CONFIG_HOME=" + filepath.Join(d.Home, ".config"),
		"XDG_RUNTIME_DIR=" + filepath.Join(d.Home, "run"),
		"NO_AT_BRIDGE=0",
		"GTK_A11Y=atspi",
		"LANG=C.UTF-8",
	}
	return append(env, extra...)
}

// Need checks that the programs a desktop session needs are installed.
func Need(t testing.TB) {
	t.Helper()
	var missing []string
	for _, p := range []string{"Xvfb", "dbus-daemon", "/usr/libexec/at-spi-bus-launcher", Python} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		if err := exec.Command(Python, "-c", "import gi; gi.require_version('Gtk', '3.0')").Run(); err != nil {
			missing = append(missing, "python3-gi with GTK 3")
		}
	}
	if len(missing) > 0 {
		testneed.Missing(t, "a desktop session needs "+strings.Join(missing, ", ")+
			" (Debian: apt-get install xvfb dbus at-spi2-core python3-gi gir1.2-gtk-3.0; scripts/test installs them)")
	}
}

// Start starts a desktop session for t, stopped when t ends.
func Start(t testing.TB) *Desktop {
	t.Helper()
	Need(t)
	home := t.TempDir()
	for _, d := range []string{".config", "run"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := &Desktop{Home: home}
	// Xvfb picks a free display and writes its number on -displayfd.
	num, err := startReporting(t, ctx, "Xvfb", []string{"-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp"}, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	d.Display = ":" + num
	// The session bus prints its address on --print-address; the
	// accessibility bus starts from it on demand, with its environment
	// (so it finds the display).
	addr, err := startReporting(t, ctx, "dbus-daemon", []string{"--session", "--nofork", "--nopidfile", "--address=unix:dir=" + filepath.Join(home, "run"), "--print-address=3"}, d.Env())
	if err != nil {
		t.Fatal(err)
	}
	d.BusAddr = addr
	return d
}

// startReporting starts a daemon that writes one line on fd 3 once it is
// ready, and returns that line; the daemon is stopped, with its process
// group, when t ends.
func startReporting(t testing.TB, ctx context.Context, name string, args, env []string) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer r.Close()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &limitWriter{n: 8 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		w.Close()
		return "", fmt.Errorf("starting %s: %w", name, err)
	}
	w.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { stopGroup(cmd, exited) })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if s == "" {
			return "", fmt.Errorf("%s exited before it was ready: %s", name, stderr.String())
		}
		return s, nil
	case <-ctx.Done():
		return "", fmt.Errorf("%s was not ready within its time: %s", name, stderr.String())
	}
}

// Proc is a program started in the session.
type Proc struct {
	Cmd *exec.Cmd
	// Log is the file its stdout and stderr go to.
	Log  string
	done chan struct{}
	err  error
}

// Done is closed when the program has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Launch starts a program in the session (argv[0] a path or a name on
// PATH) with extra environment; it is stopped with its process group
// when t ends, if it is still running.
func (d *Desktop) Launch(t testing.TB, argv []string, extra ...string) *Proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), filepath.Base(argv[0])+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = d.Env(extra...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", argv[0], err)
	}
	p := &Proc{Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { stopGroup(cmd, p.done) })
	return p
}

// stopGroup ends cmd's process group (TERM, then KILL after a grace) and
// waits for cmd.
func stopGroup(cmd *exec.Cmd, exited <-chan struct{}) {
	pgid := cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	// Members of the group that outlived its leader (the accessibility
	// bus the session bus started).
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// limitWriter keeps the first n bytes written to it.
type limitWriter struct {
	mu sync.Mutex
	b  []byte
	n  int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.n - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (l *limitWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// CheckDefinition checks a desktop app client's definition: it runs on
// Linux and macOS in this build, takes MST's proxies, has the desktop
// options with its default timeout, says whether it needs its Docker host
// alone, and refuses to open on a Linux desktop MST does not own, saying
// how to get one.
func CheckDefinition(t *testing.T, d *client.Definition, hostExclusive bool) {
	t.Helper()
	for _, goos := range []string{"linux", "darwin"} {
		if !slices.Contains(d.Requirements.OS, goos) {
			t.Errorf("%s: Requirements.OS lacks %s", d.Name, goos)
		}
		if d.Available != nil {
			if err := d.Available(goos); err != nil {
				t.Errorf("%s: not available on %s: %v", d.Name, goos, err)
			}
		}
	}
	if !d.OneTrialPerMachine {
		t.Errorf("%s: a desktop app runs one conversation at a time on a machine (OneTrialPerMachine)", d.Name)
	}
	if !d.ProxiedServers || d.Open == nil || d.Timeout <= 0 || d.HostExclusive != hostExclusive {
		t.Errorf("%s: proxied %v, open %v, timeout %s, host-exclusive %v", d.Name, d.ProxiedServers, d.Open != nil, d.Timeout, d.HostExclusive)
	}
	var schema struct {
		Properties map[string]struct {
			Default any `json:"default"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(d.Options, &schema); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"timeout", "maxActions", "appVersion", "computerUseModel"} {
		if _, ok := schema.Properties[o]; !ok {
			t.Errorf("%s: no option %s", d.Name, o)
		}
	}
	if want := fmt.Sprintf("%gs", d.Timeout.Seconds()); schema.Properties["timeout"].Default != want {
		t.Errorf("%s: timeout's default %v, want %s", d.Name, schema.Properties["timeout"].Default, want)
	}
	if runtime.GOOS == "linux" {
		t.Setenv("MST_DESKTOP_OWNED", "")
		if err := d.Preflight(nil); err == nil || !strings.Contains(err.Error(), "MST_DESKTOP_OWNED=1") || !errors.Is(err, client.ErrMachineSetup) {
			t.Errorf("%s: Preflight on a desktop MST does not own: %v", d.Name, err)
		}
		t.Setenv("MST_DESKTOP_OWNED", "1")
		if err := d.Preflight(nil); err != nil {
			t.Errorf("%s: Preflight on an owned desktop: %v", d.Name, err)
		}
		t.Setenv("MST_DESKTOP_OWNED", "")
		s, err := d.Open(t.Context(), client.OpenParams{Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), "MST_DESKTOP_OWNED=1") {
			t.Errorf("%s: Open on a desktop MST does not own: %v", d.Name, err)
		}
		if s != nil {
			s.Close()
		}
	}
}
