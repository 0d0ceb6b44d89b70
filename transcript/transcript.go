// Package transcript defines what one trial produced (the Transcript) and the
// record of one run (the Run), both versioned JSON documents written
// atomically to a result store.
//
// Readers accept older versions and old client names; writers always write
// the current version. Nothing here knows how a trial was run: every client
// returns the same Transcript and every grader and report reads it.
package transcript

import (
	"encoding/json"
	"fmt"
	"time"
)

// Version is the version of the transcript format written by this MST.
const Version = 1

// Outcome statuses. A trial ends in exactly one of them.
const (
	Answered  = "answered"  // the client gave a final answer
	NoAnswer  = "no-answer" // the client stopped without an answer (for example, maxActions ran out)
	TimedOut  = "timed-out" // the trial's timeout passed before an answer
	Errored   = "errored"   // infrastructure failed; Cause says which part
	Cancelled = "cancelled" // the run was interrupted while the trial ran
	// Skipped: the trial never started because its variant was stopped
	// (its first trials all errored with one cause); Detail says why.
	// Like cancelled, it is never graded and --resume runs it again.
	Skipped = "skipped"
)

// Causes of an errored trial.
const (
	CauseClient   = "client"
	CauseServer   = "server"
	CauseProvider = "provider"
	CauseRunner   = "runner"
)

// Key identifies one trial: a case under a variant, attempt number Trial
// (counted from 1).
type Key struct {
	Case    string `json:"case"`
	Variant string `json:"variant"`
	Trial   int    `json:"trial"`
}

// String is "VARIANT/CASE#TRIAL", with the names made Printable: it is
// for messages and logs.
func (k Key) String() string {
	return fmt.Sprintf("%s/%s#%d", Printable(k.Variant), Printable(k.Case), k.Trial)
}

// Transcript is the record of one trial.
type Transcript struct {
	Kind    string `json:"kind"`    // always "mst.transcript"
	Version int    `json:"version"` // Version when written by this MST
	Run     string `json:"run"`
	Key
	Shard int `json:"shard"`

	Client   ClientInfo   `json:"client"`
	Model    string       `json:"model"`
	Servers  []ServerInfo `json:"servers"`
	Prompt   string       `json:"prompt"`
	Messages []Message    `json:"messages"`
	// ToolCalls lists every tool call in the order they were made, under
	// the servers' own tool names. Where MST's proxy stood in front of a
	// server, its calls are the proxy's record (Evidence "server"): what
	// reached the server, whatever the client says; graders read this list.
	ToolCalls []ToolCall `json:"toolCalls"`
	// ClientToolCalls is the client's own account of its tool calls, as it
	// reported them, kept beside the proxy's record; empty when no proxy
	// stood in front of the servers (then ToolCalls is the client's account).
	ClientToolCalls []ToolCall `json:"clientToolCalls,omitempty"`
	// Discrepancies are the places where the client's account and the
	// proxy's record disagree.
	Discrepancies []Discrepancy `json:"discrepancies,omitempty"`
	// Answer is the final answer text, empty unless Outcome.Status is answered.
	Answer  string  `json:"answer"`
	Usage   Usage   `json:"usage"`
	Timing  Timing  `json:"timing"`
	Outcome Outcome `json:"outcome"`
	// Environment says where the trial ran.
	Environment Environment `json:"environment"`
	// ClientTelemetry holds what a client reports beyond the common fields
	// (its own version, its raw stop reason). It passes through redaction.
	ClientTelemetry map[string]any `json:"clientTelemetry,omitempty"`
}

// ClientInfo names the client that ran the trial.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// ServerInfo describes one MCP server as the trial saw it.
type ServerInfo struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // "stdio" or "http"
	// Tools are the tool names offered to the model, after any tool metadata
	// of the variant was applied.
	Tools []string `json:"tools"`
	// ToolsHash is a SHA-256 over the offered tool list (names, descriptions
	// and input schemas), so two trials can tell whether they saw the same tools.
	ToolsHash string `json:"toolsHash"`
	// ServerInfo is the implementation name and version the server reported.
	Implementation string `json:"implementation,omitempty"`
	// ProtocolVersion is the MCP version the server agreed to, when MST's
	// proxy connected to it.
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// ServerToolsHash is the SHA-256 of the server's own tool list (every
	// tool, as the server sent it, before the variant's changes), when MST's
	// proxy listed it: two runs with the same hash saw the same server tools.
	ServerToolsHash string `json:"serverToolsHash,omitempty"`
	// Offered maps a tool's server name to the name the variant offered it
	// under, for renamed tools only; Tools keeps the server's names.
	Offered map[string]string `json:"offered,omitempty"`
}

// Where a tool call's record comes from (ToolCall.Evidence).
const (
	// EvidenceServer: MST's proxy saw the call on its way to the server.
	EvidenceServer = "server"
	// EvidenceClient: only the client reports the call (a built-in tool of
	// the client, or a server with no proxy in front of it).
	EvidenceClient = "client"
)

// The kinds of Discrepancy.
const (
	// Unconfirmed: the client reports a call that never reached the server.
	Unconfirmed = "unconfirmed"
	// Unreported: the server got a call the client does not report.
	Unreported = "unreported"
)

// Discrepancy is one disagreement between a client's account of its tool
// calls and the proxy's record.
type Discrepancy struct {
	Kind   string `json:"kind"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Call is the id of the call in ClientToolCalls (unconfirmed) or in
	// ToolCalls (unreported).
	Call   string `json:"call"`
	Detail string `json:"detail"`
}

// Message is one turn of the conversation.
type Message struct {
	Role string `json:"role"` // "user", "assistant" or "tool"
	Text string `json:"text,omitempty"`
	// ToolCalls are the ids of the tool calls an assistant message made.
	ToolCalls []string `json:"toolCalls,omitempty"`
	// ToolCall is the id of the call a tool message answers.
	ToolCall string `json:"toolCall,omitempty"`
}

// ToolCall is one call of an MCP tool, with its result.
type ToolCall struct {
	ID     string `json:"id"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Arguments are the arguments as the model sent them.
	Arguments json.RawMessage `json:"arguments"`
	// Result is the text content of the tool's result.
	Result string `json:"result"`
	// IsError is true when the tool reported an error result.
	IsError bool `json:"isError,omitempty"`
	// Error is set when the call itself failed (no result came back).
	Error      string    `json:"error,omitempty"`
	Started    time.Time `json:"started"`
	DurationMs float64   `json:"durationMs"`
	// OfferedAs is the name the variant offered the tool under, when it
	// renamed it; Tool is always the server's own name.
	OfferedAs string `json:"offeredAs,omitempty"`
	// Simulated is true when a dry run answered the call instead of the
	// server: it never reached the server.
	Simulated bool `json:"simulated,omitempty"`
	// Injected describes the fault MST injected into the call, if any
	// ("latency 500ms", "error", "protocol", "disconnect").
	Injected string `json:"injected,omitempty"`
	// Evidence says where this record comes from: EvidenceServer or
	// EvidenceClient; empty in transcripts written before MST had a proxy.
	Evidence string `json:"evidence,omitempty"`
}

// Usage counts tokens over the whole trial.
type Usage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CachedTokens int64   `json:"cachedTokens,omitempty"`
	CostUSD      float64 `json:"costUsd,omitempty"`
	// ModelCalls is how many times the model was asked for a turn.
	ModelCalls int `json:"modelCalls"`
}

// Add adds u2 to u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.CachedTokens += u2.CachedTokens
	u.CostUSD += u2.CostUSD
	u.ModelCalls += u2.ModelCalls
}

// Timing holds when the trial ran. DurationMs is measured from the prompt to
// the transcript; setup (opening the client, connecting servers) is apart.
type Timing struct {
	Started    time.Time `json:"started"`
	Ended      time.Time `json:"ended"`
	DurationMs float64   `json:"durationMs"`
	SetupMs    float64   `json:"setupMs,omitempty"`
}

// Outcome is how a trial ended.
type Outcome struct {
	Status string `json:"status"`
	Cause  string `json:"cause,omitempty"` // set when Status is errored
	// Detail explains the outcome in words (an error message, "maxActions (8) reached").
	Detail string `json:"detail,omitempty"`
	// WaitingOn says, for a trial whose timeout passed, what it was waiting
	// on at that moment: WaitingModel, WaitingTool or WaitingClient.
	WaitingOn string `json:"waitingOn,omitempty"`
}

// What a trial was waiting on when its timeout passed (Outcome.WaitingOn).
// A trial that waited on the model provider is errored (cause provider): the
// provider failed, not the variant. One that waited on a tool, or on the
// client itself, timed out, and is graded as a failure.
const (
	// WaitingModel: a request to the model provider was unanswered.
	WaitingModel = "model"
	// WaitingTool: a tool call was in flight on one of the servers.
	WaitingTool = "tool"
	// WaitingClient: neither; the client itself was busy (or said nothing
	// that tells).
	WaitingClient = "client"
)

// Environment says where a trial ran.
type Environment struct {
	Runner string `json:"runner"`
	OS     string `json:"os"`
	Arch   string `json:"arch,omitempty"`
}
