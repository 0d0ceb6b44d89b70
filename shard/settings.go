package shard

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mst-eval/mst/dataset"
)

// settings are what one trial runs with: the variant's model, options and
// timeout, with the case's overrides applied.
type settings struct {
	model    string
	options  json.RawMessage
	timeout  time.Duration
	provider string
}

func settingsFor(v *Variant, c *dataset.Case) (settings, error) {
	s := settings{model: v.Model, options: v.Options, timeout: v.Timeout, provider: v.Provider}
	if c.Model != "" && c.Model != v.Model {
		s.model = c.Model
		if v.Provider != "" {
			s.provider = ProviderOf(c.Model)
		}
	}
	if len(c.ClientOptions) > 0 {
		b, err := MergeOptions(v.Options, c.ClientOptions)
		if err != nil {
			return s, err
		}
		s.options = b
		var over map[string]json.RawMessage
		json.Unmarshal(c.ClientOptions, &over)
		if raw, ok := over["timeout"]; ok {
			var str string
			if err := json.Unmarshal(raw, &str); err != nil {
				return s, fmt.Errorf("clientOptions.timeout: %w", err)
			}
			d, err := time.ParseDuration(str)
			if err != nil {
				return s, fmt.Errorf("clientOptions.timeout: %q is not a duration", str)
			}
			s.timeout = d
		}
	}
	return s, nil
}

// ProviderOf is the provider part of a model reference
// ("anthropic/claude-sonnet-4-5" → "anthropic"; "offline" → "offline").
func ProviderOf(model string) string {
	p, _, _ := strings.Cut(model, "/")
	return p
}

// MergeOptions lays a case's client options over a variant's: the keys of
// over replace those of base.
func MergeOptions(base, over json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	for _, raw := range []json.RawMessage{base, over} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var part map[string]json.RawMessage
		if err := json.Unmarshal(raw, &part); err != nil {
			return nil, err
		}
		for k, v := range part {
			m[k] = v
		}
	}
	return json.Marshal(m)
}
