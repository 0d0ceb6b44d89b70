//go:build darwin

package computeruse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Programs the macOS screen runs.
const (
	screencapturePath = "/usr/sbin/screencapture"
	osascriptPath     = "/usr/bin/osascript"
)

// NewMacScreen measures the main display and returns a Screen for it:
// screenshots with screencapture, scaled down to fit opts' bounds, and
// input as CoreGraphics events posted by osascript (JavaScript for
// Automation), typing through System Events or the clipboard.
//
// The process that runs MST needs the Screen Recording permission (without
// it screencapture silently shows the desktop without windows) and the
// Accessibility permission, and osascript may ask for Automation of System
// Events the first time it types. Displays other than the main one are not
// seen. The screen has nothing to close.
func NewMacScreen(ctx context.Context, opts MacOptions) (Screen, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &macScreen{log: log}
	out, err := s.run(ctx, osascriptPath, osascriptArgs(measureScript, nil)...)
	if err != nil {
		return nil, fmt.Errorf("measuring the main display: %w", err)
	}
	var size struct{ Width, Height float64 }
	if err := json.Unmarshal(bytes.TrimSpace(out), &size); err != nil {
		return nil, fmt.Errorf("measuring the main display: osascript printed %q: %w", out, err)
	}
	s.geo, err = newGeometry(size.Width, size.Height, opts.MaxWidth, opts.MaxHeight)
	if err != nil {
		return nil, err
	}
	log.Debug("mac screen", "points", fmt.Sprintf("%vx%v", size.Width, size.Height),
		"planner", fmt.Sprintf("%dx%d", s.geo.width, s.geo.height))
	return s, nil
}

// macScreen is the main display of this Mac.
type macScreen struct {
	geo macGeometry
	log *slog.Logger

	mu sync.Mutex
	// leftHeld is whether left_mouse_down left the button down.
	leftHeld bool
}

func (s *macScreen) Size() (int, int) { return s.geo.width, s.geo.height }

// Capture takes a screenshot of the main display into a temporary folder
// and scales it to Size.
func (s *macScreen) Capture(ctx context.Context) ([]byte, error) {
	dir, err := os.MkdirTemp("", "mst-screen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "screen.png")
	// -x: no sound; -m: the main display only; -t png: the format.
	if _, err := s.run(ctx, screencapturePath, "-x", "-m", "-t", "png", file); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the screenshot: %w", err)
	}
	return scalePNG(data, s.geo.width, s.geo.height)
}

// Do posts the events of one action.
func (s *macScreen) Do(ctx context.Context, a Action) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	events, err := macEvents(a, s.geo, s.leftHeld)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(events)
	if err != nil {
		return fmt.Errorf("encoding the events of %s: %w", a.Kind, err)
	}
	if _, err := s.run(ctx, osascriptPath, osascriptArgs(inputScript, payload)...); err != nil {
		return err
	}
	switch a.Kind {
	case KindLeftMouseDown:
		s.leftHeld = true
	case KindLeftMouseUp, KindLeftClick, KindDoubleClick, KindTripleClick, KindLeftClickDrag:
		s.leftHeld = false
	}
	return nil
}

// run runs a program and returns its standard output. When ctx ends the
// program gets SIGTERM, then SIGKILL two seconds later.
func (s *macScreen) run(ctx context.Context, path string, args ...string) ([]byte, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	s.log.Debug("mac screen command", "program", filepath.Base(path), "elapsed", time.Since(start).Round(time.Millisecond), "err", err)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = "no message"
		}
		return nil, fmt.Errorf("%s: %w: %s", filepath.Base(path), err, msg)
	}
	return stdout.Bytes(), nil
}
