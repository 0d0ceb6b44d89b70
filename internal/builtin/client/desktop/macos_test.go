package desktop

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/desktop/computeruse"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/transcript"
)

// chatScreen is a scripted screen of a chat app: what was typed, and
// whether it was sent.
type chatScreen struct {
	mu    sync.Mutex
	typed string
	sent  bool
	acts  []string
}

func (c *chatScreen) Size() (int, int) { return 64, 40 }

func (c *chatScreen) Capture(context.Context) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	img := image.NewRGBA(image.Rect(0, 0, 64, 40))
	if c.sent {
		img.Set(1, 1, color.RGBA{G: 255, A: 255})
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes(), nil
}

func (c *chatScreen) Do(_ context.Context, a computeruse.Action) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acts = append(c.acts, a.Kind)
	switch a.Kind {
	case "type":
		c.typed += a.Text
	case "key":
		if a.Key == "Return" {
			c.sent = true
		}
	}
	return nil
}

// TestMacOSPlanner runs a cowork trial the macOS way on any OS: the
// session's Computer Use driver, with the fake provider as the planner
// and a scripted screen, records the app's answer as the planner read it,
// the actions, and the planner's cost.
func TestMacOSPlanner(t *testing.T) {
	prompt := "What is 2+2? ✓"
	prov := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{ToolCalls: []providertest.Call{{Tool: "computer", Arguments: map[string]any{"action": "screenshot"}}}},
		{ToolCalls: []providertest.Call{{Tool: "computer", Arguments: map[string]any{"action": "left_click", "coordinate": []int{10, 30}}}}},
		{ToolCalls: []providertest.Call{{Tool: "computer", Arguments: map[string]any{"action": "type", "text": prompt}}}},
		{ToolCalls: []providertest.Call{{Tool: "computer", Arguments: map[string]any{"action": "key", "text": "Return"}}}},
		{Text: "4", InputTokens: 100, OutputTokens: 7},
	}}}})
	screen := &chatScreen{}
	old := newMacScreen
	newMacScreen = func(context.Context, *Session) (computeruse.Screen, error) { return screen, nil }
	defer func() { newMacScreen = old }()

	opts, _ := json.Marshal(map[string]any{"computerUseModel": "anthropic/claude-sonnet-4-5", "maxActions": 10})
	p := client.OpenParams{Variant: "v", Model: "anthropic/claude-test-1", Options: opts, Logger: slog.New(slog.DiscardHandler),
		Env: map[string]string{"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": prov.URL}}
	var o options
	json.Unmarshal(opts, &o)
	s, err := openMacOS(t.Context(), App{Client: "cowork", Product: "Claude"}, p, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Run(t.Context(), client.Trial{Prompt: prompt})
	if err != nil || res.Outcome.Status != transcript.Answered || res.Answer != "4" {
		t.Fatalf("outcome %+v, answer %q, %v", res.Outcome, res.Answer, err)
	}
	if screen.typed != prompt || !screen.sent || strings.Join(screen.acts, " ") != "left_click type key" {
		t.Errorf("the screen saw %v, typed %q", screen.acts, screen.typed)
	}
	tel := res.ClientTelemetry
	planner, _ := tel["planner"].(map[string]any)
	if tel["automation"] != "computer-use" || tel["actions"] != 4 || planner["inputTokens"] != int64(140) {
		t.Errorf("telemetry %v", tel)
	}
	reqs := prov.Requests()
	if len(reqs) != 5 || !strings.Contains(string(reqs[0].Body), `"computer_20250124"`) || !strings.Contains(string(reqs[0].Body), "What is 2+2? ✓") {
		t.Fatalf("%d planner requests; the first: %s", len(reqs), reqs[0].Body)
	}

	// Without the planner's key, Open says which variable to set.
	p.Env = nil
	if _, err := openMacOS(t.Context(), App{Client: "cowork", Product: "Claude"}, p, o); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Fatalf("no key: %v", err)
	}
}
