// Package providertest is a fake model provider for tests: an HTTP server that
// speaks the real wire formats of the Anthropic Messages API, the OpenAI
// Responses API and the OpenAI Chat Completions API, answers from a script
// given by the test, and records every request it receives.
//
// It is a test double for the model provider only. Everything that talks to
// it (the official SDKs, the api client, the Claude Code and Codex CLIs) is
// real, so its answers follow the shapes those programs decode, streamed and
// not streamed.
//
// # Endpoints
//
//	POST /v1/messages            Anthropic Messages (also with ?beta=true)
//	POST /v1/responses           OpenAI Responses
//	POST /v1/chat/completions    OpenAI Chat Completions
//
// Any other path is answered 404 with a JSON error, and recorded.
//
// # Flow of one request
//
// The server decodes the body, records a Request, and then answers with the
// first of these that applies:
//
//  1. the next pending Fault of the Script (an error in the format's own
//     shape, with retry-after headers that make SDK retries immediate);
//  2. a 400 error if the body is not what the format requires;
//  3. the Turn of the matching Conversation, once Script.Gate (if any) has
//     opened and after waiting Script.Latency.
//
// The Conversation is chosen by the conversation's first user text
// (Request.FirstUserText), and the Turn by how many model turns the history
// already holds, so a client that replays the whole conversation on every
// request (as all of them do) gets the next scripted turn each time. The
// server keeps no conversation state of its own.
//
// With Script.Offline set, MST's offline model (package internal/builtin/provider/offline)
// answers in place of the Conversations: the server reads the offered
// tools (names, descriptions, input schemas) and the whole history, tool
// calls and results included, and the offline model decides the turn, so
// a real CLI can run an eval on it. Tools are scored under their servers'
// own names, without the mcp__server__ or mcp_server_ prefix a CLI adds.
//
// For judges (package grade), judge.go scripts the judge model's side:
// JudgeConversation answers a judge's requests with a verdict
// (JudgeReply), a malformed answer (MalformedJudgeAnswers) or a refusal
// (JudgeRefusal, a Turn with Refusal set, sent in each format's own
// refusal shape); errors and 429s are Faults, as for any client.
//
// A Server may be used from many goroutines at once.
package providertest
