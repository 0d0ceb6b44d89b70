// Package claudecode defines the claude-code client: the Claude Code CLI,
// run once per trial in print mode with the variant's MCP servers and model.
//
// This build defines the client (its requirements and options, so configs
// that name it validate and mst clients lists it) but cannot run it yet:
// Available refuses it on every OS, and the eval loader checks Available
// before it opens anything.
package claudecode

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mst-eval/mst/client"
)

// Name is the client's name in eval configs.
const Name = "claude-code"

// errNotBuilt says that this build cannot run claude-code and what to use
// instead.
var errNotBuilt = errors.New(Name + " is defined but not built into this version of mst yet (it comes with the CLI clients); use client api meanwhile")

// Definition is the claude-code client's definition.
func Definition() *client.Definition {
	return &client.Definition{
		Name:        Name,
		Description: "The Claude Code CLI, run in print mode with the variant's servers as its only MCP servers.",
		Requirements: client.Requirements{
			OS:          []string{"linux", "darwin", "windows"},
			Credentials: []string{"ANTHROPIC_API_KEY"},
			Setup:       "npm install -g @anthropic-ai/claude-code",
		},
		Options:       optionsSchema(),
		Concurrent:    true,
		CaseOverrides: []string{"model", "clientOptions"},
		Available:     func(string) error { return errNotBuilt },
		// Open is never reached: the loader checks Available first. It is
		// here because a definition needs Open or Run, and it fails the
		// same way should a caller skip that check.
		Open: func(context.Context, client.OpenParams) (client.Session, error) { return nil, errNotBuilt },
	}
}

// optionsSchema returns the JSON Schema of claude-code's clientOptions.
func optionsSchema() json.RawMessage {
	return client.OptionsSchema(client.SharedOptions{
		Timeout:         "180s",
		MaxActions:      &client.MaxActions{Action: "agent turns, as the CLI's --max-turns counts them", DefaultDescription: "no limit: the timeout bounds the trial"},
		ReasoningEffort: &client.ReasoningEffort{DefaultDescription: "the CLI's default"},
	},
		client.Option{
			Name:               "baseURL",
			Schema:             map[string]any{"type": "string", "format": "uri"},
			Description:        "Address of the Anthropic Messages API the CLI calls (ANTHROPIC_BASE_URL): a gateway or a test server.",
			DefaultDescription: "Anthropic's public API",
		},
	)
}
