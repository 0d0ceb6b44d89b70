// Package codexapp defines the codex-app client: the Codex surface of the ChatGPT desktop app.
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
package codexapp

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"

	"github.com/mst-eval/mst/client"
)

// Name is the client's name in eval configs.
const Name = "codex-app"

// Definition is the codex-app client's definition.
func Definition() *client.Definition {
	return &client.Definition{
		Name:        Name,
		Description: "The Codex surface of the ChatGPT desktop app.",
		Requirements: client.Requirements{
			OS: []string{"darwin", "linux"},
			Credentials: []string{
				"a signed-in ChatGPT desktop app with Codex",
				"ANTHROPIC_API_KEY on macOS (the Computer Use planner)",
			},
			Setup: "Install the ChatGPT desktop app from https://chatgpt.com/download and sign in",
		},
		Options:   optionsSchema(),
		Available: available,
		// Open is never reached: the loader checks Available first. It is
		// here because a definition needs Open or Run, and it fails the
		// same way should a caller skip that check.
		Open: func(context.Context, client.OpenParams) (client.Session, error) {
			return nil, available(runtime.GOOS)
		},
	}
}

// available says why this build cannot run codex-app on goos.
func available(goos string) error {
	switch goos {
	case "darwin":
		return errors.New(Name + " is defined but not built into this version of mst yet (it comes with the desktop clients); no machine can run it in this build")
	case "linux":
		return errors.New(Name + " is not available on linux yet: this build has no Linux desktop automation (it comes with the desktop clients); no machine can run it in this build")
	}
	return errors.New(Name + " runs only on macOS and Linux")
}

// optionsSchema returns the JSON Schema of codex-app's clientOptions.
func optionsSchema() json.RawMessage {
	return client.OptionsSchema(client.SharedOptions{
		Timeout:    "300s",
		MaxActions: &client.MaxActions{Action: "UI actions such as clicks, keystrokes and screenshots", Default: 50},
		AppVersion: true,
	},
		client.Option{
			Name:        "computerUseModel",
			Schema:      map[string]any{"type": "string", "pattern": "^anthropic/.+$", "patternErrorMessage": "must be an Anthropic model as anthropic/MODEL"},
			Description: "The model that plans Computer Use actions on macOS, as anthropic/MODEL. Linux runs the accessibility automation, which has no planner, and does not use it.",
			Default:     "anthropic/claude-sonnet-4-5",
		},
	)
}
