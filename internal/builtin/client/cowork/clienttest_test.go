package cowork

import (
	"testing"

	"github.com/mst-eval/mst/internal/builtin/client/desktop/desktoptest"
)

// TestDefinition checks the definition against the desktop clients'
// contract: available on Linux and macOS, proxied servers, the shared
// options, and a refusal that says how to get an owned desktop.
func TestDefinition(t *testing.T) {
	desktoptest.CheckDefinition(t, Definition(), true)
}
