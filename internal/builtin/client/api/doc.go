// Package api is the api client: the model alone, through its provider's
// API, with the variant's MCP tools, in a loop until it answers, runs out of
// actions (maxActions) or of time (the trial's context).
//
// A session connects to every server once and keeps the connections across
// trials; Run may be called concurrently. When a server fails during a
// trial, the trial ends errored with cause server and the session asks for a
// reset, which reconnects the servers.
//
// Tool names that providers refuse (anything outside [A-Za-z0-9_-], or
// longer than 64 characters) are offered under a mapped name and mapped
// back, so transcripts always show the server's own tool names.
package api
