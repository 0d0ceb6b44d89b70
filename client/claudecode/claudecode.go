// Package claudecode defines the claude-code client: the Claude Code CLI,
// run once per trial in print mode with the variant's MCP servers and model.
//
// This build defines the client (its requirements and options, so configs
// that name it validate and mst clients lists it) but cannot run it yet:
// Available refuses it on every OS, and the eval loader checks Available
// before it opens anything.
package claudecode

import (
	"encoding/json"

	"github.com/mst-eval/mst/client"
)

// Name is the client's name in eval configs.
const Name = "claude-code"

// Definition is the claude-code client's definition.
func Definition() *client.Definition {
	return client.NotYetBuilt(&client.Definition{
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
	}, client.CLINotBuilt(Name))
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
