// Package geminicli is the gemini-cli client: the Gemini CLI, run once per
// trial in headless mode (gemini --output-format stream-json, the prompt
// on its standard input), with the variant's servers as its only MCP
// servers and the variant's model behind a Gemini API provider.
//
// A session owns a folder under the session's work folder. Each trial gets
// a home and a working folder of its own in it; the home's
// .gemini/settings.json, which also stands in for the machine's system
// settings, holds the MCP servers, allows none of the CLI's own tools but
// those builtinTools names, and turns off telemetry, usage statistics and
// auto-update. The API key and the servers' env and header values reach
// the CLI only through its environment, never a file or its command line.
// Each trial runs in its own process group and reads the CLI's event
// stream into the transcript; calls of the CLI's own tools are recorded
// under client.BuiltinServer. The CLI offers an MCP tool under a name of
// its own (mcp_SERVER_TOOL, with every character outside [A-Za-z0-9_.:-]
// replaced and a long name cut: toolname.Gemini), and reports calls under
// it; the client maps each back to the server's own name with the names
// the trial's proxies offer (client.Trial.Tools), so météo stays météo.
package geminicli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/cliproc"
	"github.com/mst-eval/mst/internal/provider"
)

// Name is the client's name in eval configs.
const Name = "gemini-cli"

// The gemini-cli client's defaults. The options schema states them and
// decodeOptions applies them, so the two cannot disagree.
const (
	defaultCommand = "gemini"
	// defaultRequestMaxAttempts is lower than the CLI's own 10: its backoff
	// starts at 5 s and doubles to 30 s, so ten attempts at a failing
	// provider would take most of a trial's timeout; three take about 15 s.
	defaultRequestMaxAttempts = 3
	// maxRequestAttempts is the CLI's own ceiling for general.maxAttempts.
	maxRequestAttempts = 10
)

// Definition is the gemini-cli client's definition.
func Definition() *client.Definition {
	return &client.Definition{
		Name:        Name,
		Description: "The Gemini CLI, in headless mode, with the variant's servers as its only MCP servers.",
		Requirements: client.Requirements{
			OS:          []string{"linux", "darwin", "windows"},
			Credentials: []string{"GEMINI_API_KEY"},
			Setup:       program.Setup,
		},
		Options:        optionsSchema(),
		Timeout:        300 * time.Second,
		KeyVars:        []string{"GEMINI_API_KEY"},
		ModelProviders: []string{"google"},
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

// optionsSchema returns the JSON Schema of gemini-cli's clientOptions.
//
// The default timeout is 300 s, as codex-cli's: a headless agent turn with
// several tool calls, plus the CLI's slow start (20 s and more on a loaded
// machine: Node, its bundle, and every MCP server discovered before the
// first request) and its retries with backoff, needs minutes rather than
// claude-code's 180 s.
//
// There is no reasoningEffort: the CLI has no flag or plain setting for
// the model's thinking level (only per-model generation overrides), so it
// is left out rather than half-applied.
func optionsSchema() json.RawMessage {
	return client.OptionsSchema(client.SharedOptions{
		Timeout:      "300s",
		MaxActions:   &client.MaxActions{Action: "tool calls, counted in the CLI's event stream", DefaultDescription: "no limit: the timeout bounds the trial"},
		BuiltinTools: builtinToolHelp(),
	},
		client.Option{
			Name:               "baseURL",
			Schema:             map[string]any{"type": "string", "format": "uri"},
			Description:        "Address of the Gemini API the CLI calls (its GOOGLE_GEMINI_BASE_URL): a gateway or a test server.",
			DefaultDescription: "Google's public Gemini API",
		},
		client.Option{
			Name:        "command",
			Schema:      map[string]any{"type": "string", "minLength": 1},
			Description: "The Gemini CLI to run: a path, or a name looked up on PATH. run.json and the transcripts record the version this program gives (its --version, asked with none of the run's keys or other variables in its environment).",
			Default:     defaultCommand,
		},
		client.Option{
			Name:        "requestMaxAttempts",
			Schema:      map[string]any{"type": "integer", "minimum": 1, "maximum": maxRequestAttempts},
			Description: "How many times the CLI tries a request to the provider (the first try and its retries, with a backoff from 5 s) before the trial ends errored (provider): its general.maxAttempts, at most 10.",
			Default:     defaultRequestMaxAttempts,
		},
	)
}

// Options are gemini-cli's options, decoded.
type Options struct {
	MaxActions         int      `json:"maxActions"`
	BaseURL            string   `json:"baseURL"`
	Command            string   `json:"command"`
	RequestMaxAttempts int      `json:"requestMaxAttempts"`
	BuiltinTools       []string `json:"builtinTools"`
}

// builtinTool is one of the CLI's own tools a variant may turn on.
type builtinTool struct {
	cli  string // the CLI's name for it, in tools.core and in its calls
	does string
}

// builtinTools are the names builtinTools takes. Every other tool of the
// CLI (its sub-agents, skills, to-do list, questions to the user, …) stays
// off. The tools run on the machine of the trial, as the CLI's user, with
// the trial's own folder as their working folder: the file tools keep to
// that folder, the shell does not.
var builtinTools = map[string]builtinTool{
	"shell":             {"run_shell_command", "runs a shell command on the machine, in the trial's folder; the command itself may reach anything the CLI's user can"},
	"read_file":         {"read_file", "reads a file in the trial's folder"},
	"list_directory":    {"list_directory", "lists a folder in the trial's folder"},
	"write_file":        {"write_file", "writes a file in the trial's folder"},
	"edit":              {"replace", "edits a file in the trial's folder"},
	"glob":              {"glob", "finds files by pattern in the trial's folder"},
	"grep":              {"grep_search", "searches file contents in the trial's folder"},
	"web_fetch":         {"web_fetch", "fetches a web page"},
	"google_web_search": {"google_web_search", "searches the web through the provider"},
}

// builtinToolHelp is builtinTools as the options schema describes them.
func builtinToolHelp() map[string]string {
	m := make(map[string]string, len(builtinTools))
	for n, b := range builtinTools {
		m[n] = b.cli + ": " + b.does
	}
	return m
}

// builtinToolNames are the names builtinTools takes, sorted.
func builtinToolNames() []string {
	return slices.Sorted(maps.Keys(builtinTools))
}

// coreTools are the CLI's names of the built-in tools names turns on.
func coreTools(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, builtinTools[n].cli)
	}
	return out
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
	if err := provider.CheckBaseURL("clientOptions.baseURL", o.BaseURL, "the Gemini CLI", "/v1beta/models"); err != nil {
		return o, err
	}
	if o.Command == "" {
		o.Command = defaultCommand
	}
	if o.RequestMaxAttempts == 0 {
		o.RequestMaxAttempts = defaultRequestMaxAttempts
	}
	if o.RequestMaxAttempts < 1 || o.RequestMaxAttempts > maxRequestAttempts {
		return o, fmt.Errorf("clientOptions.requestMaxAttempts: %d is outside 1 to %d", o.RequestMaxAttempts, maxRequestAttempts)
	}
	for i, n := range o.BuiltinTools {
		if _, ok := builtinTools[n]; !ok {
			return o, fmt.Errorf("clientOptions.builtinTools[%d]: gemini-cli has no built-in tool %q; use one of %s", i, n, strings.Join(builtinToolNames(), ", "))
		}
	}
	return o, nil
}

// modelName is the model as the CLI takes it: the reference without a
// leading google/ or gemini/.
func modelName(ref string) string {
	for _, p := range []string{"google/", "gemini/"} {
		if m, ok := strings.CutPrefix(ref, p); ok {
			return m
		}
	}
	return ref
}

// program is the Gemini CLI, as the client's errors name it.
var program = cliproc.Program{Client: Name, What: "the Gemini CLI", Setup: "npm install -g @google/gemini-cli", Command: command}

// command is the program clientOptions name.
func command(options json.RawMessage) (string, error) {
	o, err := decodeOptions(options)
	return o.Command, err
}

// Open prepares a session: it finds the gemini command (clientOptions
// command), writes the settings every trial's home gets, and reads the
// CLI's version.
func Open(ctx context.Context, p client.OpenParams) (client.Session, error) {
	return cliproc.Open(ctx, p, program, open)
}

// open is Open with the gemini command given; tests pass the peers' copy.
func open(ctx context.Context, p client.OpenParams, bin string) (*session, error) {
	opts, err := decodeOptions(p.Options)
	if err != nil {
		return nil, err
	}
	if err := program.RefuseToolOverrides(p.Servers); err != nil && !p.Proxied {
		return nil, err
	}
	if p.Env["GEMINI_API_KEY"] == "" {
		return nil, errors.New("gemini-cli needs an API key: set GEMINI_API_KEY in the environment or the secrets file")
	}
	model := modelName(p.Model)
	if model == "" {
		return nil, errors.New("gemini-cli needs a model (google/MODEL, gemini/MODEL or the model's name)")
	}
	settings, err := settingsJSON(p.Servers, opts.RequestMaxAttempts, coreTools(opts.BuiltinTools))
	if err != nil {
		return nil, fmt.Errorf("gemini-cli: %w", err)
	}
	dir, err := cliproc.SessionDir(p.WorkDir, Name)
	if err != nil {
		return nil, err
	}
	s := &session{params: p, opts: opts, bin: bin, dir: dir, model: model, settings: settings, namer: newToolNamer(p.Servers)}
	v, err := program.VersionOf(ctx, bin)
	if err != nil {
		return s, err
	}
	s.version, s.infos = v, cliproc.ServerInfos(p.Servers)
	return s, nil
}
