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
	// ToolCalls lists every tool call in the order the client made them.
	ToolCalls []ToolCall `json:"toolCalls"`
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
}

// Environment says where a trial ran.
type Environment struct {
	Runner string `json:"runner"`
	OS     string `json:"os"`
	Arch   string `json:"arch,omitempty"`
}
