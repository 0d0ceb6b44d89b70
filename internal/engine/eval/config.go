package eval

import (
	"encoding/json"
	"fmt"
	"time"
)

// Defaults that Load fills in when the config leaves a field out.
const (
	// DefaultClient is the client of a variant that names none.
	DefaultClient = "api"
	// DefaultTrials is how many trials each case gets under each variant.
	DefaultTrials = 1
	// MaxTrials is the largest trials value a config may set.
	MaxTrials = 1000
	// DefaultConcurrency is how many trials one shard runs at once.
	DefaultConcurrency = 4
	// DefaultResults is the folder runs are written to when neither the
	// config nor --results names one (relative to the working directory).
	DefaultResults = "mst-results"
)

// Config is a loaded eval config. Load fills in defaults (client, servers of
// a variant, trials, concurrency) and resolves relative paths against the
// folder of the file the config came from, so a Config needs no further
// interpretation.
type Config struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Datasets are the case files, in order; case ids are unique across them.
	Datasets []Dataset `json:"datasets"`
	// Plugins are the plugins the eval needs, by namespace.
	Plugins map[string]PluginNeed `json:"plugins,omitempty"`
	// Servers are the MCP servers by name.
	Servers map[string]ServerConfig `json:"servers"`
	// Variants are the ways to answer each case, by name. VariantOrder keeps
	// the order the file gives them in.
	Variants     map[string]Variant `json:"variants"`
	VariantOrder []string           `json:"-"`
	// Trials is how many times each case runs under each variant (default 1).
	Trials int `json:"trials,omitempty"`
	// Graders score every trial; a case may add its own (its expect list).
	// Each has been accepted by the Catalog's ParseGrader.
	Graders []json.RawMessage `json:"graders,omitempty"`
	Limits  Limits            `json:"limits,omitzero"`
	// Results is where runs are kept (results, or results.store, in the
	// file): a folder (default ./mst-results, relative to the working
	// directory, not the config) or a gs:// or s3:// URL.
	Results string `json:"results,omitempty"`

	// File is the path the config was read from, as given to Load; Dir is
	// its folder, absolute.
	File string `json:"-"`
	Dir  string `json:"-"`
	// Hash is the SHA-256 of the file's bytes, hex.
	Hash string `json:"-"`
}

// Dataset is one case file, or the cases of a dataset source a plugin
// adds: Path or Source is set, never both.
type Dataset struct {
	// Path is the file (.jsonl, .json, .yaml, .yml or .csv), absolute.
	Path string `json:"path,omitempty"`
	// Source is a dataset source's full name (acme/dataset/sqlite), and
	// Options its options.
	Source  string          `json:"source,omitempty"`
	Options json.RawMessage `json:"options,omitempty"`
}

// PluginNeed is a plugin an eval needs (plugins.NAMESPACE in the file).
type PluginNeed struct {
	// Version, when set, is the version the eval needs.
	Version string `json:"version,omitempty"`
	// From says where to get the plugin (a Go module path, or a page).
	From string `json:"from,omitempty"`
}

// ServerConfig declares one MCP server: either Command (stdio) or URL
// (streamable HTTP), never both.
type ServerConfig struct {
	// Command is the program of a stdio server. A relative command with a
	// slash in it ("./bin/weather") has been made absolute against the
	// config's folder; a bare name ("npx") is looked up on PATH.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Cwd is the working folder of a stdio server, absolute when set.
	Cwd string `json:"cwd,omitempty"`
	// URL is the http:// or https:// endpoint of a streamable-HTTP server.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// OAuth, when set, makes the server a connector server: its access
	// tokens come from the grant `mst auth` stored.
	OAuth *OAuth `json:"oauth,omitempty"`
	// StartupTimeout bounds connecting and listing tools; zero means the
	// servers package's default.
	StartupTimeout Duration `json:"startupTimeout,omitempty"`
	// Writes names the server's tools that change something, for dry runs.
	Writes []string `json:"writes,omitempty"`
	// Simulated gives what a dry run answers a tool's calls with.
	Simulated map[string]SimulatedResult `json:"simulated,omitempty"`
}

// OAuth is how `mst auth` authorises a connector server.
type OAuth struct {
	// Scopes to ask for; none means those the server's metadata names.
	Scopes []string `json:"scopes,omitempty"`
	// ClientID is a client registered beforehand; "" registers one
	// dynamically.
	ClientID string `json:"clientId,omitempty"`
	// ClientSecret is a ${secret:NAME} reference to the preregistered
	// client's secret, "" for a public client.
	ClientSecret string `json:"clientSecret,omitempty"`
}

// SimulatedResult is the config form of servers.SimulatedResult.
type SimulatedResult struct {
	Text    string `json:"text"`
	IsError bool   `json:"isError,omitempty"`
}

// Fault is the config form of servers.Fault.
type Fault struct {
	Kind       string   `json:"kind"`
	Rate       *float64 `json:"rate,omitempty"`
	Tools      []string `json:"tools,omitempty"`
	AfterCalls int      `json:"afterCalls,omitempty"`
	Delay      Duration `json:"delay,omitempty"`
	Message    string   `json:"message,omitempty"`
}

// Variant is one way to answer a case.
type Variant struct {
	Description string `json:"description,omitempty"`
	// Client names the client (default "api").
	Client string `json:"client"`
	// Model is "offline" or "<provider>/<model>" (anthropic/…, openai/…, google/…).
	Model string `json:"model"`
	// Servers names the servers the variant uses. Load fills in every
	// declared server, sorted, when the config lists none.
	Servers []string `json:"servers,omitempty"`
	// ClientOptions are the options as written, already checked against the
	// client's own options schema. Defaults are not filled in.
	ClientOptions json.RawMessage `json:"clientOptions,omitempty"`
	// Tools rewrites tool metadata: server name → tool name → override.
	// Every server named here is one the variant uses.
	Tools map[string]map[string]ToolOverride `json:"tools,omitempty"`
	// DryRun is "off" (or empty), "declared" or "annotated".
	DryRun string `json:"dryRun,omitempty"`
	// Faults are the faults injected per server name.
	Faults map[string][]Fault `json:"faults,omitempty"`
}

// ToolOverride is the config form of servers.ToolOverride.
type ToolOverride struct {
	Name        string            `json:"name,omitempty"`
	Title       *string           `json:"title,omitempty"`
	Description *string           `json:"description,omitempty"`
	Parameters  map[string]string `json:"parameters,omitempty"`
	Hidden      bool              `json:"hidden,omitempty"`
}

// Limits hold how much runs at once.
type Limits struct {
	// Concurrency is how many trials run at once in one shard (default 4).
	Concurrency int `json:"concurrency,omitempty"`
	// Providers caps trials in flight per model provider across all shards
	// ("anthropic": 2); keys are the providers the Catalog names.
	Providers map[string]int `json:"providers,omitempty"`
	// Servers caps trials in flight per server across all shards; keys are
	// declared servers.
	Servers map[string]int `json:"servers,omitempty"`
	// ServerCalls caps tool calls in flight per server across all shards,
	// counted by MST's proxy as each call reaches the server; keys are
	// declared servers.
	ServerCalls map[string]int `json:"serverCalls,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "30s" or "1m30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("reading duration: %w", err)
	}
	*d = Duration(v)
	return nil
}
