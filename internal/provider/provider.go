// Package provider is how the api client and the judges talk to a model: one
// small interface, Provider, with an implementation per wire format
// (internal/builtin/provider/anthropic, openai and google) and a built-in
// offline model (internal/builtin/provider/offline) for demos and tests.
//
// A Provider turns one Request (the conversation so far and the tools on
// offer) into one Response (text, tool calls, or both). It keeps no state
// between calls; the caller owns the conversation.
//
// Each provider package also exports a Definition, its entry in a Registry:
// the name that starts a model reference ("anthropic" in
// "anthropic/claude-sonnet-4-5"), the variable that holds its key, and New.
// internal/builtin wires the built-in registry; Split and Of are the only
// code that takes a model reference apart.
package provider

import (
	"context"
	"encoding/json"
	"fmt"
)

// Provider asks a model for its next turn.
//
// Complete may be called from several goroutines at once. It retries
// rate-limit (429) and server (5xx) errors with backoff itself; an error it
// returns is final for that turn and is an *Error when the provider answered.
type Provider interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Tool is a tool offered to the model. Name must already be valid for the
// provider (the api client maps MCP tool names that are not).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"` // a JSON Schema object
}

// Role of a message.
type Role string

const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// Message is one message of the conversation. A user message carries Text
// and/or ToolResults (answers to the previous assistant message's calls); an
// assistant message carries Text and/or ToolCalls.
type Message struct {
	Role        Role         `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"toolCalls,omitempty"`
	ToolResults []ToolResult `json:"toolResults,omitempty"`
	// Reasoning, on an assistant message, is the Response.Reasoning of the
	// turn it records, passed back unchanged: an API that lets the model
	// reason may need that reasoning to continue after a tool call.
	Reasoning json.RawMessage `json:"reasoning,omitempty"`
}

// ToolCall is the model asking for a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"` // a JSON object
}

// ToolResult answers one ToolCall.
type ToolResult struct {
	CallID  string `json:"callId"`
	Name    string `json:"name"`
	Content string `json:"content"`
	IsError bool   `json:"isError,omitempty"`
}

// Request is one model turn.
type Request struct {
	Model    string    `json:"model"`
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	// MaxTokens caps the response; 0 means the provider's default (4096).
	MaxTokens int `json:"maxTokens,omitempty"`
	// ReasoningEffort is one of "", "minimal", "low", "medium", "high".
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
}

// Response is the model's turn.
type Response struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	Usage     Usage      `json:"usage"`
	// StopReason is the provider's own word for why the turn ended.
	StopReason string `json:"stopReason,omitempty"`
	// Reasoning is the provider's own record of how the model reasoned in
	// this turn (Anthropic's thinking blocks, with their signatures), in a
	// form only that provider reads. The caller puts it, unchanged, in the
	// assistant Message of this turn; it is empty when there is nothing to
	// send back.
	Reasoning json.RawMessage `json:"reasoning,omitempty"`
}

// Usage counts the tokens of one turn.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	CachedTokens int64 `json:"cachedTokens,omitempty"`
}

// Error is a provider's refusal after retries: an HTTP status and its message.
type Error struct {
	Provider string
	Status   int
	Message  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.Provider, e.Status, e.Message)
}

// Options configure a provider built from a model reference.
type Options struct {
	// BaseURL overrides the provider's API address (an OpenAI-compatible
	// server such as Ollama or vLLM, a gateway, or a test server).
	BaseURL string
	// APIKey authenticates; it comes from the environment or the secrets
	// file, never from the eval config.
	APIKey string
	// API picks the OpenAI wire format: "responses" (default) or "chat".
	API string
	// MaxRetries is how many times a 429 or 5xx is retried; -1 means the default (2).
	MaxRetries int
}
