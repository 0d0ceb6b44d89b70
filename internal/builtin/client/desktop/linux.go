package desktop

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/builtin/client/desktop/atspi"
)

// linuxDriver drives the app through the accessibility bus, by the
// profile's names. It needs no focus: it types by setting the message
// box's text and sends by the send control's action, so a window that
// takes focus cannot swallow a prompt the way it swallows keystrokes. A
// stray window can still block the app (a modal prompt); the driver
// closes it with the profile's dismiss buttons, and notices a prompt that
// never reached the conversation.
type linuxDriver struct {
	s    *Session
	prof Profile
	bus  *atspi.Bus
}

// submitWait bounds the wait for a sent prompt to show in the
// conversation.
const submitWait = 15 * time.Second

func newLinuxDriver(ctx context.Context, s *Session) (*linuxDriver, error) {
	bus, err := atspi.Connect(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("%w (the desktop session's DISPLAY and DBUS_SESSION_BUS_ADDRESS must reach MST's worker)", err)
	}
	if err := bus.Watch(ctx); err != nil {
		bus.Close()
		return nil, err
	}
	return &linuxDriver{s: s, prof: s.prof, bus: bus}, nil
}

func (d *linuxDriver) kind() string { return "at-spi" }
func (d *linuxDriver) owned() bool  { return true }

func (d *linuxDriver) close() error { return d.bus.Close() }

// stop ends the app, found on the accessibility bus, when it runs.
func (d *linuxDriver) stop(ctx context.Context) error {
	app, _, err := d.window(ctx)
	if err != nil {
		return nil // not running
	}
	pid, err := app.PID(ctx)
	if err != nil {
		return fmt.Errorf("finding the app's process to stop it: %w", err)
	}
	return stopProcess(ctx, pid)
}

// window finds the app and its main window.
func (d *linuxDriver) window(ctx context.Context) (app, win atspi.Node, err error) {
	app, err = d.bus.App(ctx, d.prof.App)
	if err != nil {
		return app, win, err
	}
	frames, err := app.Children(ctx)
	if err != nil {
		return app, win, err
	}
	for _, f := range frames {
		name, err := f.Name(ctx)
		if err != nil {
			return app, win, err
		}
		if name == d.prof.Window {
			return app, f, nil
		}
	}
	return app, win, fmt.Errorf("%s has no window %q: %w", d.prof.App, d.prof.Window, atspi.ErrNotFound)
}

func (d *linuxDriver) running(ctx context.Context) bool {
	_, _, err := d.window(ctx)
	return err == nil
}

// text reads a control's text (its Text interface, else its name).
func text(ctx context.Context, n atspi.Node) (string, error) {
	s, err := n.Text(ctx)
	if err == nil {
		return s, nil
	}
	if errors.Is(err, atspi.ErrGone) {
		if name, nerr := n.Name(ctx); nerr == nil {
			return name, nil
		}
	}
	return "", err
}

// state is what the driver reads of the app at one moment.
type state struct {
	status, conversation string
}

// The status words read from a BusyControl.
const (
	statusBusy = "(busy)"
	statusIdle = "(idle)"
)

func (d *linuxDriver) read(ctx context.Context, win atspi.Node) (state, error) {
	var st state
	if d.prof.Status == (atspi.Match{}) {
		_, err := win.Find(ctx, d.prof.BusyControl)
		switch {
		case err == nil:
			st.status = statusBusy
		case errors.Is(err, atspi.ErrNotFound):
			st.status = statusIdle
		default:
			return st, err
		}
	} else {
		n, err := win.Find(ctx, d.prof.Status)
		if err != nil {
			return st, err
		}
		if st.status, err = text(ctx, n); err != nil {
			return st, err
		}
		st.status = strings.TrimSpace(st.status)
	}
	n, err := win.Find(ctx, d.prof.Conversation)
	if err != nil {
		return st, err
	}
	st.conversation, err = text(ctx, n)
	return st, err
}

func (d *linuxDriver) busy(st state) bool {
	return st.status == statusBusy || slices.Contains(d.prof.Busy, st.status)
}
func (d *linuxDriver) idle(st state) bool {
	return st.status == statusIdle || slices.Contains(d.prof.Idle, st.status)
}
func (d *linuxDriver) failed(st state) bool {
	return d.prof.ErrorPrefix != "" && strings.HasPrefix(st.status, d.prof.ErrorPrefix)
}

// gone reports whether err says the app (or its window) is not there.
func gone(err error) bool {
	return errors.Is(err, atspi.ErrGone) || errors.Is(err, atspi.ErrNotFound)
}

// ready waits until the app shows its window with an idle status; a
// status that reports a failure (a server it could not reach) ends the
// wait with that failure.
func (d *linuxDriver) ready(ctx context.Context) error {
	var last string
	err := d.bus.Until(ctx, func(ctx context.Context) (bool, error) {
		_, win, err := d.window(ctx)
		if gone(err) {
			last = "its window is not on the accessibility bus yet"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		st, err := d.read(ctx, win)
		if gone(err) {
			last = "its controls are not there yet"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("its status is %q", st.status)
		if d.failed(st) {
			return false, fmt.Errorf("%s started with a failure: %s", d.s.app.Product, st.status)
		}
		return d.idle(st), nil
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("waiting for %s to be ready (%s): %w", d.s.app.Product, last, err)
	}
	return err
}

// strays lists the app's windows other than the main one that show.
func (d *linuxDriver) strays(ctx context.Context, app atspi.Node) ([]atspi.Node, error) {
	kids, err := app.Children(ctx)
	if err != nil {
		return nil, err
	}
	var out []atspi.Node
	for _, k := range kids {
		name, err := k.Name(ctx)
		if err != nil {
			return nil, err
		}
		if name == d.prof.Window {
			continue
		}
		st, err := k.States(ctx)
		if err != nil {
			return nil, err
		}
		if st.Has(atspi.StateShowing) || st.Has(atspi.StateVisible) {
			out = append(out, k)
		}
	}
	return out, nil
}

// dismissStrays closes the app's stray windows with the profile's dismiss
// buttons and returns their titles.
func (d *linuxDriver) dismissStrays(ctx context.Context, app atspi.Node, b *budget) ([]string, error) {
	list, err := d.strays(ctx, app)
	if err != nil {
		return nil, err
	}
	var titles []string
	for _, w := range list {
		title, _ := w.Name(ctx)
		var button atspi.Node
		for _, name := range d.prof.StrayDismiss {
			if n, err := w.Find(ctx, atspi.Match{Role: "push button", Name: name}); err == nil {
				button = n
				break
			}
		}
		if !button.Valid() {
			return titles, fmt.Errorf("a window %q is open over %s, and none of the profile's strayDismiss buttons (%s) is in it: add its closing button's name to strayDismiss (%s)",
				title, d.s.app.Product, strings.Join(d.prof.StrayDismiss, ", "), ProfileEnv)
		}
		if err := b.take(); err != nil {
			return titles, err
		}
		if err := button.Press(ctx); err != nil {
			return titles, err
		}
		cctx, cancel := context.WithTimeout(ctx, submitWait)
		err := d.bus.Until(cctx, func(ctx context.Context) (bool, error) {
			st, err := w.States(ctx)
			if gone(err) {
				return true, nil
			}
			return err == nil && !st.Has(atspi.StateShowing) && !st.Has(atspi.StateVisible), err
		})
		cancel()
		if err != nil {
			return titles, fmt.Errorf("closing the window %q over %s: %w", title, d.s.app.Product, err)
		}
		titles = append(titles, title)
	}
	return titles, nil
}

// converse starts a new conversation, submits prompt, and waits until the
// app answers, reports a failure, or exits.
func (d *linuxDriver) converse(ctx context.Context, prompt string, b *budget) (seen, error) {
	var sw seen
	app, win, err := d.window(ctx)
	if gone(err) {
		sw.Gone = true
		return sw, err
	}
	if err != nil {
		return sw, err
	}
	if sw.Strays, err = d.dismissStrays(ctx, app, b); err != nil {
		return sw, err
	}
	if err := d.newChat(ctx, win, b); err != nil {
		sw.Gone = gone(err)
		return sw, err
	}
	input, err := win.Find(ctx, d.prof.Input)
	if err != nil {
		return sw, err
	}
	send, err := win.Find(ctx, d.prof.Send)
	if err != nil {
		return sw, err
	}
	submit := func() error {
		if err := b.take(); err != nil {
			return err
		}
		if err := input.SetText(ctx, prompt); err != nil {
			return err
		}
		if err := b.take(); err != nil {
			return err
		}
		sw.Sent = time.Now()
		return send.Press(ctx)
	}
	// The prompt reached the app when the conversation shows it or the
	// app says it is working.
	reached := func(ctx context.Context) (bool, error) {
		st, err := d.read(ctx, win)
		if err != nil {
			return false, err
		}
		return d.busy(st) || d.failed(st) || strings.Contains(st.conversation, d.prof.promptMarker()), nil
	}
	for attempt := 0; ; attempt++ {
		if err := submit(); err != nil {
			sw.Gone = gone(err)
			return sw, err
		}
		cctx, cancel := context.WithTimeout(ctx, submitWait)
		err = d.bus.Until(cctx, reached)
		cancel()
		if err == nil {
			break
		}
		if gone(err) {
			sw.Gone = true
			return sw, err
		}
		if ctx.Err() != nil {
			return sw, err
		}
		// Nothing showed: a window that came up over the app may have
		// taken the prompt. Close it and send once more.
		closed, serr := d.dismissStrays(ctx, app, b)
		sw.Strays = append(sw.Strays, closed...)
		if serr != nil {
			return sw, serr
		}
		if attempt > 0 || len(closed) == 0 {
			return sw, fmt.Errorf("the prompt did not reach %s: %s showed nothing of it within %s of sending", d.s.app.Product, d.prof.Conversation, submitWait)
		}
	}
	var st state
	err = d.bus.Until(ctx, func(ctx context.Context) (bool, error) {
		st, err = d.read(ctx, win)
		if err != nil {
			return false, err
		}
		if d.failed(st) {
			return true, nil
		}
		return d.idle(st) && strings.Contains(lastTurn(st.conversation, d.prof.promptMarker()), d.prof.AnswerMarker), nil
	})
	if gone(err) {
		sw.Gone = true
		return sw, err
	}
	if err != nil {
		sw.Answer = answerIn(st.conversation, d.prof)
		return sw, fmt.Errorf("waiting for %s's answer (its status: %q): %w", d.s.app.Product, st.status, err)
	}
	if d.failed(st) {
		sw.Failed = strings.TrimPrefix(st.status, d.prof.ErrorPrefix)
	}
	sw.Answer = answerIn(st.conversation, d.prof)
	return sw, nil
}

func (p Profile) promptMarker() string { return p.PromptMarker }

// lastTurn is the conversation from the last prompt on.
func lastTurn(conv, promptMarker string) string {
	if promptMarker == "" {
		return conv
	}
	if i := strings.LastIndex(conv, promptMarker); i >= 0 {
		return conv[i:]
	}
	return ""
}

// answerIn is the text after the last answer marker of the last turn.
func answerIn(conv string, p Profile) string {
	turn := lastTurn(conv, p.PromptMarker)
	i := strings.LastIndex(turn, p.AnswerMarker)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(turn[i+len(p.AnswerMarker):])
}

// newChat starts a new conversation and waits until the app shows it
// empty and idle.
func (d *linuxDriver) newChat(ctx context.Context, win atspi.Node, b *budget) error {
	n, err := win.Find(ctx, d.prof.NewChat)
	if err != nil {
		return err
	}
	if err := b.take(); err != nil {
		return err
	}
	if err := n.Press(ctx); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, submitWait)
	defer cancel()
	var st state
	err = d.bus.Until(cctx, func(ctx context.Context) (bool, error) {
		st, err = d.read(ctx, win)
		if err != nil {
			return false, err
		}
		empty := strings.TrimSpace(st.conversation) == "" ||
			(d.prof.PromptMarker != "" && !strings.Contains(st.conversation, d.prof.PromptMarker))
		return empty && (d.idle(st) || d.failed(st)), nil
	})
	if err != nil && !gone(err) && ctx.Err() == nil {
		return fmt.Errorf("starting a new conversation in %s (its status stayed %q): %w", d.s.app.Product, st.status, err)
	}
	return err
}

// reset brings the app to an empty, idle conversation: by closing stray
// windows and starting a new conversation, and by restarting it when it
// is gone or does not come back.
func (d *linuxDriver) reset(ctx context.Context) error {
	b := &budget{}
	app, win, err := d.window(ctx)
	if err == nil {
		if _, err = d.dismissStrays(ctx, app, b); err == nil {
			err = d.newChat(ctx, win, b)
		}
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	d.s.p.Logger.Info("restarting the desktop app for a reset", "app", d.prof.App, "why", err.Error())
	if err := restart(ctx, d.s.p.Env); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(d.prof.readyTimeout())*time.Second)
	defer cancel()
	return d.ready(rctx)
}

// logTail is how much of the app's log a diagnosis shows.
const logTail = 8 << 10

func (d *linuxDriver) diagnose(ctx context.Context) map[string]any {
	out := map[string]any{"automation": d.kind()}
	if png, w, h, err := screenshot(os.Getenv("DISPLAY")); err != nil {
		out["screenshotError"] = err.Error()
	} else {
		out["screenshot"] = map[string]any{"mediaType": "image/png", "width": w, "height": h, "data": base64.StdEncoding.EncodeToString(png)}
	}
	if d.prof.Log != "" {
		if tail, err := readTail(expand(d.prof.Log, d.s.home), logTail); err != nil {
			out["logError"] = err.Error()
		} else {
			out["log"] = tail
		}
	}
	app, win, err := d.window(ctx)
	switch {
	case gone(err):
		out["app"] = d.prof.App + " is not on the accessibility bus (not running, or crashed)"
	case err != nil:
		out["appError"] = err.Error()
	default:
		if st, err := d.read(ctx, win); err == nil {
			out["status"] = st.status
		}
		if tree, err := app.Dump(ctx, 300); err == nil {
			out["tree"] = tree
		}
	}
	return out
}

// readTail returns the last n bytes of a file.
func readTail(path string, n int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if info.Size() > n {
		if _, err := f.Seek(info.Size()-n, io.SeekStart); err != nil {
			return "", err
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, n))
	return string(data), err
}
