package atspi_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/client/desktop/atspi"
	"github.com/mst-eval/mst/internal/builtin/client/desktop/desktoptest"
)

// TestDrive starts a small GTK app on a private desktop and drives it the
// way the desktop clients do: find it, find its controls, type, press,
// wait for the answer by the bus's events, and see it go when it exits.
func TestDrive(t *testing.T) {
	t.Parallel()
	d := desktoptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bus, err := atspi.Connect(ctx, d.BusAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	if err := bus.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.App(ctx, "tiny.py"); !errors.Is(err, atspi.ErrNotFound) {
		t.Fatalf("before the app started: got %v, want ErrNotFound", err)
	}
	script, _ := filepath.Abs("testdata/tiny.py")
	proc := d.Launch(t, []string{desktoptest.Python, script})
	cmd := proc.Cmd

	var app atspi.Node
	if err := bus.Until(ctx, func(ctx context.Context) (bool, error) {
		app, err = bus.App(ctx, "tiny.py")
		if errors.Is(err, atspi.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	pid, err := app.PID(ctx)
	if err != nil || pid != cmd.Process.Pid {
		t.Fatalf("PID = %d, %v; want %d", pid, err, cmd.Process.Pid)
	}
	frames, err := app.FindAll(ctx, atspi.Match{Role: "frame"})
	if err != nil || len(frames) != 2 {
		t.Fatalf("frames: %d, %v; want 2", len(frames), err)
	}
	main, err := app.Find(ctx, atspi.Match{Role: "frame", Name: "Tiny Main"})
	if err != nil {
		t.Fatal(err)
	}
	field := find(t, ctx, main, atspi.Match{Role: "text", Name: "field"})
	copyButton := find(t, ctx, main, atspi.Match{Role: "push button", Name: "copy"})
	echo := find(t, ctx, main, atspi.Match{Role: "label", Name: "echo"})
	logView := find(t, ctx, main, atspi.Match{Name: "log"})
	dead := find(t, ctx, main, atspi.Match{Name: "dead"})

	if _, err := main.Find(ctx, atspi.Match{Role: "push button", Name: "nowhere"}); !errors.Is(err, atspi.ErrNotFound) {
		t.Fatalf("a missing control: %v, want ErrNotFound", err)
	}
	st, err := dead.States(ctx)
	if err != nil || st.Has(atspi.StateSensitive) || !st.Has(atspi.StateShowing) {
		t.Fatalf("the insensitive button's states %b, %v", st, err)
	}
	st, err = copyButton.States(ctx)
	if err != nil || !st.Has(atspi.StateSensitive) {
		t.Fatalf("the copy button's states %b, %v", st, err)
	}
	text, err := logView.Text(ctx)
	if err != nil || text != "line one\nŁódź ✓ line two" {
		t.Fatalf("the log's text %q, %v", text, err)
	}

	prompt := "héllo → wörld"
	if err := field.SetText(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	if got, err := field.Text(ctx); err != nil || got != prompt {
		t.Fatalf("typed %q, read back %q, %v", prompt, got, err)
	}
	before := bus.Events()
	if err := copyButton.Press(ctx); err != nil {
		t.Fatal(err)
	}
	// The label changes 300 ms after the press: read it when the bus says
	// something changed.
	want := "echo: " + prompt
	if err := bus.Until(ctx, func(ctx context.Context) (bool, error) {
		got, err := echo.Text(ctx)
		return got == want, err
	}); err != nil {
		t.Fatal(err)
	}
	if bus.Events() == before {
		t.Error("no event came between the press and the answer")
	}
	if name, err := echo.Name(ctx); err != nil || name != want {
		t.Errorf("the label's name %q, %v", name, err)
	}
	// Its name changed with its text; its id did not.
	byID := find(t, ctx, main, atspi.Match{Role: "label", ID: "echo-id"})
	if byID.Path != echo.Path {
		t.Errorf("by id: %s, by name: %s", byID, echo)
	}
	dump, err := app.Dump(ctx, 100)
	if err != nil || !strings.Contains(dump, `push button "copy"`) || !strings.Contains(dump, `frame "Tiny Other"`) {
		t.Errorf("dump:\n%s\n%v", dump, err)
	}

	// The app crashes: its nodes are gone, and so is it from the bus.
	syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	<-proc.Done()
	if _, err := echo.Text(ctx); !errors.Is(err, atspi.ErrGone) {
		t.Fatalf("reading a crashed app: %v, want ErrGone", err)
	}
	if err := bus.Until(ctx, func(ctx context.Context) (bool, error) {
		_, err := bus.App(ctx, "tiny.py")
		if errors.Is(err, atspi.ErrNotFound) {
			return true, nil
		}
		return false, err
	}); err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, ctx context.Context, under atspi.Node, m atspi.Match) atspi.Node {
	t.Helper()
	n, err := under.Find(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConnectRefused: a session bus that is not there is an error that
// says which bus.
func TestConnectRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := atspi.Connect(ctx, "unix:path="+filepath.Join(t.TempDir(), "none"))
	if err == nil || !strings.Contains(err.Error(), "DBUS_SESSION_BUS_ADDRESS") {
		t.Fatalf("got %v", err)
	}
}
