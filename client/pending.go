package client

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
)

// NotYetBuilt completes a definition this build describes but cannot run:
// Available refuses it with why (the eval loader checks Available before it
// opens anything), and Open, which a definition needs and which is never
// reached, fails the same way should a caller skip that check.
func NotYetBuilt(d *Definition, why func(goos string) error) *Definition {
	d.Available = why
	d.Open = func(context.Context, OpenParams) (Session, error) { return nil, why(runtime.GOOS) }
	return d
}

// DesktopNotBuilt is why a desktop app client cannot run in this build, on
// each OS.
func DesktopNotBuilt(name string) func(goos string) error {
	return func(goos string) error {
		switch goos {
		case "darwin":
			return errors.New(name + " is defined but not built into this version of mst yet (it comes with the desktop clients); no machine can run it in this build")
		case "linux":
			return errors.New(name + " is not available on linux yet: this build has no Linux desktop automation (it comes with the desktop clients); no machine can run it in this build")
		}
		return errors.New(name + " runs only on macOS and Linux")
	}
}

// DesktopOptions is the options schema of a desktop app client: the shared
// timeout (with the app's default), maxActions over UI actions, appVersion,
// and the Computer Use planner model used on macOS.
func DesktopOptions(timeout string) json.RawMessage {
	return OptionsSchema(SharedOptions{
		Timeout:    timeout,
		MaxActions: &MaxActions{Action: "UI actions such as clicks, keystrokes and screenshots", Default: 50},
		AppVersion: true,
	},
		Option{
			Name:        "computerUseModel",
			Schema:      map[string]any{"type": "string", "pattern": "^anthropic/.+$", "patternErrorMessage": "must be an Anthropic model as anthropic/MODEL"},
			Description: "The model that plans Computer Use actions on macOS, as anthropic/MODEL. Linux runs the accessibility automation, which has no planner, and does not use it.",
			Default:     "anthropic/claude-sonnet-4-5",
		},
	)
}
