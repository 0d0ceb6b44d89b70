package api

import (
	"fmt"
	"strings"

	"github.com/mst-eval/mst/provider"
	"github.com/mst-eval/mst/provider/anthropic"
	"github.com/mst-eval/mst/provider/offline"
	"github.com/mst-eval/mst/provider/openai"
)

// Providers lists the model providers the api client knows, as the prefix of
// a model reference ("anthropic/claude-sonnet-4-5").
var Providers = []string{"anthropic", "openai", "offline"}

// ProviderOf returns the provider part of a model reference.
func ProviderOf(model string) string {
	p, _, _ := strings.Cut(model, "/")
	return p
}

// modelName returns the model part of a reference, as the provider's API
// knows it.
func modelName(model string) string {
	if p, m, ok := strings.Cut(model, "/"); ok && p != "offline" {
		return m
	}
	return model
}

func newProvider(model string, o Options, env map[string]string) (provider.Provider, error) {
	opts := provider.Options{BaseURL: o.BaseURL, API: o.API, MaxRetries: -1}
	if o.MaxRetries != nil {
		opts.MaxRetries = *o.MaxRetries
	}
	key := func(def string) string {
		if o.APIKeyEnv != "" {
			def = o.APIKeyEnv
		}
		return env[def]
	}
	switch p := ProviderOf(model); p {
	case "offline":
		return offline.New(model)
	case "anthropic":
		opts.APIKey = key("ANTHROPIC_API_KEY")
		if opts.APIKey == "" {
			return nil, fmt.Errorf("model %s needs an Anthropic API key: set ANTHROPIC_API_KEY (or the variable clientOptions.apiKeyEnv names)", model)
		}
		return anthropic.New(modelName(model), opts)
	case "openai":
		opts.APIKey = key("OPENAI_API_KEY")
		if opts.APIKey == "" && opts.BaseURL == "" {
			return nil, fmt.Errorf("model %s needs an OpenAI API key: set OPENAI_API_KEY (or the variable clientOptions.apiKeyEnv names)", model)
		}
		if opts.APIKey == "" {
			opts.APIKey = "none" // OpenAI-compatible local servers often need no key
		}
		return openai.New(modelName(model), opts)
	default:
		return nil, fmt.Errorf("model %q: unknown provider %q (known: %s; write offline or provider/model, e.g. anthropic/claude-sonnet-4-5)", model, p, strings.Join(Providers, ", "))
	}
}
