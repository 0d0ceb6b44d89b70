// Package chatgpt defines the chatgpt client: the ChatGPT desktop app.
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
package chatgpt

import (
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/desktop"
)

// Name is the client's name in eval configs.
const Name = "chatgpt"

// app is how package desktop drives it.
var app = desktop.App{Client: Name, Product: "ChatGPT", Linux: linuxProfile, NativeInTelemetry: true}

// Definition is the chatgpt client's definition.
func Definition() *client.Definition {
	return desktop.Define(app, &client.Definition{
		Name:        Name,
		Description: "The ChatGPT desktop app.",
		Requirements: client.Requirements{
			OS: []string{"darwin", "linux"},
			Credentials: []string{
				"a signed-in ChatGPT desktop app",
				"ANTHROPIC_API_KEY on macOS (the Computer Use planner)",
			},
			Setup: "macOS: install the ChatGPT desktop app from https://chatgpt.com/download and sign in. Linux: add the app to the desktop worker image (`mst runner setup docker --desktop`, docs/desktop.md)",
		},
		ModelProviders: []string{"openai"},
		Options:        client.DesktopOptions("300s"),
		Timeout:        300 * time.Second,
	})
}
