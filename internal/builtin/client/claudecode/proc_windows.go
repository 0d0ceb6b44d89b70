//go:build windows

package claudecode

import (
	"fmt"

	"github.com/mst-eval/mst/servers"
)

// serverCommand is how the CLI starts a stdio server. On Windows the server
// inherits the CLI's environment and cannot be given a folder of its own.
func serverCommand(srv servers.Server, _ []string) (string, []string, map[string]string, error) {
	if srv.Dir != "" {
		return "", nil, nil, fmt.Errorf("server %s sets dir, which claude-code cannot honour on Windows yet", srv.Name)
	}
	return srv.Command, srv.Args, srv.Env, nil
}
