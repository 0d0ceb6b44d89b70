package plugin

import (
	"encoding/json"

	"github.com/mst-eval/mst/transcript"
)

// Protocol is the version of the protocol MST speaks with program plugins.
//
// A program plugin reads requests on its stdin and writes responses on its
// stdout, one JSON-RPC 2.0 object per line (UTF-8, no line breaks inside
// an object). Its stderr is its log: MST keeps the last lines and shows
// them when the plugin fails. MST sends one request at a time and waits
// for its response. The flow:
//
//	MST                                   plugin
//	 │  initialize {protocol, mstVersion}   │
//	 │ ───────────────────────────────────▶ │
//	 │  {protocol, namespace, version,      │
//	 │   datasetSources, graders}           │
//	 │ ◀─────────────────────────────────── │
//	 │  dataset/load, grader/check,         │
//	 │  grader/grade … (any number)         │
//	 │ ◀──────────────────────────────────▶ │
//	 │  shutdown                            │
//	 │ ───────────────────────────────────▶ │
//	 │  null; then stdin closes, and the    │
//	 │  plugin exits                        │
//
// A method the plugin does not know gets the JSON-RPC error -32601; an
// error it returns ({"code": N, "message": "…"}) is shown to the user as
// the plugin's words, so it should say what is wrong and what to do.
const Protocol = "mst.plugin/v1"

// The methods of Protocol.
const (
	MethodInitialize  = "initialize"
	MethodDatasetLoad = "dataset/load"
	MethodGraderCheck = "grader/check"
	MethodGraderGrade = "grader/grade"
	MethodClientRun   = "client/run"
	MethodShutdown    = "shutdown"
)

// InitializeParams are initialize's params.
type InitializeParams struct {
	Protocol   string `json:"protocol"`
	MSTVersion string `json:"mstVersion"`
}

// Manifest is initialize's result: who the plugin is and what it adds.
// Namespace must be the one in the program's name (mst-plugin-NAMESPACE).
type Manifest struct {
	Protocol       string         `json:"protocol"`
	Namespace      string         `json:"namespace"`
	Version        string         `json:"version"`
	Description    string         `json:"description,omitempty"`
	DatasetSources []ManifestKind `json:"datasetSources,omitempty"`
	Graders        []ManifestKind `json:"graders,omitempty"`
	Clients        []ManifestKind `json:"clients,omitempty"`
}

// ManifestKind is one kind a program plugin adds, by its short name.
type ManifestKind struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Options is the JSON Schema of the kind's options.
	Options json.RawMessage `json:"options,omitempty"`
	// Credentials (dataset sources, clients) names the environment
	// variables whose values dataset/load and client/run receive.
	Credentials []string `json:"credentials,omitempty"`
	// TimeoutSeconds (clients) is a trial's timeout when the variant sets
	// none; it must agree with the default of "timeout" in Options.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// ModelProviders (clients) lists the providers of the models the
	// client runs ("anthropic", "offline"); empty means any model.
	ModelProviders []string `json:"modelProviders,omitempty"`
}

// ClientRunParams are client/run's params: one trial. Servers are MST's
// proxies in front of the variant's servers, streamable-HTTP endpoints on
// the loopback; the client must send each one's Headers. Every call
// through them is recorded, and compared with the calls the client
// reports (ClientRunResult.ToolCalls).
type ClientRunParams struct {
	Name        string            `json:"name"`
	Variant     string            `json:"variant"`
	Model       string            `json:"model"`
	Options     json.RawMessage   `json:"options,omitempty"`
	TimeoutMs   int64             `json:"timeoutMs,omitempty"`
	Credentials map[string]string `json:"credentials,omitempty"`
	Trial       ClientTrial       `json:"trial"`
	Servers     []ClientServer    `json:"servers"`
}

// ClientTrial is the trial of client/run.
type ClientTrial struct {
	transcript.Key
	Prompt   string         `json:"prompt"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// ClientServer is one server of client/run.
type ClientServer struct {
	Name    string            `json:"name"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// ClientRunResult is client/run's result. Outcome defaults to answered
// when Answer is not empty, else no-answer; its status may be answered,
// no-answer or errored (with a detail).
type ClientRunResult struct {
	Answer    string                `json:"answer"`
	Messages  []transcript.Message  `json:"messages,omitempty"`
	ToolCalls []transcript.ToolCall `json:"toolCalls,omitempty"`
	Usage     transcript.Usage      `json:"usage,omitzero"`
	Outcome   *transcript.Outcome   `json:"outcome,omitempty"`
	Telemetry map[string]any        `json:"telemetry,omitempty"`
}

// DatasetLoadParams are dataset/load's params. Credentials holds the
// values of the source's declared credentials that are set; the plugin
// reads them from here, never from its own environment, and keeps them to
// itself.
type DatasetLoadParams struct {
	Name        string            `json:"name"`
	Options     json.RawMessage   `json:"options"`
	Dir         string            `json:"dir"`
	Credentials map[string]string `json:"credentials,omitempty"`
}

// DatasetLoadResult is dataset/load's result: the cases, in order, each as
// a line of a JSONL dataset would give it (id, input, expect, metadata,
// model, clientOptions).
type DatasetLoadResult struct {
	// Cases are JSON objects, checked exactly as the lines of a JSONL
	// dataset (dataset.Case's fields; an unknown key is an error).
	Cases []json.RawMessage `json:"cases"`
}

// GraderCheckParams are grader/check's params: the plugin says whether the
// options are ones it can grade with (an error if not).
type GraderCheckParams struct {
	Name    string          `json:"name"`
	Options json.RawMessage `json:"options"`
}

// GraderCheckResult is grader/check's result.
type GraderCheckResult struct {
	// Label is the grader's short label in reports ("total = 42"); empty
	// for none.
	Label string `json:"label,omitempty"`
}

// GraderGradeParams are grader/grade's params: one transcript, as MST
// stores it (docs/protocol.md describes its fields).
type GraderGradeParams struct {
	Name       string                 `json:"name"`
	Options    json.RawMessage        `json:"options"`
	Transcript *transcript.Transcript `json:"transcript"`
}

// GraderGradeResult is grader/grade's result, a grade.Result without its
// grader name, which MST fills in.
type GraderGradeResult struct {
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
	// Error says why the grader could give no verdict; the trial's grade
	// is then errored, not failed.
	Error string `json:"error,omitempty"`
}

// rpcRequest and rpcResponse are JSON-RPC 2.0 messages.
type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *int64          `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *RPCError       `json:"error"`
}

// RPCError is an error a program plugin returned.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return e.Message }
