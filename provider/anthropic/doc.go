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
//     blocks become ToolCalls (id, name, raw JSON input). Thinking and server
//     tool blocks are dropped.
//   - Usage.InputTokens counts every input token, whether read from the
//     prompt cache, written to it or neither (the way OpenAI counts);
//     Usage.CachedTokens is the part read from the cache.
//   - StopReason is the API's stop_reason ("end_turn", "tool_use",
//     "max_tokens", …).
//   - Request.ReasoningEffort is ignored. Extended thinking would need the
//     thinking blocks (with their signatures) of earlier assistant turns sent
//     back with every tool result, and provider.Message does not carry them.
//
// Errors: the SDK retries 408, 409, 429 and 5xx answers itself, honouring
// retry-after headers, Options.MaxRetries times. An error event inside the
// stream (such as overloaded_error) and a stream cut off before message_stop
// are retried here on the same budget. What remains after the retries is
// returned as a *provider.Error when the API answered with an error, and as
// the network or context error otherwise.
package anthropic
