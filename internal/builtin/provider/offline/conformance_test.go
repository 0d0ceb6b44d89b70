package offline_test

import (
	"testing"

	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/provider/providersuite"
)

// TestConformance runs the cases that apply to a model without a network:
// no BaseURL, so the fake server's cases do not apply.
func TestConformance(t *testing.T) {
	t.Parallel()
	providersuite.Run(t, providersuite.Config{Definition: offline.Definition()})
}
