// Package codexcli is the codex-cli client: the Codex CLI, run once per
// trial with codex exec, with the variant's servers as its only MCP servers
// and the variant's model behind an OpenAI Responses provider.
//
// A session owns a CODEX_HOME folder under the session's work folder that
// holds config.toml (the model, the provider, which of the CLI's own tools
// are on, its sandbox); each trial adds a config layer of its own naming
// the trial's MCP servers (OpenParams.TrialServers), with every tool of
// theirs approved in advance. No secret is written: the API key, the
// servers' variables and their HTTP headers reach the CLI through its
// environment, and the config names only the variables. Each trial runs
// codex exec --json in its own process group, in a fresh folder of its own
// (the only place the CLI's shell may write, when builtinTools turns the
// shell on), and reads the CLI's event stream into the transcript; the
// CLI's own record of the thread (its rollout file) then adds the tool
// calls the stream leaves out, as errors, and the count of model calls.
// The CLI's own tool calls are recorded under client.BuiltinServer.
package codexcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/cliproc"
	"github.com/mst-eval/mst/internal/provider"
)

// Name is the client's name in eval configs.
const Name = "codex-cli"

// The codex-cli client's defaults. The options schema states them and
// decodeOptions applies them, so the two cannot disagree.
const (
	defaultCommand           = "codex"
	defaultBaseURL           = "https://api.openai.com/v1"
	defaultRequestMaxRetries = 2
	defaultStreamMaxRetries  = 2
	defaultStartupTimeout    = 30 * time.Second
)

// Definition is the codex-cli client's definition.
func Definition() *client.Definition {
	return &client.Definition{
		Name:        Name,
		Description: "The Codex CLI, run with codex exec and the variant's servers as its only MCP servers.",
		Requirements: client.Requirements{
			OS:          []string{"linux", "darwin", "windows"},
			Credentials: []string{"OPENAI_API_KEY or CODEX_API_KEY"},
			Setup:       program.Setup,
		},
		Options:        optionsSchema(),
		Timeout:        300 * time.Second,
		KeyVars:        []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
		ModelProviders: []string{"openai"},
		Concurrent:     true,
		ProxiedServers: true,
		// The CLI runs a tool call as it reports it: only the proxy can
		// keep a call past maxActions from reaching the server.
		ToolCallLimit: func(options json.RawMessage) int {
			o, _ := decodeOptions(options)
			return o.MaxActions
		},
		CaseOverrides: []string{"model", "clientOptions"},
		Version:       program.Version,
		Preflight:     program.Preflight,
		Check: func(_ string, options json.RawMessage) error {
			_, err := decodeOptions(options)
			return err
		},
		Open: Open,
	}
}

// optionsSchema returns the JSON Schema of codex-cli's clientOptions.
func optionsSchema() json.RawMessage {
	return client.OptionsSchema(client.SharedOptions{
		Timeout:         "300s",
		MaxActions:      &client.MaxActions{Action: "tool calls, the CLI's own included, counted in its event stream", DefaultDescription: "no limit: the timeout bounds the trial"},
		ReasoningEffort: &client.ReasoningEffort{DefaultDescription: "the CLI's default for the model"},
		BuiltinTools:    builtinTools,
		AlwaysOn:        alwaysOnTools,
	},
		client.Option{
			Name:               "baseURL",
			Schema:             map[string]any{"type": "string", "format": "uri"},
			Description:        "Address of the OpenAI Responses API the CLI calls (its model provider's base_url): a gateway or a test server.",
			DefaultDescription: "OpenAI's public API",
		},
		client.Option{
			Name:        "command",
			Schema:      map[string]any{"type": "string", "minLength": 1},
			Description: "The Codex CLI to run: a path, or a name looked up on PATH. run.json and the transcripts record the version this program gives (its --version, asked with none of the run's keys or other variables in its environment).",
			Default:     defaultCommand,
		},
		client.Option{
			Name:        "requestMaxRetries",
			Schema:      map[string]any{"type": "integer", "minimum": 0},
			Description: "How often the CLI retries a failed request to the provider before the trial ends errored (provider): its model provider's request_max_retries.",
			Default:     defaultRequestMaxRetries,
		},
		client.Option{
			Name:        "streamMaxRetries",
			Schema:      map[string]any{"type": "integer", "minimum": 0},
			Description: "How often the CLI reconnects a dropped answer stream before the trial ends errored (provider): its model provider's stream_max_retries.",
			Default:     defaultStreamMaxRetries,
		},
	)
}

// Options are codex-cli's options, decoded.
type Options struct {
	MaxActions      int    `json:"maxActions"`
	ReasoningEffort string `json:"reasoningEffort"`
	// BuiltinTools are the CLI's own tools turned on (see builtinTools).
	BuiltinTools      []string `json:"builtinTools"`
	BaseURL           string   `json:"baseURL"`
	Command           string   `json:"command"`
	RequestMaxRetries *int     `json:"requestMaxRetries"`
	StreamMaxRetries  *int     `json:"streamMaxRetries"`
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
	for i, n := range o.BuiltinTools {
		if _, ok := builtinTools[n]; !ok {
			return o, fmt.Errorf("clientOptions.builtinTools[%d]: codex-cli has no built-in tool %q; it knows %s", i, n, strings.Join(sortedKeys(builtinTools), ", "))
		}
	}
	if err := provider.CheckBaseURL("clientOptions.baseURL", o.BaseURL, "the Codex CLI", "/responses"); err != nil {
		return o, err
	}
	if o.BaseURL == "" {
		o.BaseURL = defaultBaseURL
	}
	if o.Command == "" {
		o.Command = defaultCommand
	}
	if o.RequestMaxRetries == nil {
		r := defaultRequestMaxRetries
		o.RequestMaxRetries = &r
	}
	if o.StreamMaxRetries == nil {
		r := defaultStreamMaxRetries
		o.StreamMaxRetries = &r
	}
	return o, nil
}

// program is the Codex CLI, as the client's errors name it.
var program = cliproc.Program{Client: Name, What: "the Codex CLI", Setup: "npm install -g @openai/codex", Command: command, VersionPrefix: "codex-cli"}

// command is the program clientOptions name.
func command(options json.RawMessage) (string, error) {
	o, err := decodeOptions(options)
	return o.Command, err
}

// Open prepares a session: it finds the codex command (clientOptions
// command), writes CODEX_HOME/config.toml under p.WorkDir (everything but
// the MCP servers, which each trial layers on top), checks that the
// servers can be handed to the CLI without writing their secrets, and
// reads the CLI's version.
func Open(ctx context.Context, p client.OpenParams) (client.Session, error) {
	return cliproc.Open(ctx, p, program, open)
}

// open is Open with the codex command given; tests pass the peers' copy.
func open(ctx context.Context, p client.OpenParams, bin string) (*session, error) {
	opts, err := decodeOptions(p.Options)
	if err != nil {
		return nil, err
	}
	if err := program.RefuseToolOverrides(p.Servers); err != nil && !p.Proxied {
		return nil, err
	}
	keyEnv := ""
	for _, k := range []string{"OPENAI_API_KEY", "CODEX_API_KEY"} {
		if p.Env[k] != "" {
			keyEnv = k
			break
		}
	}
	if keyEnv == "" {
		return nil, errors.New("codex-cli needs an API key: set OPENAI_API_KEY (or CODEX_API_KEY) in the environment or the secrets file")
	}
	model := strings.TrimPrefix(p.Model, "openai/")
	if model == "" {
		return nil, errors.New("codex-cli needs a model (openai/MODEL or the model's name)")
	}
	dir, err := cliproc.SessionDir(p.WorkDir, Name)
	if err != nil {
		return nil, err
	}
	s := &session{params: p, opts: opts, bin: bin, dir: dir, home: filepath.Join(dir, "codex-home"), keyEnv: keyEnv}
	if err := os.Mkdir(s.home, 0o700); err != nil {
		return s, fmt.Errorf("codex-cli: creating CODEX_HOME: %w", err)
	}
	if _, _, err := serversTOML(p.Servers, s.baseEnv()); err != nil {
		return s, fmt.Errorf("codex-cli: %w", err)
	}
	cfg := configTOML(config{
		model: model, baseURL: opts.BaseURL, keyEnv: keyEnv,
		requestMaxRetries: *opts.RequestMaxRetries, streamMaxRetries: *opts.StreamMaxRetries,
		reasoningEffort: opts.ReasoningEffort, builtins: opts.BuiltinTools,
	})
	if err := os.WriteFile(filepath.Join(s.home, "config.toml"), []byte(cfg), 0o600); err != nil {
		return s, fmt.Errorf("codex-cli: writing config.toml: %w", err)
	}
	v, err := program.VersionOf(ctx, bin)
	if err != nil {
		return s, err
	}
	s.version, s.infos = v, cliproc.ServerInfos(p.Servers)
	return s, nil
}
