// Package claudecode is the claude-code client: the Claude Code CLI, run
// once per trial in print mode (claude -p … --output-format stream-json)
// with the variant's MCP servers as its only MCP servers and the variant's
// model.
//
// A session owns a private folder under OpenParams.WorkDir, removed at
// Close: the MCP config file naming the variant's servers, and per trial a
// HOME with its CLAUDE_CONFIG_DIR and the folder the CLI runs in (trials
// that run at once do not share the CLI's state files). Every trial is its
// own process (so trials may run at once), started in its own process
// group with a minimal
// environment: PATH, HOME, CLAUDE_CONFIG_DIR, ANTHROPIC_API_KEY from
// OpenParams.Env (never from argv; the run's other secrets are left out),
// ANTHROPIC_BASE_URL from baseURL (the API's address without /v1: the CLI
// appends /v1/messages, and a value that would double it is refused),
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, ENABLE_TOOL_SEARCH=false and
// CLAUDE_CODE_MAX_RETRIES. The CLI runs under internal/builtin/client/cliproc: when the
// trial's context ends its whole tree gets SIGTERM, then SIGKILL 3 s later,
// and Run returns what the CLI had written, errored (MST says whether the
// trial timed out or was cancelled).
//
// The CLI's own tools (Bash, Read, Edit, Write, WebFetch, …) are off: the
// model is offered only the servers' tools (--tools ""), and a call of a
// tool that is off comes back to it refused, nothing run. builtinTools
// turns a named set on; those run without a prompt, in the trial's own
// folder (Bash included: a working directory, not a sandbox).
//
// When the worker gives a trial its own servers (client.Trial.Servers: its
// MCP proxies, with the headers they want), the trial gets an MCP config
// of its own, in its folder, naming those; otherwise it uses the session's.
//
// The CLI's stream-json lines become the trial's result: messages, tool
// calls (mcp__SERVER__TOOL mapped back to the server's and the tool's own
// names; the CLI's own tools under client.BuiltinServer, a call the CLI
// refused with its reason in Error), the answer, usage and cost, and an
// outcome. The CLI reports an API failure with subtype "success", so the
// outcome reads is_error and terminal_reason: an API error is errored (provider), max turns is
// no-answer, a server whose status in the init line is not "connected" is
// errored (server), and an exit without a result line is errored (client)
// with the tail of the CLI's stderr.
//
// The CLI takes tool descriptions from the servers it reaches. Run by MST's
// worker, those are MST's proxies (Definition.ProxiedServers), which offer
// the variant's view of the tools; opened without them, a session refuses
// a variant that rewrites or hides tools.
package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/cliproc"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// Name is the client's name in eval configs.
const Name = "claude-code"

// defaultMaxRetries is CLAUDE_CODE_MAX_RETRIES unless maxRetries says
// otherwise.
const defaultMaxRetries = 2

// defaultCommand is the CLI's name on PATH.
const defaultCommand = "claude"

// Definition is the claude-code client's definition.
func Definition() *client.Definition {
	return &client.Definition{
		Name:        Name,
		Description: "The Claude Code CLI, run in print mode with the variant's servers as its only MCP servers.",
		Requirements: client.Requirements{
			OS:          []string{"linux", "darwin", "windows"},
			Credentials: []string{"ANTHROPIC_API_KEY"},
			Setup:       "npm install -g @anthropic-ai/claude-code",
		},
		Options:        optionsSchema(),
		Timeout:        180 * time.Second,
		KeyVars:        []string{"ANTHROPIC_API_KEY"},
		ModelProviders: []string{"anthropic"},
		Concurrent:     true,
		ProxiedServers: true,
		CaseOverrides:  []string{"model", "clientOptions"},
		Version:        program.Version,
		Preflight:      program.Preflight,
		Check: func(_ string, options json.RawMessage) error {
			_, err := decodeOptions(options)
			return err
		},
		Open: Open,
	}
}

// optionsSchema returns the JSON Schema of claude-code's clientOptions.
func optionsSchema() json.RawMessage {
	return client.OptionsSchema(client.SharedOptions{
		Timeout:         "180s",
		MaxActions:      &client.MaxActions{Action: "agent turns, as the CLI's --max-turns counts them", DefaultDescription: "no limit: the timeout bounds the trial"},
		ReasoningEffort: &client.ReasoningEffort{DefaultDescription: "the CLI's default"},
		BuiltinTools:    builtinTools,
	},
		client.Option{
			Name:               "baseURL",
			Schema:             map[string]any{"type": "string", "format": "uri"},
			Description:        "Address of the Anthropic Messages API the CLI calls (ANTHROPIC_BASE_URL): a gateway or a test server, without /v1 (the CLI appends /v1/messages).",
			DefaultDescription: "Anthropic's public API",
		},
		client.Option{
			Name:        "command",
			Schema:      map[string]any{"type": "string", "minLength": 1},
			Description: "The Claude Code CLI to run: a path, or a name looked up on PATH. run.json and the transcripts record the version this program gives (its --version, asked with none of the run's keys or other variables in its environment).",
			Default:     defaultCommand,
		},
		client.Option{
			Name:        "maxRetries",
			Schema:      map[string]any{"type": "integer", "minimum": 0},
			Description: "How often the CLI retries a failed API request before the trial ends errored (provider) (CLAUDE_CODE_MAX_RETRIES).",
			Default:     defaultMaxRetries,
		},
	)
}

// Options are claude-code's options, decoded.
type Options struct {
	MaxActions      int      `json:"maxActions"`
	ReasoningEffort string   `json:"reasoningEffort"`
	BuiltinTools    []string `json:"builtinTools"`
	BaseURL         string   `json:"baseURL"`
	Command         string   `json:"command"`
	MaxRetries      *int     `json:"maxRetries"`
}

// builtinTools are the CLI's own tools a variant may turn on with
// builtinTools, as the CLI names them (claude --tools). Every other tool of
// the CLI stays off.
var builtinTools = map[string]string{
	"Bash":         "runs shell commands in the trial's folder, with the rights of the user that runs MST: no sandbox",
	"Read":         "reads files",
	"Edit":         "edits files in place",
	"Write":        "writes files",
	"Glob":         "finds files by name pattern",
	"Grep":         "searches file contents",
	"NotebookEdit": "edits Jupyter notebooks",
	"WebFetch":     "fetches a URL",
	"WebSearch":    "searches the web through Anthropic's API",
}

func decodeOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &o); err != nil {
			return o, fmt.Errorf("clientOptions: %w", err)
		}
	}
	if o.Command == "" {
		o.Command = defaultCommand
	}
	if o.MaxRetries == nil {
		r := defaultMaxRetries
		o.MaxRetries = &r
	}
	for _, n := range o.BuiltinTools {
		if _, ok := builtinTools[n]; !ok {
			return o, fmt.Errorf("clientOptions.builtinTools: claude-code has no built-in tool %q (it has %s)", n, strings.Join(builtinToolNames(), ", "))
		}
	}
	if err := CheckBaseURL(o.BaseURL); err != nil {
		return o, err
	}
	return o, nil
}

// builtinToolNames lists the names builtinTools takes, sorted.
func builtinToolNames() []string {
	return slices.Sorted(maps.Keys(builtinTools))
}

// CheckBaseURL checks claude-code's clientOptions.baseURL. The CLI appends
// /v1/messages to ANTHROPIC_BASE_URL itself, so a value whose path already
// ends in /v1, /v1/messages or /messages is refused with the value to write
// instead. Empty is fine: Anthropic's public API.
func CheckBaseURL(baseURL string) error {
	return provider.CheckBaseURL("clientOptions.baseURL", baseURL, "the Claude Code CLI", "/v1/messages")
}

// effort maps the shared reasoningEffort onto the CLI's --effort levels.
func effort(e string) string {
	if e == "minimal" {
		return "low"
	}
	return e
}

// modelName strips the provider prefix: the CLI takes the API's own name.
func modelName(m string) string {
	return strings.TrimPrefix(m, "anthropic/")
}

// Open prepares a session: its folder, the MCP config, the CLI to run. It
// starts nothing that outlives it; each Run starts the CLI.
func Open(ctx context.Context, p client.OpenParams) (client.Session, error) {
	opts, err := decodeOptions(p.Options)
	if err != nil {
		return nil, err
	}
	if err := cliproc.RefuseToolOverrides("claude-code", p.Servers); err != nil && !p.Proxied {
		return nil, err
	}
	for _, srv := range p.Servers {
		if srv.Command == "" && srv.URL == "" {
			return nil, fmt.Errorf("server %s: neither command nor url is set", srv.Name)
		}
	}
	if strings.Contains(p.Model, "/") && !strings.HasPrefix(p.Model, "anthropic/") {
		return nil, fmt.Errorf("claude-code runs Anthropic models only; model %q is not anthropic/MODEL", p.Model)
	}
	cli, err := cliproc.Find(program.What, opts.Command, program.Setup)
	if err != nil {
		return nil, err
	}
	if p.Env["ANTHROPIC_API_KEY"] == "" {
		return nil, errors.New("claude-code needs an API key: set ANTHROPIC_API_KEY in the environment or the secrets file")
	}
	dir, err := os.MkdirTemp(p.WorkDir, "claude-code-")
	if err != nil {
		return nil, fmt.Errorf("making the session folder: %w", err)
	}
	s := &session{params: p, opts: opts, cli: cli, dir: dir, model: modelName(p.Model)}
	if err := s.prepare(ctx); err != nil {
		return s, err
	}
	return s, nil
}

type session struct {
	params client.OpenParams
	opts   Options
	cli    string
	dir    string
	model  string

	mcpConfig string
	// unset are the CLI's own variables, kept from the stdio servers it
	// starts (see serverCommand).
	unset []string
	infos []transcript.ServerInfo

	version string

	// started, when set (by tests), is told each CLI's pid, which is also
	// its process group's id.
	started func(pid int)

	mu     sync.Mutex
	closed bool
}

// prepare lays out the session folder, writes the MCP config and learns
// the servers' tools (for the transcript's server list).
func (s *session) prepare(ctx context.Context) error {
	s.mcpConfig = filepath.Join(s.dir, "mcp.json")
	// The servers get none of the CLI's own variables (see serverCommand).
	for _, kv := range s.env("") {
		k, _, _ := strings.Cut(kv, "=")
		s.unset = append(s.unset, k)
	}
	cfg, err := mcpConfig(s.params.Servers, s.unset)
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.mcpConfig, cfg, 0o600); err != nil {
		return fmt.Errorf("writing the MCP config: %w", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		v, err := program.VersionOf(ctx, s.cli)
		if err != nil && s.params.Logger != nil {
			s.params.Logger.Warn("the Claude Code CLI did not say its version; transcripts record none", "cli", s.cli, "err", err)
		}
		s.version = v
	})
	if !s.params.Proxied {
		// Behind MST's proxy the servers start per trial, and the worker
		// records what they offered.
		s.infos = describeServers(ctx, s.params.Servers, s.params)
	}
	wg.Wait()
	return nil
}

// mcpConfig is the --mcp-config file: every server of the variant, a stdio
// server started with a minimal environment of its own, without the
// variables unset of the CLI's (see serverCommand).
func mcpConfig(srvs []servers.Server, unset []string) ([]byte, error) {
	m := map[string]any{}
	for _, srv := range srvs {
		if srv.URL != "" {
			e := map[string]any{"type": "http", "url": srv.URL}
			if len(srv.Headers) > 0 {
				e["headers"] = srv.Headers
			}
			m[srv.Name] = e
			continue
		}
		cmd, args, env, err := serverCommand(srv, unset)
		if err != nil {
			return nil, err
		}
		e := map[string]any{"type": "stdio", "command": cmd, "args": args}
		if len(env) > 0 {
			e["env"] = env
		}
		m[srv.Name] = e
	}
	return json.MarshalIndent(map[string]any{"mcpServers": m}, "", "  ")
}

// serverEnvKeys are the variables of MST's own environment a stdio server
// gets, as servers.Connect gives them.
var serverEnvKeys = []string{"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "USER", "TZ", "SYSTEMROOT"}

// describeServers connects to each server once to record its tools, their
// hash and its implementation. A server that fails here is described by
// name only: the trial finds out for itself (the CLI's init line says so)
// and ends errored (server).
func describeServers(ctx context.Context, srvs []servers.Server, p client.OpenParams) []transcript.ServerInfo {
	infos := make([]transcript.ServerInfo, len(srvs))
	var wg sync.WaitGroup
	for i, srv := range srvs {
		infos[i] = transcript.ServerInfo{Name: srv.Name, Transport: srv.Transport()}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := servers.Connect(ctx, srv)
			if err != nil {
				if p.Logger != nil {
					p.Logger.Warn("claude-code: could not list a server's tools at open", "server", srv.Name, "err", err)
				}
				return
			}
			defer c.Close()
			infos[i].ToolsHash = servers.ToolsHash(c.Tools)
			infos[i].Implementation = c.Implementation
			for _, t := range c.Tools {
				infos[i].Tools = append(infos[i].Tools, t.Name)
			}
		}()
	}
	wg.Wait()
	return infos
}

// Reset has nothing to do: every trial is a fresh process with a home and
// config folder of its own, so nothing carries over.
func (s *session) Reset(context.Context) error { return nil }

// Close removes the session folder.
func (s *session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.dir == "" {
		return nil
	}
	s.closed = true
	return os.RemoveAll(s.dir)
}

// baseEnv is the minimal environment the CLI starts from: PATH and a home.
func baseEnv(home string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	for _, k := range []string{"TMPDIR", "LANG", "LC_ALL", "TZ", "SYSTEMROOT", "USERPROFILE"} {
		if v, ok := os.LookupEnv(k); ok {
			if k == "USERPROFILE" {
				v = home
			}
			env = append(env, k+"="+v)
		}
	}
	return env
}

// env is the environment of one trial's CLI, whose home is home.
func (s *session) env(home string) []string {
	env := baseEnv(home)
	// The CLI gets its key and none of the run's other secrets.
	own := cliproc.Only(s.params.Env, "ANTHROPIC_API_KEY")
	keys := make([]string, 0, len(own))
	for k := range own {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fixed := map[string]string{
		"CLAUDE_CONFIG_DIR":                        filepath.Join(home, ".claude"),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"ENABLE_TOOL_SEARCH":                       "false",
		"CLAUDE_CODE_MAX_RETRIES":                  fmt.Sprint(*s.opts.MaxRetries),
	}
	if s.opts.BaseURL != "" {
		fixed["ANTHROPIC_BASE_URL"] = s.opts.BaseURL
	}
	for _, k := range keys {
		if _, ok := fixed[k]; ok || k == "HOME" || k == "PATH" {
			continue
		}
		env = append(env, k+"="+own[k])
	}
	fk := make([]string, 0, len(fixed))
	for k := range fixed {
		fk = append(fk, k)
	}
	sort.Strings(fk)
	for _, k := range fk {
		env = append(env, k+"="+fixed[k])
	}
	return env
}

// args is the CLI's command line for one trial. It never carries a key,
// nor the prompt: in print mode with no prompt argument the CLI reads it
// from stdin (cliproc.Command.Stdin), out of other users' sight.
//
// The CLI's own tools are off unless builtinTools names them: --tools
// offers the model only those (none with ""), --allowedTools lets them and
// the servers' tools run without a prompt, --disallowedTools denies the
// other declared ones should the CLI offer them anyway, and the dontAsk
// permission mode refuses, without asking, anything not allowed, so a call
// of a tool that is off comes back to the model as a refused call.
func (s *session) args(mcpConfig string, srvs []servers.Server) []string {
	args := []string{"-p",
		"--output-format", "stream-json", "--verbose",
		"--mcp-config", mcpConfig, "--strict-mcp-config",
		"--model", s.model,
		"--permission-mode", "dontAsk",
		"--tools", strings.Join(s.opts.BuiltinTools, ","),
	}
	var allowed []string
	for _, srv := range srvs {
		// mcp__SERVER allows every tool of the server.
		allowed = append(allowed, "mcp__"+normalizeName(srv.Name))
	}
	allowed = append(allowed, s.opts.BuiltinTools...)
	if len(allowed) > 0 {
		args = append(args, "--allowedTools", strings.Join(allowed, ","))
	}
	var denied []string
	for _, n := range builtinToolNames() {
		if !slices.Contains(s.opts.BuiltinTools, n) {
			denied = append(denied, n)
		}
	}
	if len(denied) > 0 {
		args = append(args, "--disallowedTools", strings.Join(denied, ","))
	}
	if s.opts.MaxActions > 0 {
		args = append(args, "--max-turns", fmt.Sprint(s.opts.MaxActions))
	}
	if s.opts.ReasoningEffort != "" {
		args = append(args, "--effort", effort(s.opts.ReasoningEffort))
	}
	return args
}

// normalizeName is how the CLI writes a server's name inside tool names:
// characters outside [A-Za-z0-9_-] become underscores.
func normalizeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// program is the Claude Code CLI, as the client's errors name it. Its
// --version makes no request off the machine with nonessential traffic
// off.
var program = cliproc.Program{
	Client: Name, What: "the Claude Code CLI", Setup: "npm install -g @anthropic-ai/claude-code",
	Command: func(options json.RawMessage) (string, error) {
		o, err := decodeOptions(options)
		return o.Command, err
	},
	VersionEnv: []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
}
