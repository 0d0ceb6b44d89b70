// Package servers declares the MCP servers of an eval, connects to them
// through the official MCP Go SDK (stdio and streamable HTTP), and runs the
// readiness check MST makes before the first trial.
package servers

import "time"

// Server is one MCP server as a variant uses it.
type Server struct {
	// Name is the server's key in the eval config.
	Name string `json:"name"`

	// Command, Args, Env and Dir start a stdio server. A relative Command
	// that contains a slash has already been resolved against the config's
	// folder. Env is added to a minimal environment (PATH, HOME, TMPDIR).
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`

	// URL and Headers reach a streamable-HTTP server.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// StartupTimeout bounds connecting and listing tools; 0 means 30s.
	StartupTimeout time.Duration `json:"startupTimeout,omitempty"`

	// Tools rewrites the metadata of the server's tools for a variant,
	// keyed by the tool's name on the server.
	Tools map[string]ToolOverride `json:"tools,omitempty"`
}

// ToolOverride changes how one tool is offered to the model.
type ToolOverride struct {
	// Description replaces the tool's description when set.
	Description *string `json:"description,omitempty"`
	// Hidden removes the tool from what the model is offered.
	Hidden bool `json:"hidden,omitempty"`
}

// Transport is "stdio" or "http".
func (s Server) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}
