package desktop

import (
	"context"
	"fmt"

	"github.com/mst-eval/mst/client"
)

// openMacOS opens a session driven by Computer Use.
func openMacOS(ctx context.Context, app App, p client.OpenParams, opts options) (client.Session, error) {
	return nil, fmt.Errorf("%s on macOS: the Computer Use automation is not wired into this build yet", app.Client)
}
