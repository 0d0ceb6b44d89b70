package desktop

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/desktop/computeruse"
)

// macDriver drives the app with Computer Use: the planner model
// (computerUseModel) looks at screenshots and asks for clicks and
// keystrokes until it can report the app's answer. The user's own desktop
// runs the app; MST neither writes its settings nor restarts it, and the
// planner's cost is recorded with each trial.
type macDriver struct {
	s       *Session
	planner *computeruse.Planner
	screen  computeruse.Screen
}

// newMacScreen is the screen the driver acts on (a test gives its own).
var newMacScreen = func(ctx context.Context, s *Session) (computeruse.Screen, error) {
	return computeruse.NewMacScreen(ctx, computeruse.MacOptions{Logger: s.p.Logger})
}

// defaultPlanner is computerUseModel's default.
const defaultPlanner = "anthropic/claude-sonnet-4-5"

func openMacOS(ctx context.Context, app App, p client.OpenParams, opts options) (client.Session, error) {
	s := &Session{app: app, p: p, opts: opts}
	model := opts.ComputerUseModel
	if model == "" {
		model = defaultPlanner
	}
	model, ok := strings.CutPrefix(model, "anthropic/")
	if !ok || model == "" {
		return nil, fmt.Errorf("%s: clientOptions.computerUseModel must be an Anthropic model as anthropic/MODEL, not %q", app.Client, opts.ComputerUseModel)
	}
	keyVar := "ANTHROPIC_API_KEY"
	if p.KeyEnv != "" {
		keyVar = p.KeyEnv
	}
	key := p.Env[keyVar]
	if key == "" {
		return nil, fmt.Errorf("%s on macOS: the Computer Use planner needs %s (set it in MST's environment or the secrets file)", app.Client, keyVar)
	}
	reqOpts := []option.RequestOption{option.WithAPIKey(key), option.WithMaxRetries(2)}
	if base := p.Env["ANTHROPIC_BASE_URL"]; base != "" {
		reqOpts = append(reqOpts, option.WithBaseURL(base))
	}
	names := make([]string, len(p.Servers))
	for i, srv := range p.Servers {
		names[i] = srv.Name
	}
	front, err := newFront(names, p.Logger)
	if err != nil {
		return nil, err
	}
	s.front = front
	screen, err := newMacScreen(ctx, s)
	if err != nil {
		front.close()
		return nil, fmt.Errorf("%s on macOS: %w (MST needs the Screen Recording and Accessibility permissions in System Settings > Privacy & Security)", app.Client, err)
	}
	s.drv = &macDriver{s: s, screen: screen, planner: &computeruse.Planner{
		Client: anthropic.NewClient(reqOpts...), Model: model, MaxActions: opts.MaxActions,
		Screen: screen, Logger: p.Logger,
	}}
	s.seat = takeSeat("macos:" + app.Client)
	s.seat.prepared = s // the user's app is as it is: nothing to prepare
	return s, nil
}

func (d *macDriver) kind() string                     { return "computer-use" }
func (d *macDriver) running(ctx context.Context) bool { return true }
func (d *macDriver) ready(ctx context.Context) error  { return nil }
func (d *macDriver) close() error                     { return nil }
func (d *macDriver) owned() bool                      { return false }

// stop does nothing: on macOS MST drives the app the person runs.
func (d *macDriver) stop(ctx context.Context) error { return nil }

func (d *macDriver) converse(ctx context.Context, prompt string, b *budget) (seen, error) {
	sw := seen{Sent: time.Now()}
	d.planner.MaxActions = b.max
	res, err := d.planner.Do(ctx, computeruse.ConverseTask(d.s.app.Product, prompt))
	b.used = res.Actions
	sw.Answer = strings.TrimSpace(res.Answer)
	sw.Telemetry = map[string]any{"planner": map[string]any{
		"model": d.planner.Model, "turns": res.Turns, "actions": res.Actions,
		"inputTokens": res.Usage.InputTokens, "outputTokens": res.Usage.OutputTokens,
	}}
	switch {
	case errors.Is(err, computeruse.ErrBudget):
		return sw, fmt.Errorf("%w: %d (%v)", errBudget, b.max, err)
	case errors.Is(err, computeruse.ErrGaveUp):
		sw.Failed = err.Error()
		return sw, nil
	}
	return sw, err
}

func (d *macDriver) reset(ctx context.Context) error {
	_, err := d.planner.Do(ctx, fmt.Sprintf("In the macOS app %q, close any dialog or window that covers the main window, then start a new, empty conversation. Reply DONE when the app shows an empty conversation.", d.s.app.Product))
	return err
}

func (d *macDriver) diagnose(ctx context.Context) map[string]any {
	out := map[string]any{"automation": d.kind()}
	png, err := d.screen.Capture(ctx)
	if err != nil {
		out["screenshotError"] = err.Error()
	} else {
		w, h := d.screen.Size()
		out["screenshot"] = map[string]any{"mediaType": "image/png", "width": w, "height": h, "data": base64.StdEncoding.EncodeToString(png)}
	}
	if log := os.Getenv("MST_DESKTOP_APP_LOG"); log != "" {
		if tail, err := readTail(log, logTail); err == nil {
			out["log"] = tail
		}
	}
	return out
}
