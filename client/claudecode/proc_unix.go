//go:build unix

package claudecode

import (
	"os"
	"sort"

	"github.com/mst-eval/mst/servers"
)

// serverCommand is how the CLI starts a stdio server: through env -i with a
// minimal environment (PATH, HOME, … from MST's own environment), so the
// CLI's environment, API key included, does not reach the server; and in
// the server's folder when it declares one. The declaration's env follows
// the minimal one on env's command line, so the config's env is left empty.
func serverCommand(srv servers.Server) (string, []string, map[string]string, error) {
	args := []string{"-i"}
	for _, k := range serverEnvKeys {
		if v, ok := os.LookupEnv(k); ok {
			args = append(args, k+"="+v)
		}
	}
	keys := make([]string, 0, len(srv.Env))
	for k := range srv.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, k+"="+srv.Env[k])
	}
	if srv.Dir != "" {
		args = append(args, "/bin/sh", "-c", `cd "$0" && exec "$@"`, srv.Dir)
	}
	args = append(args, srv.Command)
	args = append(args, srv.Args...)
	return "/usr/bin/env", args, nil, nil
}
