// Package anthropic is the provider for the Anthropic Messages API, built on
// the official SDK (github.com/anthropics/anthropic-sdk-go/v2).
//
// New builds one SDK client; Complete may then be called from any number of
// goroutines. Each Complete sends the whole conversation (the API is
// stateless), streams the answer and accumulates the stream into the final
// message, so long answers do not run into the time limits of non-streaming
// requests.
//
// Mapping:
//   - Request.System becomes the system prompt; a user message becomes
//     tool_result blocks (one per ToolResult, linked by tool_use_id) followed
//     by a text block; an assistant message becomes a text block followed by
//     tool_use blocks. Tools are offered with their JSON Schema sent as it is.
//   - In the response, text blocks are joined into Response.Text and tool_use
//     blocks become ToolCalls (id, name, raw JSON input). Thinking and
//     redacted thinking blocks, with their signatures, go into
//     Response.Reasoning as a JSON list; an assistant Message's Reasoning is
//     sent back as those blocks, first in the message, as the API requires
//     to go on after a tool call with thinking on. Server tool blocks are
//     dropped.
//   - Usage.InputTokens counts every input token, whether read from the
//     prompt cache, written to it or neither (the way OpenAI counts);
//     Usage.CachedTokens is the part read from the cache.
//   - StopReason is the API's stop_reason ("end_turn", "tool_use",
//     "max_tokens", …).
//   - Request.ReasoningEffort turns on extended thinking with a budget per
//     level (ThinkingBudgets: minimal 1024, low 2048, medium 8192, high
//     24576 tokens). Thinking tokens count against max_tokens, which must
//     exceed the budget, so max_tokens is Request.MaxTokens plus the budget:
//     MaxTokens stays the room for the answer. Thinking does not combine
//     with a temperature, top_k or a forced tool choice, and this provider
//     sets none of them. A model from before extended thinking (Claude 3
//     and 3.5, see SupportsThinking) is refused with an error that says
//     so, before anything is sent. The API counts thinking in
//     output_tokens and reports no separate figure, so Usage has none.
//   - A base URL (Options.BaseURL) is the API's address without /v1: the SDK
//     appends /v1/messages. New refuses one whose path already ends in
//     /v1, /v1/messages or /messages, with the address to write instead.
//
// Errors: the SDK retries 408, 409, 429 and 5xx answers itself, honouring
// retry-after headers, Options.MaxRetries times. An error event inside the
// stream (such as overloaded_error) and a stream cut off before message_stop
// are retried here on the same budget. What remains after the retries is
// returned as a *provider.Error when the API answered with an error, and as
// the network or context error otherwise.
package anthropic
