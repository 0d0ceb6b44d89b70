package cli

import (
	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/engine/mcpproxy"
)

// newMCPStdioCmd is the stdio face of MST's MCP proxy: a client that can
// start only stdio servers is given MST itself, running this command, as
// each of its servers; it relays between its stdio and the trial's proxy,
// whose address and token come in its environment (mcpproxy.StdioServers).
func newMCPStdioCmd(stdio Stdio) *cobra.Command {
	return &cobra.Command{
		Use:    "mcp-stdio",
		Short:  "Relay a stdio MCP client to MST's proxy (started by MST, not by hand)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			env := envMap(stdio.Env)
			return mcpproxy.ServeStdio(cmd.Context(), env[mcpproxy.StdioURLEnv], env[mcpproxy.StdioTokenEnv], stdio.In, stdio.Out)
		},
	}
}
