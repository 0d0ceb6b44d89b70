package anthropic_test

import (
	"testing"

	"github.com/mst-eval/mst/internal/builtin/provider/anthropic"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providersuite"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	providersuite.Run(t, providersuite.Config{
		Definition: anthropic.Definition(),
		Model:      "claude-test",
		Options:    provider.Options{APIKey: "test-key"},
		// The SDK appends /v1/messages to the API's address.
		BaseURL: func(url string) string { return url },
	})
}
