package google_test

import (
	"testing"

	"github.com/mst-eval/mst/internal/builtin/provider/google"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providersuite"
)

// TestConformance runs the suite once MST has an API implementation of
// Gemini. Until then the definition has no New (only the Gemini CLI runs
// its models), and what the suite checks of a definition without one is
// that MST does not offer to build it.
func TestConformance(t *testing.T) {
	t.Parallel()
	def := google.Definition()
	if def.New == nil {
		reg := provider.NewRegistry(def)
		if got := provider.Buildable(reg); len(got) != 0 {
			t.Errorf("a definition without New is buildable: %q", got)
		}
		return
	}
	providersuite.Run(t, providersuite.Config{
		Definition: def,
		Model:      "gemini-test",
		Options:    provider.Options{APIKey: "test-key"},
		// The fake serves Gemini at /v1beta/models/MODEL:generateContent.
		BaseURL: func(url string) string { return url },
	})
}
