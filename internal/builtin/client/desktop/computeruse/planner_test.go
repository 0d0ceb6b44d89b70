package computeruse_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/builtin/client/desktop/computeruse"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

// TestConverse runs the whole loop the way a desktop client does: the
// planner looks, clicks the message box, types the prompt, sends it, looks
// again and answers. The fake screen only reaches its answered state if
// every action arrived, in order, with its arguments.
func TestConverse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model, tool, beta string
	}{
		{"anthropic/claude-sonnet-4-5", "computer_20250124", "computer-use-2025-01-24"},
		{"claude-opus-4-5", "computer_20251124", "computer-use-2025-11-24"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			t.Parallel()
			prompt := "What is 2+2?"
			task := computeruse.ConverseTask("Claude", prompt)
			srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
				Match: task,
				Turns: []providertest.Turn{
					{Text: "Let me look.", ToolCalls: []providertest.Call{computer("screenshot")}, InputTokens: 1000, OutputTokens: 30},
					turn(computer("left_click", "coordinate", []int{20, 35})),
					turn(computer("type", "text", prompt)),
					turn(computer("key", "text", "Return")),
					turn(computer("screenshot")),
					{Text: "4", InputTokens: 2000, OutputTokens: 2},
				},
			}}})
			screen := newFakeScreen(prompt)
			res, err := newPlanner(srv, screen, tc.model).Do(t.Context(), task)
			if err != nil {
				t.Fatalf("Do = %v, want no error", err)
			}
			if res.Answer != "4" {
				t.Errorf("Do answer = %q, want %q", res.Answer, "4")
			}

			wantSeen := []computeruse.Action{
				{Kind: "left_click", X: 20, Y: 35},
				{Kind: "type", Text: prompt},
				{Kind: "key", Key: "Return"},
			}
			if diff := cmp.Diff(wantSeen, screen.seen()); diff != "" {
				t.Errorf("actions the screen received (-want +got):\n%s", diff)
			}
			if n := screen.captured(); n != 2 {
				t.Errorf("screen captures = %d, want 2", n)
			}

			var kinds []string
			for _, s := range res.Steps {
				kinds = append(kinds, fmt.Sprintf("%d %s", s.Turn, s.Action.Kind))
				if s.Action.Text != "" {
					t.Errorf("step %s keeps the typed text %q", s.Action.Kind, s.Action.Text)
				}
			}
			if diff := cmp.Diff([]string{"1 screenshot", "2 left_click", "3 type", "4 key", "5 screenshot"}, kinds); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if res.Steps[2].TextChars != len(prompt) || res.Steps[0].ScreenshotBytes == 0 {
				t.Errorf("steps record textChars %d and screenshotBytes %d, want %d and > 0",
					res.Steps[2].TextChars, res.Steps[0].ScreenshotBytes, len(prompt))
			}
			wantUsage := computeruse.Usage{InputTokens: 1000 + 4*10 + 2000, OutputTokens: 30 + 4*5 + 2}
			if res.Actions != 5 || res.Turns != 6 || res.Usage != wantUsage {
				t.Errorf("Do = %d actions, %d turns, usage %+v; want 5, 6, %+v", res.Actions, res.Turns, res.Usage, wantUsage)
			}

			// Every request offers the computer tool sized as the screen,
			// with its beta, and answers the previous tool_use.
			reqs := srv.Requests()
			if len(reqs) != 6 {
				t.Fatalf("requests = %d, want 6", len(reqs))
			}
			wantLast := [][][]string{
				nil,
				{{"image: blank"}},
				{{"text: done"}},
				{{"text: done"}},
				{{"text: done"}},
				{{"image: answered"}},
			}
			for i, r := range reqs {
				if r.Status != http.StatusOK || r.Turn != i {
					t.Errorf("request %d: status %d, turn %d; want 200, %d", i, r.Status, r.Turn, i)
				}
				if got := r.Header.Get("anthropic-beta"); !strings.Contains(got, tc.beta) {
					t.Errorf("request %d: anthropic-beta %q, want %s", i, got, tc.beta)
				}
				req := decodeRequest(t, r)
				if len(req.Tools) != 1 || req.Tools[0].Name != "computer" || req.Tools[0].Type != tc.tool ||
					req.Tools[0].Width != screenW || req.Tools[0].Height != screenH {
					t.Errorf("request %d: tools %+v, want one computer tool %s of %dx%d", i, req.Tools, tc.tool, screenW, screenH)
				}
				if len(req.System) != 1 || !strings.Contains(req.System[0].Text, fmt.Sprintf("%dx%d", screenW, screenH)) {
					t.Errorf("request %d: system prompt %+v does not state the screen's size", i, req.System)
				}
				if len(req.Messages) != 2*i+1 {
					t.Fatalf("request %d: %d messages, want %d", i, len(req.Messages), 2*i+1)
				}
				if diff := cmp.Diff(wantLast[i], toolResults(t, req, len(req.Messages)-1)); diff != "" {
					t.Errorf("request %d: tool results of its last message (-want +got):\n%s", i, diff)
				}
				// Earlier results are resent as they were.
				if i == 5 {
					if diff := cmp.Diff([][]string{{"image: blank"}}, toolResults(t, req, 2)); diff != "" {
						t.Errorf("request 5: first screenshot resent (-want +got):\n%s", diff)
					}
				}
			}
		})
	}
}

// TestScreenshotAfter checks that with ScreenshotAfter every input action
// answers with the screen after it, and that only the latest
// KeepScreenshots screenshots stay in the conversation.
func TestScreenshotAfter(t *testing.T) {
	t.Parallel()
	prompt := "hello"
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Match: "send hello",
		Turns: []providertest.Turn{
			// Two actions in one turn: both run, their results in order.
			turn(computer("left_click", "coordinate", []int{5, 39}), computer("type", "text", prompt)),
			turn(computer("key", "text", "Return")),
			turn(computer("wait", "duration", 0)),
			{Text: "sent"},
		},
	}}})
	screen := newFakeScreen(prompt)
	p := newPlanner(srv, screen, "claude-sonnet-4-5")
	p.ScreenshotAfter = true
	p.Settle = -1
	p.KeepScreenshots = 2
	res, err := p.Do(t.Context(), "send hello")
	if err != nil || res.Answer != "sent" {
		t.Fatalf("Do = %q, %v; want %q, no error", res.Answer, err, "sent")
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("requests = %d, want 4", len(reqs))
	}
	req := decodeRequest(t, reqs[3])
	var got [][][]string
	for i := 2; i < len(req.Messages); i += 2 {
		got = append(got, toolResults(t, req, i))
	}
	old := "text: (an older screenshot, removed to keep the conversation short)"
	want := [][][]string{
		{{old}, {old}},
		{{"image: answered"}},
		{{"image: answered"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool results in the last request (-want +got):\n%s", diff)
	}
	// The second request saw both screenshots of the first turn.
	if diff := cmp.Diff([][]string{{"image: focused"}, {"image: typed"}}, toolResults(t, decodeRequest(t, reqs[1]), 2)); diff != "" {
		t.Errorf("tool results in request 1 (-want +got):\n%s", diff)
	}
	if n := screen.captured(); n != 4 {
		t.Errorf("screen captures = %d, want 4 (three actions and a wait)", n)
	}
	if res.Actions != 4 {
		t.Errorf("actions = %d, want 4: a screenshot taken after an action is not an action", res.Actions)
	}
}

// TestBudget checks that the planner may ask for MaxActions actions and
// no more.
func TestBudget(t *testing.T) {
	t.Parallel()
	var turns []providertest.Turn
	for range 10 {
		turns = append(turns, turn(computer("screenshot")))
	}
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: turns}}})
	screen := newFakeScreen("")
	p := newPlanner(srv, screen, "claude-sonnet-4-5")
	p.MaxActions = 3
	res, err := p.Do(t.Context(), "look forever")
	if !errors.Is(err, computeruse.ErrBudget) {
		t.Fatalf("Do error = %v, want ErrBudget", err)
	}
	if res.Actions != 3 || screen.captured() != 3 || res.Turns != 4 || len(srv.Requests()) != 4 {
		t.Errorf("Do = %d actions, %d captures, %d turns, %d requests; want 3, 3, 4, 4",
			res.Actions, screen.captured(), res.Turns, len(srv.Requests()))
	}
}

// TestRefusedActions checks that mistakes of the planner go back to it as
// error results, that the loop goes on, and that refused actions count
// against the budget.
func TestRefusedActions(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			turn(computer("zoom", "region", []int{0, 0, 10, 10})),
			turn(computer("left_click", "coordinate", []int{screenW, 5})),
			turn(computer("key", "text", "cmd+hyper")),
			turn(computer("type")),
			turn(providertest.Call{Tool: "browser", Arguments: map[string]any{"url": "x"}}),
			turn(computer("right_click", "coordinate", []int{1, 1})), // the screen refuses it
			turn(computer("left_click", "coordinate", []int{3, 4})),
			{Text: "done anyway"},
		},
	}}})
	screen := newFakeScreen("")
	screen.onDo = func(_ context.Context, a computeruse.Action) error {
		if a.Kind == computeruse.KindRightClick {
			return fmt.Errorf("no right button here: %w", computeruse.ErrUnsupported)
		}
		return nil
	}
	res, err := newPlanner(srv, screen, "claude-sonnet-4-5").Do(t.Context(), "misbehave")
	if err != nil || res.Answer != "done anyway" {
		t.Fatalf("Do = %q, %v; want %q, no error", res.Answer, err, "done anyway")
	}
	if diff := cmp.Diff([]computeruse.Action{{Kind: "right_click", X: 1, Y: 1}, {Kind: "left_click", X: 3, Y: 4}}, screen.seen()); diff != "" {
		t.Errorf("actions the screen received (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	if len(reqs) != 8 {
		t.Fatalf("requests = %d, want 8", len(reqs))
	}
	wantErr := []string{
		`unknown action "zoom"`,
		"is off the screen, which is 64x40 pixels",
		`unknown key name "hyper"`,
		`type needs "text"`,
		`there is no tool "browser"`,
		"no right button here",
	}
	for i, want := range wantErr {
		req := decodeRequest(t, reqs[i+1])
		got := toolResults(t, req, len(req.Messages)-1)
		if len(got) != 1 || len(got[0]) != 1 || !strings.HasPrefix(got[0][0], "error: ") || !strings.Contains(got[0][0], want) {
			t.Errorf("request %d: tool results %q, want one error containing %q", i+1, got, want)
		}
		if res.Steps[i].Error == "" {
			t.Errorf("step %d (%s) records no error", i, res.Steps[i].Action.Kind)
		}
	}
	if res.Actions != 7 {
		t.Errorf("actions = %d, want 7: refused actions count", res.Actions)
	}
}

// TestProviderFailure checks that an API error ends the loop with
// ErrPlanner and the SDK's error.
func TestProviderFailure(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 529, 400} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, providertest.Script{
				Faults: []providertest.Fault{{Status: status, Times: 1, Message: "scripted failure"}},
				Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
					turn(computer("screenshot")),
				}}},
			})
			screen := newFakeScreen("")
			res, err := newPlanner(srv, screen, "claude-sonnet-4-5").Do(t.Context(), "anything")
			if !errors.Is(err, computeruse.ErrPlanner) {
				t.Fatalf("Do error = %v, want ErrPlanner", err)
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != status {
				t.Errorf("Do error = %v, want the SDK's error with status %d", err, status)
			}
			if res.Turns != 0 || res.Actions != 0 || screen.captured() != 0 {
				t.Errorf("Do = %d turns, %d actions, %d captures; want none", res.Turns, res.Actions, screen.captured())
			}
		})
	}
}

// TestScreenFailure checks that a screen that fails ends the loop with
// ErrScreen, not with an error result.
func TestScreenFailure(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		turn(computer("left_click", "coordinate", []int{1, 1})),
		{Text: "unreachable"},
	}}}})
	screen := newFakeScreen("")
	screen.onDo = func(context.Context, computeruse.Action) error { return errors.New("osascript: not allowed") }
	res, err := newPlanner(srv, screen, "claude-sonnet-4-5").Do(t.Context(), "click")
	if !errors.Is(err, computeruse.ErrScreen) || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("Do error = %v, want ErrScreen with the screen's error", err)
	}
	if res.Answer != "" || len(srv.Requests()) != 1 {
		t.Errorf("Do answer %q after %d requests, want none after 1", res.Answer, len(srv.Requests()))
	}
}

// TestGaveUp checks that an answer starting with FailedPrefix is an
// error that carries the planner's reason.
func TestGaveUp(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{Text: "FAILED: the app is not installed"},
	}}}})
	res, err := newPlanner(srv, newFakeScreen(""), "claude-sonnet-4-5").Do(t.Context(), "open it")
	if !errors.Is(err, computeruse.ErrGaveUp) || !strings.Contains(err.Error(), "the app is not installed") {
		t.Errorf("Do error = %v, want ErrGaveUp with the reason", err)
	}
	if res.Answer != "FAILED: the app is not installed" {
		t.Errorf("Do answer = %q, want the planner's text", res.Answer)
	}
}

// TestCancel checks that an ended context stops the loop at once, whether
// it ends while the planner thinks, while a wait waits or while the
// screen acts; each would otherwise take a minute.
func TestCancel(t *testing.T) {
	t.Parallel()
	const long = time.Minute
	for _, tc := range []struct {
		name   string
		script providertest.Script
		// arm starts the cancellation; it runs before Do.
		arm       func(t *testing.T, cancel context.CancelFunc, srv *providertest.Server, screen *fakeScreen)
		wantSteps []string
	}{
		{
			name:   "planner",
			script: providertest.Script{Latency: long},
			arm: func(t *testing.T, cancel context.CancelFunc, srv *providertest.Server, _ *fakeScreen) {
				go func() {
					// Cancel once the request is held by the server.
					for len(srv.Requests()) == 0 {
						select {
						case <-t.Context().Done():
							return
						case <-time.After(5 * time.Millisecond):
						}
					}
					cancel()
				}()
			},
		},
		{
			name: "wait",
			script: providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
				turn(computer("mouse_move", "coordinate", []int{1, 1}), computer("wait", "duration", long.Seconds())),
			}}}},
			arm: func(_ *testing.T, cancel context.CancelFunc, _ *providertest.Server, screen *fakeScreen) {
				// The wait starts right after the move, in the same turn.
				screen.onDo = func(context.Context, computeruse.Action) error {
					time.AfterFunc(50*time.Millisecond, cancel)
					return nil
				}
			},
			wantSteps: []string{"mouse_move", "wait"},
		},
		{
			name: "screen",
			script: providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
				turn(computer("type", "text", "slow")),
			}}}},
			arm: func(_ *testing.T, cancel context.CancelFunc, _ *providertest.Server, screen *fakeScreen) {
				screen.onDo = func(ctx context.Context, _ computeruse.Action) error {
					cancel()
					select {
					case <-ctx.Done():
						return errors.New("osascript: killed")
					case <-time.After(long):
						return nil
					}
				}
			},
			wantSteps: []string{"type"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, tc.script)
			screen := newFakeScreen("")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			tc.arm(t, cancel, srv, screen)
			start := time.Now()
			res, err := newPlanner(srv, screen, "claude-sonnet-4-5").Do(ctx, "be cancelled")
			if elapsed := time.Since(start); elapsed > long/2 {
				t.Errorf("Do returned after %v, want it to return once cancelled", elapsed)
			}
			if !errors.Is(err, context.Canceled) || errors.Is(err, computeruse.ErrPlanner) || errors.Is(err, computeruse.ErrScreen) {
				t.Errorf("Do error = %v, want context.Canceled alone", err)
			}
			var steps []string
			for _, s := range res.Steps {
				steps = append(steps, s.Action.Kind)
			}
			if diff := cmp.Diff(tc.wantSteps, steps); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheck checks the Planner's own mistakes, found before any request.
func TestCheck(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{})
	for _, tc := range []struct {
		name string
		edit func(p *computeruse.Planner)
		want string
	}{
		{"no screen", func(p *computeruse.Planner) { p.Screen = nil }, "no Screen"},
		{"no model", func(p *computeruse.Planner) { p.Model = "anthropic/" }, "no planner model"},
		{"negative budget", func(p *computeruse.Planner) { p.MaxActions = -1 }, "MaxActions is -1"},
		{"unknown tool", func(p *computeruse.Planner) { p.ToolVersion = "computer_1999" }, `unknown tool version "computer_1999"`},
	} {
		p := newPlanner(srv, newFakeScreen(""), "claude-sonnet-4-5")
		tc.edit(p)
		if _, err := p.Do(t.Context(), "x"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Do error = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("requests = %d, want none", n)
	}
}

func TestToolVersionFor(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]string{
		"anthropic/claude-sonnet-4-5":  computeruse.ToolComputer20250124,
		"claude-sonnet-4-5-20250929":   computeruse.ToolComputer20250124,
		"claude-haiku-4-5":             computeruse.ToolComputer20250124,
		"claude-opus-4-1-20250805":     computeruse.ToolComputer20250124,
		"claude-sonnet-4-20250514":     computeruse.ToolComputer20250124,
		"claude-3-7-sonnet-latest":     computeruse.ToolComputer20250124,
		"claude-opus-4-5":              computeruse.ToolComputer20251124,
		"claude-opus-4-6":              computeruse.ToolComputer20251124,
		"anthropic/claude-sonnet-4-6":  computeruse.ToolComputer20251124,
		"claude-some-future-model-9-9": computeruse.ToolComputer20251124,
	} {
		if got := computeruse.ToolVersionFor(model); got != want {
			t.Errorf("ToolVersionFor(%q) = %q, want %q", model, got, want)
		}
	}
}

func TestConverseTask(t *testing.T) {
	t.Parallel()
	prompt := "Line one\n  line \"two\" with <<<markers>>>\n"
	task := computeruse.ConverseTask("ChatGPT", prompt)
	if !strings.Contains(task, `"ChatGPT"`) {
		t.Errorf("ConverseTask does not name the app:\n%s", task)
	}
	_, after, ok := strings.Cut(task, "<<<PROMPT\n")
	if !ok || !strings.HasSuffix(after, "\nPROMPT>>>") || strings.TrimSuffix(after, "\nPROMPT>>>") != prompt {
		t.Errorf("ConverseTask does not hold the prompt verbatim between its markers:\n%s", task)
	}
}

// TestRefusal checks that a planner that declines the task is a planner
// failure.
func TestRefusal(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		turn(computer("screenshot")),
		{Refusal: "I will not do that."},
	}}}})
	res, err := newPlanner(srv, newFakeScreen(""), "claude-sonnet-4-5").Do(t.Context(), "something bad")
	if !errors.Is(err, computeruse.ErrPlanner) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Do error = %v, want ErrPlanner saying the planner refused", err)
	}
	if res.Turns != 2 || res.Actions != 1 || res.Answer != "" {
		t.Errorf("Do = %d turns, %d actions, answer %q; want 2, 1, none", res.Turns, res.Actions, res.Answer)
	}
}
