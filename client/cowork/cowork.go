// Package cowork defines the cowork client: Claude Desktop in Cowork mode.
//
// On macOS the client drives the app with Computer Use, planned by
// computerUseModel; on Linux with the accessibility (AT-SPI) automation,
// which has no planner. The machine that runs the trials decides which; it
// is not an option. One session runs a whole batch in one app, one trial at
// a time, so a case cannot change the model or the options.
//
// This build defines the client (its requirements and options, so configs
// that name it validate and mst clients lists it) but cannot run it yet:
// Available refuses it on every OS, and the eval loader checks Available
// before it opens anything.
package cowork

import (
	"time"

	"github.com/mst-eval/mst/client"
)

// Name is the client's name in eval configs.
const Name = "cowork"

// Definition is the cowork client's definition.
func Definition() *client.Definition {
	return client.NotYetBuilt(&client.Definition{
		Name:        Name,
		Description: "Claude Desktop in Cowork mode.",
		Requirements: client.Requirements{
			OS: []string{"darwin", "linux"},
			Credentials: []string{
				"a signed-in Claude Desktop with Cowork",
				"ANTHROPIC_API_KEY on macOS (the Computer Use planner)",
			},
			Setup: "Install Claude Desktop from https://claude.ai/download, sign in and turn on Cowork",
		},
		ModelProviders: []string{"anthropic"},
		Options:        client.DesktopOptions("900s"),
		Timeout:        900 * time.Second,
	}, client.DesktopNotBuilt(Name))
}
