// Package eval is the eval config: its model, loading from YAML or JSON,
// the JSON Schema that `mst schema` prints, and strict validation whose
// errors name the file, the path and the fix.
package eval

import (
	"encoding/json"
	"time"
)

// Config is a loaded eval config. Relative paths in it are resolved against
// the folder of the file it came from.
type Config struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Datasets are the case files, in order; case ids are unique across them.
	Datasets []Dataset `json:"datasets"`
	// Servers are the MCP servers by name.
	Servers map[string]ServerConfig `json:"servers"`
	// Variants are the ways to answer each case, by name. VariantOrder keeps
	// the order the file gives them in.
	Variants     map[string]Variant `json:"variants"`
	VariantOrder []string           `json:"-"`
	// Trials is how many times each case runs under each variant (default 1).
	Trials int `json:"trials,omitempty"`
	// Graders score every trial; a case may add its own (its expect list).
	Graders []json.RawMessage `json:"graders,omitempty"`
	Limits  Limits            `json:"limits,omitzero"`
	// Results is the folder runs are written to (default ./mst-results,
	// relative to the working directory, not the config).
	Results string `json:"results,omitempty"`

	// File is the path the config was read from; Dir its folder.
	File string `json:"-"`
	Dir  string `json:"-"`
	// Hash is the SHA-256 of the file's bytes, hex.
	Hash string `json:"-"`
}

// Dataset is one case file.
type Dataset struct {
	// Path is the file (.jsonl, .json, .yaml, .yml or .csv), resolved.
	Path string `json:"path"`
}

// ServerConfig declares one MCP server: either Command (stdio) or URL
// (streamable HTTP).
type ServerConfig struct {
	Command        string            `json:"command,omitempty"`
	Args           []string          `json:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	URL            string            `json:"url,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	StartupTimeout Duration          `json:"startupTimeout,omitempty"`
}

// Variant is one way to answer a case.
type Variant struct {
	Description string `json:"description,omitempty"`
	// Client names the client (default "api").
	Client string `json:"client"`
	// Model is "offline" or "<provider>/<model>" (anthropic/…, openai/…).
	Model string `json:"model"`
	// Servers names the servers the variant uses; empty means all.
	Servers []string `json:"servers,omitempty"`
	// ClientOptions are checked against the client's own options schema.
	ClientOptions json.RawMessage `json:"clientOptions,omitempty"`
	// Tools rewrites tool metadata: server name → tool name → override.
	Tools map[string]map[string]ToolOverride `json:"tools,omitempty"`
}

// ToolOverride is the config form of servers.ToolOverride.
type ToolOverride struct {
	Description *string `json:"description,omitempty"`
	Hidden      bool    `json:"hidden,omitempty"`
}

// Limits hold how much runs at once.
type Limits struct {
	// Concurrency is how many trials run at once in one shard (default 4).
	Concurrency int `json:"concurrency,omitempty"`
	// Providers caps trials in flight per model provider across all shards
	// ("anthropic": 2).
	Providers map[string]int `json:"providers,omitempty"`
	// Servers caps trials in flight per server across all shards.
	Servers map[string]int `json:"servers,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
