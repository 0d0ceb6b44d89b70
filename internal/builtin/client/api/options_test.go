package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/api"
	"github.com/mst-eval/mst/internal/builtin/provider/anthropic"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
)

// TestBaseURLDoubledPath: for each provider, a baseURL that already ends
// in part of the path the provider's client appends is refused, by the
// load-time check and by Open, with the option, the value and the value to
// write; the forms each provider takes pass.
func TestBaseURLDoubledPath(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{})
	for _, tc := range []struct {
		model string
		bad   map[string]string // value -> the value to write instead
		good  []string
	}{
		{"anthropic/claude-test-1", map[string]string{
			fake.URL + "/v1":          fake.URL,
			fake.URL + "/v1/messages": fake.URL,
			fake.URL + "/v1/":         fake.URL,
		}, []string{fake.URL, fake.URL + "/gateway"}},
		{"openai/gpt-test-1", map[string]string{
			fake.URL + "/v1/chat/completions": fake.URL + "/v1",
			fake.URL + "/v1/responses":        fake.URL + "/v1",
		}, []string{fake.URL + "/v1", fake.URL + "/openai/v1"}},
	} {
		for raw, fixed := range tc.bad {
			opts := json.RawMessage(fmt.Sprintf(`{"baseURL": %q}`, raw))
			load := api.CheckOptions(providers, tc.model, opts)
			s, open := api.Definition(providers).Open(t.Context(), client.OpenParams{
				Variant: "v", Model: tc.model, Options: opts,
				Env:    map[string]string{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if s != nil {
				s.Close()
			}
			for when, err := range map[string]error{"at load": load, "at Open": open} {
				if err == nil {
					t.Errorf("%s baseURL %q %s: no error, want the doubled path refused", tc.model, raw, when)
					continue
				}
				for _, want := range []string{"clientOptions.baseURL", `"` + raw + `"`, `write "` + fixed + `"`} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s baseURL %q %s: %v; want it to say %s", tc.model, raw, when, err, want)
					}
				}
			}
		}
		for _, raw := range tc.good {
			if err := api.CheckOptions(providers, tc.model, json.RawMessage(fmt.Sprintf(`{"baseURL": %q}`, raw))); err != nil {
				t.Errorf("%s baseURL %q: %v, want it to pass", tc.model, raw, err)
			}
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the provider got %d requests, want none: a refused baseURL sends nothing", n)
	}
}

// TestReasoningEffortAnthropic: reasoningEffort on an anthropic/ model
// reaches the Messages API as extended thinking with that level's budget,
// max_tokens being maxTokens plus the budget.
func TestReasoningEffortAnthropic(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "Thought it over."}}}}})
	w := wires[0] // anthropic
	w.options = func(url string) string {
		return fmt.Sprintf(`{"baseURL": %q, "reasoningEffort": "medium", "maxTokens": 1000}`, url)
	}
	res := runTrial(t, open(t, w, fake.URL, peertest.Everything(t)), "think, then answer")
	if res.Answer != "Thought it over." {
		t.Fatalf("answer %q, outcome %+v", res.Answer, res.Outcome)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	var body struct {
		MaxTokens int64 `json:"max_tokens"`
		Thinking  struct {
			Type         string `json:"type"`
			BudgetTokens int64  `json:"budget_tokens"`
		} `json:"thinking"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	budget := anthropic.ThinkingBudgets["medium"]
	if body.Thinking.Type != "enabled" || body.Thinking.BudgetTokens != budget || body.MaxTokens != 1000+budget {
		t.Errorf("request: thinking %+v, max_tokens %d; want enabled with budget %d and max_tokens %d", body.Thinking, body.MaxTokens, budget, 1000+budget)
	}
}
