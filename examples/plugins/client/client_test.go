package client_test

import (
	"testing"

	"github.com/mst-eval/mst/client/clienttest"

	"example.com/mst-plugins/client"
)

// TestConformance runs MST's client suite on echo-agent. It has no model,
// so the cases about a model's provider do not apply.
func TestConformance(t *testing.T) {
	t.Parallel()
	clienttest.Run(t, clienttest.Config{
		Definition: client.Definition(),
		Model:      "offline",
		Cannot: map[clienttest.Case]string{
			clienttest.ProviderError: "echo-agent has no model, so no provider to fail",
			clienttest.ProviderDown:  "echo-agent has no model, so no provider to be down",
		},
	})
}
