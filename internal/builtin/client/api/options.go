package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/provider/anthropic"
	"github.com/mst-eval/mst/internal/provider"
)

// The api client's defaults. The options schema states them and
// decodeOptions applies them, so the two cannot disagree.
const (
	defaultMaxActions = 20
	defaultMaxTokens  = 4096
	defaultMaxRetries = 2
	// defaultTimeout bounds a trial whose provider or tool call never
	// answers: 20 tool calls at a slow model's pace fit well inside it.
	// The schema states it as "300s".
	defaultTimeout = 300 * time.Second
)

// optionsSchema builds the api client's options schema: the shared timeout,
// maxActions and reasoningEffort (api drives no app, so it takes no
// appVersion), then its own options. The default of apiKeyEnv names the key
// variables of providers.
func optionsSchema(providers *provider.Registry) json.RawMessage {
	return client.OptionsSchema(client.SharedOptions{
		Timeout:         "300s",
		MaxActions:      &client.MaxActions{Action: "tool calls", Default: defaultMaxActions},
		ReasoningEffort: &client.ReasoningEffort{DefaultDescription: "the provider's default"},
	},
		client.Option{
			Name:               "baseURL",
			Schema:             map[string]any{"type": "string", "format": "uri"},
			Description:        "The provider's API address: an OpenAI-compatible server (Ollama: http://localhost:11434/v1, vLLM), a gateway, or a test server. For openai/ models it ends where the API's paths begin, usually in /v1 (/responses or /chat/completions is appended); for anthropic/ models it has no /v1 (/v1/messages is appended). A value that already ends in part of the appended path is refused.",
			DefaultDescription: "the provider's public API",
		},
		client.Option{
			Name:        "api",
			Schema:      map[string]any{"type": "string", "enum": []string{"responses", "chat"}},
			Description: "OpenAI wire format: the Responses API or Chat Completions (most OpenAI-compatible servers speak chat).",
			Default:     "responses",
		},
		client.Option{
			Name:               client.OptionAPIKeyEnv,
			Schema:             map[string]any{"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
			Description:        "Name of the environment variable (or secrets-file key) holding the API key.",
			DefaultDescription: keyVarsByProvider(providers),
		},
		client.Option{
			Name:               "system",
			Schema:             map[string]any{"type": "string"},
			Description:        "System prompt sent with every trial.",
			DefaultDescription: "none",
		},
		client.Option{
			Name:        "maxTokens",
			Schema:      map[string]any{"type": "integer", "minimum": 1},
			Description: "Most tokens the model may write per turn.",
			Default:     defaultMaxTokens,
		},
		client.Option{
			Name:        "maxRetries",
			Schema:      map[string]any{"type": "integer", "minimum": 0},
			Description: "How often a 429 or 5xx answer is retried, with backoff, before the trial ends errored (provider).",
			Default:     defaultMaxRetries,
		},
	)
}

// keyVarsByProvider describes the default of apiKeyEnv: "the model's
// provider's variable (ANTHROPIC_API_KEY for anthropic/, OPENAI_API_KEY for
// openai/)".
func keyVarsByProvider(providers *provider.Registry) string {
	var each []string
	for _, name := range provider.Buildable(providers) {
		if def, _ := providers.Lookup(name); def.KeyVar != "" {
			each = append(each, def.KeyVar+" for "+name+"/")
		}
	}
	if len(each) == 0 {
		return "none: no provider takes a key"
	}
	return "the model's provider's variable (" + strings.Join(each, ", ") + ")"
}

// Options are the api client's options, decoded.
type Options struct {
	Timeout         string `json:"timeout"`
	MaxActions      int    `json:"maxActions"`
	ReasoningEffort string `json:"reasoningEffort"`
	BaseURL         string `json:"baseURL"`
	API             string `json:"api"`
	System          string `json:"system"`
	MaxTokens       int    `json:"maxTokens"`
	MaxRetries      *int   `json:"maxRetries"`
	// apiKeyEnv is in the schema but not here: the plan lifts it out of
	// the options into OpenParams.KeyEnv.
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
		o.MaxActions = defaultMaxActions
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = defaultMaxTokens
	}
	if o.MaxRetries == nil {
		r := defaultMaxRetries
		o.MaxRetries = &r
	}
	return o, nil
}

// CheckBaseURL checks clientOptions.baseURL for model against what the
// model's provider appends to it (provider.Definition.Appends): a path
// that already ends in part of it, which would double it, is refused with
// the value to write instead. An unknown provider passes: it is reported
// where the model is checked.
func CheckBaseURL(providers *provider.Registry, model, baseURL string) error {
	if baseURL == "" {
		return nil
	}
	def, err := providers.Lookup(provider.Of(model))
	if err != nil {
		return nil
	}
	return def.CheckBaseURL("clientOptions.baseURL", baseURL)
}

// CheckOptions checks what the options schema cannot about a variant's
// options for model: today the form of baseURL (see CheckBaseURL). It is
// meant for the time the eval loads; Open runs the same check.
func CheckOptions(providers *provider.Registry, model string, raw json.RawMessage) error {
	o, err := decodeOptions(raw)
	if err != nil {
		return err
	}
	if o.ReasoningEffort != "" {
		if prov, name := provider.Split(model); prov == "anthropic" && !anthropic.SupportsThinking(name) {
			return fmt.Errorf("clientOptions.reasoningEffort: model %s has no extended thinking, so it cannot honour a reasoning effort; remove reasoningEffort or use a model that thinks (Claude 3.7 or later)", model)
		}
	}
	return CheckBaseURL(providers, model, o.BaseURL)
}
