// Package chatgpt defines the chatgpt client: the ChatGPT desktop app.
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
package chatgpt

import (
	"time"

	"github.com/mst-eval/mst/client"
)

// Name is the client's name in eval configs.
const Name = "chatgpt"

// Definition is the chatgpt client's definition.
func Definition() *client.Definition {
	return client.NotYetBuilt(&client.Definition{
		Name:        Name,
		Description: "The ChatGPT desktop app.",
		Requirements: client.Requirements{
			OS: []string{"darwin", "linux"},
			Credentials: []string{
				"a signed-in ChatGPT desktop app",
				"ANTHROPIC_API_KEY on macOS (the Computer Use planner)",
			},
			Setup: "Install the ChatGPT desktop app from https://chatgpt.com/download and sign in",
		},
		ModelProviders: []string{"openai"},
		Options:        client.DesktopOptions("300s"),
		Timeout:        300 * time.Second,
	}, client.DesktopNotBuilt(Name))
}
