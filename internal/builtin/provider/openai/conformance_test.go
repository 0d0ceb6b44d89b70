package openai_test

import (
	"testing"

	"github.com/mst-eval/mst/internal/builtin/provider/openai"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providersuite"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, api := range []string{openai.APIResponses, openai.APIChat} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			providersuite.Run(t, providersuite.Config{
				Definition: openai.Definition(),
				Model:      "gpt-test",
				Options:    provider.Options{APIKey: "test-key", API: api},
				// The base URL includes the version path.
				BaseURL: func(url string) string { return url + "/v1" },
			})
		})
	}
}
