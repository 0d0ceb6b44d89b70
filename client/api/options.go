package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// OptionsSchema is the JSON Schema of the api client's clientOptions.
const OptionsSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "timeout": {"type": "string", "description": "Longest time from the prompt to the transcript, as a Go duration (\"90s\", \"5m\"). Unset means no limit.", "x-defaultDescription": "none"},
    "maxActions": {"type": "integer", "minimum": 1, "default": 20, "description": "Most tool calls the model may make in one trial; when it asks for more, the trial ends as no-answer."},
    "reasoningEffort": {"type": "string", "enum": ["minimal", "low", "medium", "high"], "description": "Reasoning effort passed to models that support it.", "x-defaultDescription": "the provider's default"},
    "appVersion": {"type": "string", "description": "Not used by api (it has no app); accepted so shared configs validate.", "x-defaultDescription": "none"},
    "baseURL": {"type": "string", "format": "uri", "description": "The provider's API address: an OpenAI-compatible server (Ollama: http://localhost:11434/v1, vLLM), a gateway, or a test server.", "x-defaultDescription": "the provider's public API"},
    "api": {"type": "string", "enum": ["responses", "chat"], "default": "responses", "description": "OpenAI wire format: the Responses API or Chat Completions (most OpenAI-compatible servers speak chat)."},
    "apiKeyEnv": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "description": "Name of the environment variable (or secrets-file key) holding the API key.", "x-defaultDescription": "ANTHROPIC_API_KEY or OPENAI_API_KEY, by provider"},
    "system": {"type": "string", "description": "System prompt sent with every trial.", "x-defaultDescription": "none"},
    "maxTokens": {"type": "integer", "minimum": 1, "default": 4096, "description": "Most tokens the model may write per turn."},
    "maxRetries": {"type": "integer", "minimum": 0, "default": 2, "description": "How often a 429 or 5xx answer is retried, with backoff, before the trial ends errored (provider)."}
  }
}`

// Options are the api client's options, decoded.
type Options struct {
	Timeout         string `json:"timeout"`
	MaxActions      int    `json:"maxActions"`
	ReasoningEffort string `json:"reasoningEffort"`
	AppVersion      string `json:"appVersion"`
	BaseURL         string `json:"baseURL"`
	API             string `json:"api"`
	APIKeyEnv       string `json:"apiKeyEnv"`
	System          string `json:"system"`
	MaxTokens       int    `json:"maxTokens"`
	MaxRetries      *int   `json:"maxRetries"`
}

// decodeOptions reads raw options (already validated against the schema)
// and fills in defaults.
func decodeOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &o); err != nil {
			return o, fmt.Errorf("clientOptions: %w", err)
		}
	}
	if o.Timeout != "" {
		if _, err := time.ParseDuration(o.Timeout); err != nil {
			return o, fmt.Errorf("clientOptions.timeout: %q is not a duration (write 90s or 5m)", o.Timeout)
		}
	}
	if o.MaxActions == 0 {
		o.MaxActions = 20
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = 4096
	}
	return o, nil
}
