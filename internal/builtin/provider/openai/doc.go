// Package openai is the provider for OpenAI's APIs and the servers that copy
// them (Ollama, vLLM, gateways), built on the official SDK
// (github.com/openai/openai-go/v3). It speaks one of two wire formats,
// chosen by provider.Options.API:
//
//   - "responses" (the default): the Responses API, used statelessly. Each
//     Complete sends the whole conversation as input items (user and
//     assistant messages, function_call items with their call_id,
//     function_call_output items answering them), never previous_response_id,
//     and asks the API not to store the response. The answer is streamed and
//     the response of the terminal event (response.completed or
//     response.incomplete) is taken.
//   - "chat": the Chat Completions API, not streamed, so that the usage is
//     always reported, whatever the server. Assistant messages carry
//     tool_calls; tool results are tool messages with their tool_call_id.
//
// New builds the SDK client once; Complete may then be called from any number
// of goroutines.
//
// Mapping, in both formats:
//   - Tools are function tools whose parameters are the tool's JSON Schema,
//     not strict (strict mode would reject most MCP schemas).
//   - Request.System becomes the instructions (Responses) or a system
//     message (Chat Completions).
//   - Request.MaxTokens (4096 when 0) becomes max_output_tokens (Responses)
//     or max_completion_tokens (Chat Completions).
//   - Request.ReasoningEffort, when set, becomes reasoning.effort
//     (Responses) or reasoning_effort (Chat Completions).
//   - A tool result's IsError has no place in either format and is dropped;
//     the content goes as it is.
//   - Arguments the model sent that are not valid JSON are kept as a JSON
//     string (see ArgumentsFromText in internal/builtin/provider/wire) and sent back
//     as the original text.
//   - Usage.CachedTokens is the part of the input tokens read from the
//     prompt cache. StopReason is the Responses status ("completed", or the
//     incomplete reason such as "max_output_tokens"), or the Chat Completions
//     finish_reason ("stop", "tool_calls", "length", …).
//
// Errors: the SDK retries 408, 409, 429 and 5xx answers itself, honouring
// retry-after headers, Options.MaxRetries times. A failure reported inside a
// Responses stream (an error event, a failed response, or a stream cut off
// before its terminal event) is retried here on the same budget. What remains
// is returned as a *provider.Error when the API answered with an error, and
// as the network or context error otherwise.
package openai
