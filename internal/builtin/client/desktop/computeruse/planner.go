package computeruse

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// Screen is the machine's display and input, as the planner acts on it.
// Its methods are called from one goroutine at a time.
type Screen interface {
	// Size is the screen's size in the pixels the planner sees: screenshots
	// have this size and action coordinates are in these pixels. It does
	// not change while a Planner runs.
	Size() (width, height int)
	// Capture returns a screenshot as a PNG of Size.
	Capture(ctx context.Context) ([]byte, error)
	// Do performs one input action: any kind but screenshot, wait and
	// cursor_position, which the planner answers itself. The action has
	// been checked against Size. An error that wraps ErrUnsupported goes
	// back to the planner as a failed action; any other ends the loop.
	Do(ctx context.Context, a Action) error
}

// Errors that callers branch on.
var (
	// ErrPlanner wraps a failure of the planner model's API, so a caller
	// can tell it from a failure of the app under test.
	ErrPlanner = errors.New("computer use planner failed")
	// ErrBudget ends a loop whose planner asked for more than MaxActions
	// actions.
	ErrBudget = errors.New("computer use action budget exhausted")
	// ErrScreen wraps a failure to capture the screen or perform an
	// action on it.
	ErrScreen = errors.New("computer use screen failed")
	// ErrGaveUp ends a loop whose planner answered with FailedPrefix: it
	// could not do the task. The answer is in the Result.
	ErrGaveUp = errors.New("computer use planner could not do the task")
	// ErrUnsupported is wrapped by a Screen's Do for an action it cannot
	// perform; the planner is told and may try something else.
	ErrUnsupported = errors.New("action not supported by this screen")
)

// FailedPrefix starts the answer of a planner that could not do its task,
// as the system prompt asks.
const FailedPrefix = "FAILED:"

// Defaults of the Planner's zero fields.
const (
	DefaultMaxActions      = 50
	DefaultMaxTokens       = 4096
	DefaultKeepScreenshots = 5
	DefaultSettle          = 500 * time.Millisecond
)

// maxPauses bounds the answers in a row that end with pause_turn and no
// action, which would otherwise be asked again without end.
const maxPauses = 3

// Planner runs the Computer Use loop: it sends the task to a planner model
// with the computer tool, performs the actions the model asks for on
// Screen, sends back the results (screenshots as images), and repeats
// until the model answers without asking for an action.
//
// The fields are set before Do and not changed while it runs. A Planner
// runs one task at a time.
type Planner struct {
	// Client is the Anthropic client, built by the caller with its base
	// URL, key and retries.
	Client anthropic.Client
	// Model is the planner model's id, without the "anthropic/" of MST's
	// option (which is removed if present).
	Model string
	// MaxActions is how many actions the planner may ask for, screenshots,
	// waits and refused actions included; asking for one more ends the loop
	// with ErrBudget. Zero means DefaultMaxActions.
	MaxActions int
	// Screen is acted on.
	Screen Screen
	// Logger receives a debug line per action and an info line per loop;
	// nil discards them.
	Logger *slog.Logger

	// ToolVersion is the computer tool's type: ToolComputer20250124 or
	// ToolComputer20251124. "" picks the one Model was trained with (see
	// ToolVersionFor).
	ToolVersion string
	// ScreenshotAfter, when set, makes the result of every input action a
	// screenshot taken Settle after it, as Anthropic's reference loop does;
	// otherwise the result is a short text and the planner asks for a
	// screenshot when it wants one. The screenshots taken this way are not
	// actions of their own.
	ScreenshotAfter bool
	// Settle is the wait between an input action and its screenshot when
	// ScreenshotAfter is set. Zero means DefaultSettle; negative means no
	// wait.
	Settle time.Duration
	// KeepScreenshots is how many of the latest screenshots stay in the
	// conversation; older ones are replaced by a short text, which keeps
	// each request small. Zero means DefaultKeepScreenshots; negative keeps
	// them all.
	KeepScreenshots int
	// MaxTokens bounds each planner answer. Zero means DefaultMaxTokens.
	MaxTokens int64
}

// Result is what one loop did.
type Result struct {
	// Answer is the text of the planner's last answer, the one without
	// actions.
	Answer string `json:"answer"`
	// Actions is how many actions the planner asked for, as counted
	// against MaxActions.
	Actions int `json:"actions"`
	// Turns is how many planner answers were received.
	Turns int `json:"turns"`
	// Usage is the planner's usage summed over its answers.
	Usage Usage `json:"usage"`
	// Steps are the actions in order, for the transcript.
	Steps []Step `json:"steps"`
}

// Usage is token usage as the API reports it.
type Usage struct {
	InputTokens              int64 `json:"inputTokens"`
	OutputTokens             int64 `json:"outputTokens"`
	CacheReadInputTokens     int64 `json:"cacheReadInputTokens,omitempty"`
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens,omitempty"`
}

// Step is one action the planner asked for, as recorded for the
// transcript. It holds no screenshot and no typed text, only their sizes.
type Step struct {
	// Turn is the planner answer (from 1) that asked for the action.
	Turn int `json:"turn"`
	// Action is the action as performed; its Text is left out. For an
	// action refused before it ran, only Kind is set.
	Action Action `json:"action"`
	// TextChars is the length of a type action's text, in characters.
	TextChars int `json:"textChars,omitempty"`
	// ScreenshotBytes is the size of the PNG sent back, or 0.
	ScreenshotBytes int `json:"screenshotBytes,omitempty"`
	// Error is the error sent back to the planner, or "".
	Error string `json:"error,omitempty"`
	// Elapsed is how long the action took, its screenshot included.
	Elapsed time.Duration `json:"elapsed"`
}

// Do runs the loop for task and returns the planner's answer. It ends
// with an error wrapping ErrPlanner when the API fails, ErrBudget when the
// planner asks for too many actions, ErrScreen when the screen fails,
// ErrGaveUp when the planner says it could not do the task, and ctx's
// error when ctx ends. The Result is filled in as far as the loop got,
// error or not.
func (p *Planner) Do(ctx context.Context, task string) (Result, error) {
	var res Result
	if err := p.check(); err != nil {
		return res, err
	}
	log := p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	width, height := p.Screen.Size()
	model := strings.TrimPrefix(p.Model, "anthropic/")
	version := p.ToolVersion
	if version == "" {
		version = ToolVersionFor(model)
	}
	tool, beta, err := computerTool(version, width, height)
	if err != nil {
		return res, err
	}
	run := &loop{
		p:      p,
		log:    log,
		width:  width,
		height: height,
		budget: cmp.Or(p.MaxActions, DefaultMaxActions),
		keep:   cmp.Or(p.KeepScreenshots, DefaultKeepScreenshots),
		settle: cmp.Or(p.Settle, DefaultSettle),
		res:    &res,
	}
	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: cmp.Or(p.MaxTokens, DefaultMaxTokens),
		System:    []anthropic.BetaTextBlockParam{{Text: systemPrompt(width, height, p.ScreenshotAfter)}},
		Tools:     []anthropic.BetaToolUnionParam{tool},
		Betas:     []anthropic.AnthropicBeta{beta},
		Messages: []anthropic.BetaMessageParam{
			anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(task)),
		},
	}
	log.Info("computer use started", "model", model, "tool", version, "width", width, "height", height, "maxActions", run.budget)
	start := time.Now()
	defer func() {
		log.Info("computer use ended", "turns", res.Turns, "actions", res.Actions,
			"inputTokens", res.Usage.InputTokens, "outputTokens", res.Usage.OutputTokens,
			"elapsed", time.Since(start).Round(time.Millisecond), "err", err)
	}()
	pauses := 0 // answers in a row that ended with pause_turn
	for {
		var msg *anthropic.BetaMessage
		msg, err = p.Client.Beta.Messages.New(ctx, params)
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("computer use: waiting for planner answer %d: %w", res.Turns+1, context.Cause(ctx))
				return res, err
			}
			err = fmt.Errorf("%w: answer %d from %s: %w", ErrPlanner, res.Turns+1, model, err)
			return res, err
		}
		res.Turns++
		res.Usage.add(msg.Usage)
		if msg.StopReason != anthropic.BetaStopReasonPauseTurn {
			pauses = 0
		}
		params.Messages = append(params.Messages, msg.ToParam())

		var uses []anthropic.BetaContentBlockUnion
		var texts []string
		for _, b := range msg.Content {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use":
				uses = append(uses, b)
			}
		}
		if len(uses) == 0 {
			switch msg.StopReason {
			case anthropic.BetaStopReasonPauseTurn:
				// The API asks to be called again with its partial turn.
				if pauses++; pauses > maxPauses {
					err = fmt.Errorf("%w: %s paused its answer %d times in a row without acting", ErrPlanner, model, pauses)
					return res, err
				}
				continue
			case anthropic.BetaStopReasonRefusal:
				err = fmt.Errorf("%w: %s refused the task: %s", ErrPlanner, model, strings.Join(texts, "\n"))
				return res, err
			case anthropic.BetaStopReasonMaxTokens:
				err = fmt.Errorf("%w: answer %d from %s was cut off at max_tokens (%d); raise MaxTokens", ErrPlanner, res.Turns, model, params.MaxTokens)
				return res, err
			}
			res.Answer = strings.TrimSpace(strings.Join(texts, "\n"))
			if why, ok := strings.CutPrefix(res.Answer, FailedPrefix); ok {
				err = fmt.Errorf("%w: %s", ErrGaveUp, strings.TrimSpace(why))
				return res, err
			}
			return res, nil
		}

		var results []anthropic.BetaContentBlockParamUnion
		for _, use := range uses {
			var r *anthropic.BetaToolResultBlockParam
			r, err = run.act(ctx, use)
			if err != nil {
				return res, err
			}
			results = append(results, anthropic.BetaContentBlockParamUnion{OfToolResult: r})
		}
		params.Messages = append(params.Messages, anthropic.NewBetaUserMessage(results...))
		run.trim()
	}
}

// check reports a Planner that cannot run.
func (p *Planner) check() error {
	switch {
	case p.Screen == nil:
		return errors.New("computer use: no Screen to act on")
	case strings.TrimPrefix(p.Model, "anthropic/") == "":
		return errors.New("computer use: no planner model: set computerUseModel, e.g. anthropic/claude-sonnet-4-5")
	case p.MaxActions < 0:
		return fmt.Errorf("computer use: MaxActions is %d; it must be positive", p.MaxActions)
	}
	width, height := p.Screen.Size()
	if width <= 0 || height <= 0 {
		return fmt.Errorf("computer use: the screen's size is %dx%d", width, height)
	}
	return nil
}

// loop is the state of one Do.
type loop struct {
	p             *Planner
	log           *slog.Logger
	width, height int
	budget, keep  int
	settle        time.Duration
	res           *Result
	cursor        cursor
	// shots are the tool results that carry a screenshot, oldest first.
	shots []*anthropic.BetaToolResultBlockParam
}

// act performs one tool_use and returns its result. Mistakes of the
// planner become error results; the error is for what ends the loop.
func (l *loop) act(ctx context.Context, use anthropic.BetaContentBlockUnion) (*anthropic.BetaToolResultBlockParam, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("computer use: %w", context.Cause(ctx))
	}
	if l.res.Actions >= l.budget {
		return nil, fmt.Errorf("%w: the planner asked for action %d of at most %d", ErrBudget, l.res.Actions+1, l.budget)
	}
	l.res.Actions++
	turn := l.res.Turns
	start := time.Now()
	step := Step{Turn: turn}
	defer func() {
		step.Elapsed = time.Since(start)
		l.res.Steps = append(l.res.Steps, step)
	}()

	fail := func(msg string) *anthropic.BetaToolResultBlockParam {
		step.Error = msg
		l.log.Debug("computer use action refused", "turn", turn, "action", step.Action.Kind, "error", msg)
		return &anthropic.BetaToolResultBlockParam{
			ToolUseID: use.ID,
			IsError:   anthropic.Bool(true),
			Content:   []anthropic.BetaToolResultBlockParamContentUnion{textContent(msg)},
		}
	}
	if use.Name != toolName {
		step.Action.Kind = use.Name
		return fail(fmt.Sprintf("there is no tool %q: use the %q tool", use.Name, toolName)), nil
	}
	a, err := parseAction(use.Input, l.width, l.height, l.cursor)
	step.Action = a
	step.Action.Text = ""
	step.TextChars = len([]rune(a.Text))
	if err != nil {
		return fail(err.Error()), nil
	}

	result := &anthropic.BetaToolResultBlockParam{ToolUseID: use.ID}
	screenshot := false
	switch a.Kind {
	case KindScreenshot:
		screenshot = true
	case KindCursorPosition:
		if !l.cursor.known {
			return fail("the cursor's position is not known: no mouse action has set it yet"), nil
		}
		result.Content = append(result.Content, textContent(fmt.Sprintf("X=%d,Y=%d", l.cursor.x, l.cursor.y)))
	case KindWait:
		if err := sleep(ctx, a.Duration); err != nil {
			return nil, fmt.Errorf("computer use: waiting: %w", err)
		}
		screenshot = true
	default:
		if err := l.p.Screen.Do(ctx, a); err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, fmt.Errorf("computer use: %s: %w", a.Kind, context.Cause(ctx))
			case errors.Is(err, ErrUnsupported):
				return fail(err.Error()), nil
			}
			return nil, fmt.Errorf("%w: %s: %w", ErrScreen, a.Kind, err)
		}
		if a.pointer() {
			l.cursor = cursor{x: a.X, y: a.Y, known: true}
		}
		if l.p.ScreenshotAfter {
			if err := sleep(ctx, l.settle); err != nil {
				return nil, fmt.Errorf("computer use: waiting after %s: %w", a.Kind, err)
			}
			screenshot = true
		} else {
			result.Content = append(result.Content, textContent("done"))
		}
	}
	if screenshot {
		png, err := l.p.Screen.Capture(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("computer use: screenshot: %w", context.Cause(ctx))
			}
			return nil, fmt.Errorf("%w: screenshot: %w", ErrScreen, err)
		}
		if !isPNG(png) {
			return nil, fmt.Errorf("%w: screenshot: the screen returned %d bytes that are not a PNG", ErrScreen, len(png))
		}
		step.ScreenshotBytes = len(png)
		result.Content = append(result.Content, anthropic.BetaToolResultBlockParamContentUnion{
			OfImage: &anthropic.BetaImageBlockParam{Source: anthropic.BetaImageBlockParamSourceUnion{
				OfBase64: &anthropic.BetaBase64ImageSourceParam{
					Data:      base64.StdEncoding.EncodeToString(png),
					MediaType: anthropic.BetaBase64ImageSourceMediaTypeImagePNG,
				},
			}},
		})
		l.shots = append(l.shots, result)
	}
	l.log.Debug("computer use action", "turn", turn, "action", a.Kind, "x", a.X, "y", a.Y,
		"screenshotBytes", step.ScreenshotBytes, "elapsed", time.Since(start).Round(time.Millisecond))
	return result, nil
}

// omitted replaces a screenshot that trim removed from the conversation.
const omitted = "(an older screenshot, removed to keep the conversation short)"

// trim replaces all but the latest keep screenshots with a short text.
func (l *loop) trim() {
	if l.keep < 0 {
		return
	}
	for len(l.shots) > l.keep {
		r := l.shots[0]
		l.shots = l.shots[1:]
		for i, c := range r.Content {
			if c.OfImage != nil {
				r.Content[i] = textContent(omitted)
			}
		}
	}
}

// add adds one answer's usage.
func (u *Usage) add(b anthropic.BetaUsage) {
	u.InputTokens += b.InputTokens
	u.OutputTokens += b.OutputTokens
	u.CacheReadInputTokens += b.CacheReadInputTokens
	u.CacheCreationInputTokens += b.CacheCreationInputTokens
}

func textContent(s string) anthropic.BetaToolResultBlockParamContentUnion {
	return anthropic.BetaToolResultBlockParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: s}}
}

// isPNG reports whether b starts with the PNG signature.
func isPNG(b []byte) bool {
	return len(b) > 8 && string(b[:8]) == "\x89PNG\r\n\x1a\n"
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
