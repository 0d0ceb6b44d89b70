// Package client is the contract every client implements: the built-in
// ones (under internal/builtin/client, registered by internal/builtin) and
// those plugins add. It holds what a client gives (Definition, Session),
// the registry of clients (Registry) and the options every client shares
// (OptionsSchema); client/clienttest is the conformance suite a client
// passes. It runs nothing itself: the worker (internal/engine/shard) opens
// the sessions and runs the trials, on whatever machine the runner gave it.
//
// A client is a product a person would name (api, claude-code, codex-cli, …).
// Its Definition says what it is, what it needs and which options it takes,
// and provides Open (a long-lived Session), Run (one trial at a time), or
// both. The worker uses Open when it is set, and wraps a run-only client
// in a one-shot session (a program plugin's clients are run-only).
//
// Lifecycle: MST validates the variant's options against Definition.Options
// when the eval loads. The worker keeps the sessions of each fixed setting
// (client, model, servers, options) apart and opens one when a trial needs
// it: a Concurrent client's trials share one session; any other client
// gets one session per trial in flight, reused by later trials. Then
// Session.Run once per trial, in any order, each answered with a Next;
// Reset when the trial asked for it (or Run returned an error, or the
// trial timed out); a session that said Stop, whose Reset failed, or that
// did not return from Run soon after its trial's context ended is closed,
// and the next trial opens a new one. The rest are closed once at the end;
// a failed Open that returned a session is closed too.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// ErrMachineSetup is wrapped by a Preflight error that already says how
// to get a machine that can run the client (the desktop clients name the
// desktop worker image), so a runner's general advice on installing a
// client's program is not added to it.
var ErrMachineSetup = errors.New("this machine cannot run the client")

// Definition describes a client and how to start it.
type Definition struct {
	// Name is the client's name in eval configs ("api").
	Name string
	// Description says in one line what the client is.
	Description string
	// Requirements list what the client needs from the machine that runs it.
	Requirements Requirements
	// Options is the JSON Schema of the client's clientOptions. It must be
	// an object schema with additionalProperties false; defaults are given
	// with "default" (literal) or "x-defaultDescription" (dynamic).
	Options json.RawMessage
	// ModelProviders lists the providers of the models the client can run
	// ("anthropic", "openai", "google", "offline"), checked against a
	// variant's model (and a case's) when the eval loads.
	ModelProviders []string
	// Timeout is the trial timeout the client's trials get when neither the
	// variant nor the case sets clientOptions.timeout; zero means none. It
	// must agree with the default of "timeout" in Options (a test checks).
	// Every built-in client has one: a trial always has a deadline.
	Timeout time.Duration
	// KeyVars names the environment variables the client reads keys from
	// whatever the model ("ANTHROPIC_API_KEY" for claude-code). The plan
	// hands exactly these, when set in MST's environment or the secrets
	// file, to the client's sessions.
	KeyVars []string
	// ProviderKeys is true when the client reads the key of its model's
	// provider, as the provider registry names it (the api client:
	// ANTHROPIC_API_KEY for anthropic/ models). clientOptions.apiKeyEnv,
	// lifted out by the plan, names another variable (OpenParams.KeyEnv),
	// and clientOptions.baseURL, when the client has it, is the provider's
	// address: the plan refuses a run whose key is required
	// (provider.Definition.KeyRequired) and set nowhere.
	ProviderKeys bool
	// Concurrent is true when one Session may run several trials at once.
	Concurrent bool
	// OneTrialPerMachine is true when a machine runs one trial of the
	// client at a time, whatever its sessions (a desktop app: one app, one
	// conversation). The worker then starts such a trial only once the
	// one before it, its diagnosis and reset included, is over: the wait
	// is setup, not the trial's time.
	OneTrialPerMachine bool
	// HostExclusive is true when only one machine at a time may run the
	// client's trials on one host (a Docker context): Claude Desktop's VM
	// service, which Cowork uses, listens on a host-wide port. A runner
	// whose machines share a host runs such shards one after another.
	HostExclusive bool
	// ProxiedServers is true when the client reaches the variant's servers
	// only through Trial.Servers. The worker then puts MST's MCP proxy in
	// front of every server for every trial (tool variants, the
	// server-side record of tool calls, dry runs, faults) and sets
	// OpenParams.Proxied. A variant that renames tools, asks for a dry run
	// or injects faults needs such a client.
	ProxiedServers bool
	// InProcessServers, with ProxiedServers, is true when the client's
	// sessions run inside the worker's process and take each trial's
	// proxies as open connections (Trial.Conns) instead of endpoints: a
	// call then reaches the proxy as a function call, with no MCP message
	// encoded or decoded between them, and meets the same policy and
	// record. A client that starts a program (a CLI) cannot.
	InProcessServers bool
	// ToolCallLimit returns, from a setting's options, the most calls of
	// the servers' tools one trial may make, for a client that can only
	// watch its program and so cannot stop a call before it reaches the
	// server (a CLI that runs a tool call as it reports it). The worker's
	// proxy answers calls past the limit with an error result, without
	// sending or recording them. Nil, or 0, means the proxy enforces none.
	ToolCallLimit func(options json.RawMessage) int
	// CaseOverrides lists what a case may change for its own trials
	// ("model", "clientOptions"). A case that sets anything else for this
	// client fails when the eval loads. A desktop client that runs a batch
	// in one app, for example, cannot take a different model per case.
	CaseOverrides []string
	// Version reports the version of the product a setting with these
	// options drives (a CLI's or an app's own), as found on this machine:
	// the program the options name (clientOptions.command), not whatever
	// else is installed. The worker asks it before its hello, for each
	// distinct setting, with heartbeats going, so it may take a while
	// (a Node CLI starts slowly on a busy machine); it must bound itself,
	// run the program with no secret in its environment, and say why it
	// has no answer. nil for clients built into MST, whose version is
	// MST's: the worker records MST's version for them, in its hello and
	// in every transcript whose Result.ClientVersion is empty.
	Version func(ctx context.Context, options json.RawMessage) (string, error)
	// Available reports whether this build can run the client on an OS
	// (a GOOS value already allowed by Requirements.OS). It is checked when
	// the eval loads, never at trial time; nil means always available.
	// The error says what is missing and what to do instead.
	Available func(goos string) error

	// Preflight checks what the client needs on the machine that runs its
	// trials, such as an installed CLI, given a variant's options. MST calls
	// it when the eval loads, before any server or client opens, when that
	// machine is this one (the local and processes runners); nil means
	// nothing to check. The error says what is missing and the setup
	// command.
	Preflight func(options json.RawMessage) error

	// Check checks a setting's model and options beyond what the options
	// schema can say (a base URL whose path the client would double, a
	// reasoning effort the model cannot honour), without looking at any
	// machine. MST calls it when the eval loads, for every runner, once
	// per variant and once per case that overrides the model or options;
	// nil means nothing to check. The error names the option and the fix.
	Check func(model string, options json.RawMessage) error

	// Open starts a session. Either Open or Run must be set.
	Open func(ctx context.Context, p OpenParams) (Session, error)
	// Run runs a single trial with no session state.
	Run func(ctx context.Context, p OpenParams, t Trial) (Result, error)
}

// Requirements say what a client needs.
type Requirements struct {
	// OS lists the operating systems (GOOS values) the client runs on.
	OS []string
	// Credentials names the environment variables the client reads for
	// keys, in words where it depends on the model ("ANTHROPIC_API_KEY for anthropic/ models").
	Credentials []string
	// Setup is the command that installs the client, if it needs one.
	Setup string
}

// OpenParams is everything a session is fixed to.
type OpenParams struct {
	// Variant names the variant this session serves.
	Variant string
	// Model is the model reference as the config gives it ("offline",
	// "anthropic/claude-sonnet-4-5").
	Model string
	// Options are the variant's clientOptions (with a case's overrides),
	// raw, already validated against Definition.Options. MST's own keys
	// (timeout, apiKeyEnv) are lifted out of them by the plan into the typed
	// fields below, and are not in Options.
	Options json.RawMessage
	// Timeout is the trial timeout MST enforces (zero: none). The worker
	// puts it on each trial's context; a client needs it only to size its
	// own waits.
	Timeout time.Duration
	// KeyEnv is the variable clientOptions.apiKeyEnv names, to read the
	// model provider's key from instead of the provider's own; "" when the
	// variant does not set one.
	KeyEnv string
	// Servers are the variant's MCP servers with their tool metadata.
	Servers []servers.Server
	// Proxied is true when every trial brings its own servers
	// (Trial.Servers: MST's proxies). Servers then are the declarations,
	// without tool metadata or secrets, for their names and order only:
	// the session must not connect to them.
	Proxied bool
	// Env holds the secrets and other environment variables the client may
	// read (keys); never the whole process environment unless MST chose so.
	Env map[string]string
	// Environment says where the trials run.
	Environment transcript.Environment
	// Logger receives the client's diagnostics; it never goes to stdout.
	Logger *slog.Logger
	// WorkDir is a folder the client may use for the session's files.
	WorkDir string
}

// Trial is one trial given to a session.
type Trial struct {
	Key    transcript.Key
	Prompt string
	// Metadata is the case's metadata, for clients that use it.
	Metadata map[string]any
	// Servers, when not nil, replace OpenParams.Servers for this trial, in
	// the same order and under the same names: the worker's MCP proxy in
	// front of each of the variant's servers, as streamable-HTTP servers on
	// the loopback whose Headers the client must send. They carry no tool
	// overrides and no secrets (the proxy applies the variant's tool
	// metadata, holds the servers' secrets and records what each server
	// saw). A client that reaches servers uses these for the trial.
	Servers []servers.Server
	// Conns, for a client whose definition says InProcessServers, stand
	// in for Servers: the same proxies, in the same order and under the
	// same names, as connections in this process (servers
	// .ConnectInProcess). The client may close them; the worker stops the
	// servers behind them.
	Conns []*servers.Conn
	// Tools are, when the worker set Servers or Conns, the names of the
	// tools each of those servers offers, by server name: the names the
	// client's program sees. A client whose program rewrites tool names
	// before the model sees them (a CLI that replaces the characters model
	// APIs refuse) maps the names its program reports back to these, so
	// that its account of the calls matches the proxies'. Nil otherwise.
	Tools map[string][]string
}

// TrialServers returns the servers a trial uses: t.Servers when the worker
// set them, else the session's.
func (p OpenParams) TrialServers(t Trial) []servers.Server {
	if t.Servers != nil {
		return t.Servers
	}
	return p.Servers
}

// Next tells MST what to do after a trial.
type Next int

const (
	// Continue: the session can take the next trial as it is.
	Continue Next = iota
	// Reset: call Session.Reset before the next trial.
	Reset
	// Stop: the session cannot go on; MST closes it and opens a new one
	// for the remaining trials.
	Stop
)

func (n Next) String() string {
	switch n {
	case Continue:
		return "continue"
	case Reset:
		return "reset"
	case Stop:
		return "stop"
	}
	return "unknown"
}

// Result is what a client returns for one trial: the client-specific parts
// of the transcript. MST fills in identity, timing and environment.
type Result struct {
	Servers         []transcript.ServerInfo
	Messages        []transcript.Message
	ToolCalls       []transcript.ToolCall
	Answer          string
	Usage           transcript.Usage
	Outcome         transcript.Outcome
	ClientVersion   string
	ClientTelemetry map[string]any
	// Next says what the session needs before the next trial.
	Next Next
	// WaitingOn, for a Run whose ctx ended, says what the client was
	// waiting on at that moment, as far as it can tell:
	// transcript.WaitingModel (a model request was unanswered),
	// transcript.WaitingTool (a tool call was in flight), or "" (it cannot
	// tell, or it was busy itself). The worker combines it with what its
	// proxies saw to decide whether a trial that ran out of time timed out
	// or met a silent provider.
	WaitingOn string
}

// Session is an open client. Run may be called concurrently only when the
// definition says Concurrent.
type Session interface {
	// Run runs one trial. ctx carries the trial's deadline (its timeout)
	// and the run's cancellation. When ctx ends the client stops what it
	// started (a CLI's whole process tree included) and returns promptly
	// with what it has: the partial transcript with an errored outcome, or
	// ctx's error. It never sets the outcome timed-out or cancelled itself:
	// only MST's worker decides what a context ending means, from the
	// trial's and the run's contexts, and overrides the outcome.
	// An error means the trial could not run at all; MST records it as
	// errored with cause client, or server when it wraps servers.ErrServer.
	Run(ctx context.Context, t Trial) (Result, error)
	// Reset returns the session to a clean state between trials.
	Reset(ctx context.Context) error
	// Close releases everything the session holds. It is safe to call once
	// after a failed Open returned a non-nil session.
	Close() error
}

// Diagnoser is implemented by sessions that can explain a failure (a
// screenshot, an app's log tail) to be stored with the trial. MST calls it
// after a trial that errored or timed out, before any reset, with its own
// deadline; what it returns is stored, after redaction, in the transcript's
// client telemetry under "diagnosis".
type Diagnoser interface {
	Diagnose(ctx context.Context) (map[string]any, error)
}

// LateServers is implemented by sessions whose servers resolve only once
// the session is open (an app that starts its own connectors). MST runs the
// readiness check on them right after Open.
type LateServers interface {
	Servers(ctx context.Context) ([]servers.Server, error)
}
