package api

import (
	"fmt"
	"strings"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider"
)

// newProvider builds the provider of p.Model from its definition in reg,
// with the key read from p.Env: from the variable p.KeyEnv names when set,
// else from the provider's own KeyVar.
func newProvider(reg *provider.Registry, p client.OpenParams, o Options) (provider.Provider, error) {
	name, model := provider.Split(p.Model)
	def, err := reg.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w: write offline or provider/model, such as anthropic/claude-sonnet-4-5", p.Model, err)
	}
	if def.New == nil {
		return nil, fmt.Errorf("model %s: the api client runs models of %s, not %s (MST has no API implementation of it): use a client that runs %s models (mst clients)",
			p.Model, strings.Join(provider.Buildable(reg), ", "), name, name)
	}
	if err := def.CheckBaseURL("clientOptions.baseURL", o.BaseURL); err != nil {
		return nil, fmt.Errorf("model %s: %w", p.Model, err)
	}
	opts := provider.Options{BaseURL: o.BaseURL, API: o.API, MaxRetries: -1}
	if o.MaxRetries != nil {
		opts.MaxRetries = *o.MaxRetries
	}
	keyVar, how := def.KeyVar, ": set it in the environment or the secrets file, or name another variable with clientOptions.apiKeyEnv"
	if p.KeyEnv != "" {
		keyVar, how = p.KeyEnv, ", the variable clientOptions.apiKeyEnv names: set it in the environment or the secrets file"
	}
	if keyVar != "" {
		opts.APIKey = p.Env[keyVar]
	}
	if opts.APIKey == "" && def.KeyRequired(o.BaseURL) {
		if def.KeyOptionalWithBaseURL {
			how += ", or point clientOptions.baseURL at a server that needs no key"
		}
		return nil, fmt.Errorf("model %s needs an API key in %s%s", p.Model, keyVar, how)
	}
	return def.New(model, opts)
}
