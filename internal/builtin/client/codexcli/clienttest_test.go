package codexcli

import (
	"testing"

	"github.com/mst-eval/mst/client/clienttest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
)

// TestConformance runs the client conformance suite on the real Codex CLI
// against the fake provider.
func TestConformance(t *testing.T) {
	t.Parallel()
	cli := peertest.Codex(t)
	clienttest.Run(t, clienttest.Config{
		Definition: Definition(), Model: "openai/gpt-test-1", KeyVar: "OPENAI_API_KEY", CommandOption: "command",
		Provider: func(url string) map[string]any {
			return map[string]any{"baseURL": url + "/v1", "command": cli, "requestMaxRetries": 0, "streamMaxRetries": 0}
		},
	})
}
