package api_test

import (
	"testing"

	"github.com/mst-eval/mst/client/clienttest"
	"github.com/mst-eval/mst/internal/builtin/client/api"
)

// TestConformance runs the client conformance suite on the api client:
// with the offline model, and with the fake provider in each wire format.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cfg  clienttest.Config
	}{
		{"offline", clienttest.Config{
			Model: "offline",
			Cannot: map[clienttest.Case]string{
				clienttest.ProviderError: "the offline model calls no provider",
				clienttest.ProviderDown:  "the offline model calls no provider",
				clienttest.MaxActions:    "the offline model makes at most one tool call per prompt, so no maxActions (at least 1) is ever reached",
			},
		}},
		{"anthropic", clienttest.Config{
			Model: "anthropic/claude-test-1", KeyVar: "ANTHROPIC_API_KEY",
			Provider: func(url string) map[string]any { return map[string]any{"baseURL": url, "maxRetries": 0} },
		}},
		{"openai-responses", clienttest.Config{
			Model: "openai/gpt-test-1", KeyVar: "OPENAI_API_KEY",
			Provider: func(url string) map[string]any {
				return map[string]any{"baseURL": url + "/v1", "api": "responses", "maxRetries": 0}
			},
			Cannot: map[clienttest.Case]string{clienttest.MissingKey: noKeyNeeded},
		}},
		{"openai-chat", clienttest.Config{
			Model: "openai/gpt-test-1", KeyVar: "OPENAI_API_KEY",
			Provider: func(url string) map[string]any {
				return map[string]any{"baseURL": url + "/v1", "api": "chat", "maxRetries": 0}
			},
			Cannot: map[clienttest.Case]string{clienttest.MissingKey: noKeyNeeded},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.cfg.Definition = api.Definition(providers) // providers: the built-in registry, in e2e_test.go
			c.cfg.SessionProcesses = true
			clienttest.Run(t, c.cfg)
		})
	}
}

// noKeyNeeded is why an openai/ model with a baseURL opens without a key.
const noKeyNeeded = "an OpenAI-compatible server at a baseURL (Ollama, vLLM) often needs no key, so api sends a placeholder rather than refusing"
