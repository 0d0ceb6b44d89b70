package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

// TestReasoningEffortSendsThinking: every reasoning effort reaches the
// Messages API as extended thinking with that level's budget, max_tokens
// above the budget (the budget on top of MaxTokens) and no temperature;
// the thinking of an earlier turn goes back at the start of its assistant
// message. Without an effort there is no thinking block.
func TestReasoningEffortSendsThinking(t *testing.T) {
	t.Parallel()
	efforts := []string{"minimal", "low", "medium", "high"}
	if len(efforts) != len(ThinkingBudgets) {
		t.Fatalf("ThinkingBudgets has %d levels, the test knows %d", len(ThinkingBudgets), len(efforts))
	}
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "ok"}}}}})
	p := newProvider(t, srv, 0)
	prior := json.RawMessage(`[{"type":"thinking","thinking":"I should call echo.","signature":"sig-abc"}]`)
	var last int64
	for _, effort := range append(efforts, "") {
		_, err := p.Complete(t.Context(), provider.Request{
			MaxTokens:       500,
			ReasoningEffort: effort,
			Tools:           []provider.Tool{echoTool},
			Messages: []provider.Message{
				{Role: provider.User, Text: "Echo hi."},
				{Role: provider.Assistant, Reasoning: prior, ToolCalls: []provider.ToolCall{{ID: "toolu_1", Name: "echo", Arguments: json.RawMessage(`{"s":"hi"}`)}}},
				{Role: provider.User, ToolResults: []provider.ToolResult{{CallID: "toolu_1", Name: "echo", Content: "hi"}}},
			},
		})
		if err != nil {
			t.Fatalf("effort %q: Complete() error = %v", effort, err)
		}
		reqs := srv.Requests()
		var body struct {
			MaxTokens int64 `json:"max_tokens"`
			Thinking  *struct {
				Type         string `json:"type"`
				BudgetTokens int64  `json:"budget_tokens"`
			} `json:"thinking"`
			Temperature *float64 `json:"temperature"`
			Messages    []struct {
				Content []map[string]any `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
			t.Fatal(err)
		}
		if effort == "" {
			if body.Thinking != nil || body.MaxTokens != 500 {
				t.Errorf("no effort: thinking %+v, max_tokens %d; want no thinking and max_tokens 500", body.Thinking, body.MaxTokens)
			}
			continue
		}
		th := body.Thinking
		if th == nil || th.Type != "enabled" || th.BudgetTokens != ThinkingBudgets[effort] {
			t.Errorf("effort %q: thinking %+v, want enabled with budget %d", effort, th, ThinkingBudgets[effort])
			continue
		}
		if th.BudgetTokens < 1024 || th.BudgetTokens <= last {
			t.Errorf("effort %q: budget %d, want at least 1024 and more than the level below (%d)", effort, th.BudgetTokens, last)
		}
		last = th.BudgetTokens
		if body.MaxTokens != 500+th.BudgetTokens {
			t.Errorf("effort %q: max_tokens %d, want MaxTokens plus the budget (%d)", effort, body.MaxTokens, 500+th.BudgetTokens)
		}
		if body.Temperature != nil {
			t.Errorf("effort %q: temperature %v is set; thinking takes none", effort, *body.Temperature)
		}
		first := body.Messages[1].Content[0]
		if first["type"] != "thinking" || first["signature"] != "sig-abc" || first["thinking"] != "I should call echo." {
			t.Errorf("effort %q: the assistant message starts with %v, want the earlier thinking block as it came", effort, first)
		}
	}
}

// TestSupportsThinking: the models from before extended thinking are
// refused, every later one and any unknown name is not.
func TestSupportsThinking(t *testing.T) {
	t.Parallel()
	no := []string{"claude-3-5-sonnet-20241022", "claude-3-5-haiku-latest", "claude-3-opus-20240229", "claude-3-haiku-20240307", "claude-3-sonnet-20240229", "claude-2.1", "claude-instant-1.2"}
	yes := []string{"claude-3-7-sonnet-20250219", "claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5", "claude-test", "my-gateway-alias"}
	for _, m := range no {
		if SupportsThinking(m) {
			t.Errorf("SupportsThinking(%q) = true, want false", m)
		}
	}
	for _, m := range yes {
		if !SupportsThinking(m) {
			t.Errorf("SupportsThinking(%q) = false, want true", m)
		}
	}
}
