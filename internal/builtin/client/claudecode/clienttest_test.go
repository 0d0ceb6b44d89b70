//go:build unix

package claudecode

import (
	"testing"

	"github.com/mst-eval/mst/client/clienttest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
)

// TestConformance runs the client conformance suite on the real Claude
// Code CLI against the fake provider.
func TestConformance(t *testing.T) {
	t.Parallel()
	cli := peertest.ClaudeCode(t)
	clienttest.Run(t, clienttest.Config{
		Definition: Definition(), Model: "anthropic/claude-test-1", KeyVar: "ANTHROPIC_API_KEY", CommandOption: "command",
		Provider: func(url string) map[string]any {
			return map[string]any{"baseURL": url, "command": cli, "maxRetries": 0}
		},
	})
}
