package codexapp

import (
	"testing"

	"github.com/mst-eval/mst/client/clienttest"
)

// TestNotBuilt checks that this build refuses the client clearly and
// safely.
func TestNotBuilt(t *testing.T) {
	t.Parallel()
	clienttest.RunNotBuilt(t, Definition())
}
