// Package codexcli defines the codex-cli client: the Codex CLI, run once per
// trial with codex exec, the variant's MCP servers and model.
//
// This build defines the client (its requirements and options, so configs
// that name it validate and mst clients lists it) but cannot run it yet:
// Available refuses it on every OS, and the eval loader checks Available
// before it opens anything.
package codexcli

import (
	"encoding/json"

	"github.com/mst-eval/mst/client"
)

// Name is the client's name in eval configs.
const Name = "codex-cli"

// Definition is the codex-cli client's definition.
func Definition() *client.Definition {
	return client.NotYetBuilt(&client.Definition{
		Name:        Name,
		Description: "The Codex CLI, run with codex exec and the variant's servers as its only MCP servers.",
		Requirements: client.Requirements{
			OS:          []string{"linux", "darwin", "windows"},
			Credentials: []string{"OPENAI_API_KEY or CODEX_API_KEY"},
			Setup:       "npm install -g @openai/codex",
		},
		Options:       optionsSchema(),
		Concurrent:    true,
		CaseOverrides: []string{"model", "clientOptions"},
	}, client.CLINotBuilt(Name))
}

// optionsSchema returns the JSON Schema of codex-cli's clientOptions.
func optionsSchema() json.RawMessage {
	return client.OptionsSchema(client.SharedOptions{
		Timeout:         "300s",
		MaxActions:      &client.MaxActions{Action: "tool calls, counted in the CLI's event stream", DefaultDescription: "no limit: the timeout bounds the trial"},
		ReasoningEffort: &client.ReasoningEffort{DefaultDescription: "the CLI's default for the model"},
	},
		client.Option{
			Name:               "baseURL",
			Schema:             map[string]any{"type": "string", "format": "uri"},
			Description:        "Address of the OpenAI Responses API the CLI calls (its model provider's base_url): a gateway or a test server.",
			DefaultDescription: "OpenAI's public API",
		},
	)
}
