package computeruse_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/mst-eval/mst/internal/builtin/client/desktop/computeruse"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

// The fake chat app's screen: 64×40 pixels, a message box along the
// bottom (y ≥ 30). Its whole image is one color that tells its state.
const (
	screenW, screenH = 64, 40
	boxTop           = 30
)

// Screen states, by the color the fake screen shows.
const (
	stateBlank    = "blank"    // nothing done yet
	stateFocused  = "focused"  // the message box was clicked
	stateTyped    = "typed"    // the prompt is in the box
	stateAnswered = "answered" // the prompt was sent and answered
)

var stateColors = map[string]color.RGBA{
	stateBlank:    {128, 128, 128, 255},
	stateFocused:  {0, 0, 255, 255},
	stateTyped:    {255, 255, 0, 255},
	stateAnswered: {0, 255, 0, 255},
}

// fakeScreen is a chat app as the planner sees it: clicking the message
// box focuses it, typing the prompt there fills it, Return sends it and
// the answer appears. It records the actions it receives.
type fakeScreen struct {
	prompt string
	// onDo, if set, runs in every Do once the action is recorded; a
	// non-nil error is returned by Do, and the action has no effect.
	onDo func(ctx context.Context, a computeruse.Action) error

	mu       sync.Mutex
	state    string
	typed    string
	actions  []computeruse.Action
	captures int
}

func newFakeScreen(prompt string) *fakeScreen {
	return &fakeScreen{prompt: prompt, state: stateBlank}
}

func (s *fakeScreen) Size() (int, int) { return screenW, screenH }

func (s *fakeScreen) Capture(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.captures++
	img := image.NewRGBA(image.Rect(0, 0, screenW, screenH))
	c := stateColors[s.state]
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (s *fakeScreen) Do(ctx context.Context, a computeruse.Action) error {
	s.mu.Lock()
	s.actions = append(s.actions, a)
	s.mu.Unlock()
	if s.onDo != nil {
		if err := s.onDo(ctx, a); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case a.Kind == computeruse.KindLeftClick && a.Y >= boxTop && s.state == stateBlank:
		s.state = stateFocused
	case a.Kind == computeruse.KindType && s.state == stateFocused:
		s.typed += a.Text
		if s.typed == s.prompt {
			s.state = stateTyped
		}
	case a.Kind == computeruse.KindKey && a.Key == "Return" && s.state == stateTyped:
		s.state = stateAnswered
	}
	return nil
}

// seen returns the actions received so far.
func (s *fakeScreen) seen() []computeruse.Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]computeruse.Action(nil), s.actions...)
}

func (s *fakeScreen) captured() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.captures
}

// stateOf names the state a screenshot shows, or describes it.
func stateOf(t *testing.T, b64 string) string {
	t.Helper()
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("screenshot is not base64: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != screenW || b.Dy() != screenH {
		return "wrong size"
	}
	r, g, b, a := img.At(0, 0).RGBA()
	got := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
	for name, c := range stateColors {
		if c == got {
			return name
		}
	}
	return "unknown color"
}

// computer is a scripted call of the computer tool.
func computer(action string, kv ...any) providertest.Call {
	args := map[string]any{"action": action}
	for i := 0; i+1 < len(kv); i += 2 {
		args[kv[i].(string)] = kv[i+1]
	}
	return providertest.Call{Tool: "computer", Arguments: args}
}

// turn is a scripted planner turn with tool calls.
func turn(calls ...providertest.Call) providertest.Turn {
	return providertest.Turn{ToolCalls: calls}
}

// newPlanner returns a planner on screen whose client talks to srv,
// without retries.
func newPlanner(srv *providertest.Server, screen computeruse.Screen, model string) *computeruse.Planner {
	return &computeruse.Planner{
		Client: anthropic.NewClient(
			option.WithBaseURL(srv.URL),
			option.WithAPIKey("dummy"),
			option.WithMaxRetries(0),
		),
		Model:      model,
		MaxActions: 20,
		Screen:     screen,
	}
}

// sentRequest is what a test reads of one recorded Messages request.
type sentRequest struct {
	Tools []struct {
		Name   string `json:"name"`
		Type   string `json:"type"`
		Width  int    `json:"display_width_px"`
		Height int    `json:"display_height_px"`
	} `json:"tools"`
	System []struct {
		Text string `json:"text"`
	} `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type sentBlock struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	ID        string `json:"id"`
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error"`
	Content   []struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	} `json:"content"`
}

func decodeRequest(t *testing.T, r providertest.Request) sentRequest {
	t.Helper()
	var req sentRequest
	if err := json.Unmarshal(r.Body, &req); err != nil {
		t.Fatalf("request body: %v", err)
	}
	return req
}

// toolResults summarizes the tool_result blocks of one message: per
// result, "error: TEXT", "text: TEXT" or "image: STATE" for each part.
// It also checks each result answers a tool_use of the message before.
func toolResults(t *testing.T, req sentRequest, i int) [][]string {
	t.Helper()
	var blocks, previous []sentBlock
	if err := json.Unmarshal(req.Messages[i].Content, &blocks); err != nil {
		return nil // a plain text message
	}
	if i > 0 {
		json.Unmarshal(req.Messages[i-1].Content, &previous)
	}
	uses := map[string]bool{}
	for _, b := range previous {
		if b.Type == "tool_use" {
			uses[b.ID] = true
		}
	}
	var out [][]string
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		if !uses[b.ToolUseID] {
			t.Errorf("message %d: tool_result for %q answers no tool_use of message %d", i, b.ToolUseID, i-1)
		}
		var parts []string
		for _, c := range b.Content {
			switch {
			case c.Type == "text" && b.IsError:
				parts = append(parts, "error: "+c.Text)
			case c.Type == "text":
				parts = append(parts, "text: "+c.Text)
			case c.Type == "image":
				if c.Source.Type != "base64" || c.Source.MediaType != "image/png" {
					t.Errorf("message %d: image source %s %s, want base64 image/png", i, c.Source.Type, c.Source.MediaType)
				}
				parts = append(parts, "image: "+stateOf(t, c.Source.Data))
			default:
				parts = append(parts, "part "+c.Type)
			}
		}
		out = append(out, parts)
	}
	return out
}
