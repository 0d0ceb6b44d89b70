// Package cowork defines the cowork client: Claude Desktop in Cowork mode.
//
// On macOS the client drives the app with Computer Use, planned by
// computerUseModel; on Linux with the accessibility (AT-SPI) automation,
// which has no planner. The machine that runs the trials decides which; it
// is not an option. One session runs a whole batch in one app, one trial at
// a time, so a case cannot change the model or the options.
//
// On Linux it needs an owned desktop (MST_DESKTOP_OWNED=1, as the desktop
// worker image sets): MST writes the app's managed settings for each
// variant, restarts the app, and puts the settings back at the end. The
// app's window and control names are in linux.go, replaceable on a machine
// with MST_DESKTOP_PROFILE (package desktop).
package cowork

import (
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/desktop"
)

// Name is the client's name in eval configs.
const Name = "cowork"

// app is how package desktop drives it.
var app = desktop.App{Client: Name, Product: "Claude Desktop", Linux: linuxProfile}

// Definition is the cowork client's definition.
func Definition() *client.Definition {
	return desktop.Define(app, &client.Definition{
		Name:        Name,
		Description: "Claude Desktop in Cowork mode.",
		Requirements: client.Requirements{
			OS: []string{"darwin", "linux"},
			Credentials: []string{
				"a signed-in Claude Desktop with Cowork",
				"ANTHROPIC_API_KEY on macOS (the Computer Use planner)",
			},
			Setup: "macOS: install Claude Desktop from https://claude.ai/download, sign in and turn on Cowork. Linux: add the app to the desktop worker image (`mst runner setup docker --desktop`, docs/desktop.md)",
		},
		ModelProviders: []string{"anthropic"},
		Options:        client.DesktopOptions("900s"),
		Timeout:        900 * time.Second,
		HostExclusive:  true,
	})
}
