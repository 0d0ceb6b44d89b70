//go:build unix

package claudecode

import (
	"maps"
	"os"
	"slices"

	"github.com/mst-eval/mst/servers"
)

// serverCommand is how the CLI starts a stdio server: through env -u,
// which takes out of the server's environment every variable of the CLI's
// own (unset, API key included) that the server does not declare, and in
// the server's folder when it declares one. The server's variables (a
// minimal set from MST's own environment, then the declaration's env,
// secrets included) go in the config's env, never on a command line, which
// every user of the machine can read.
func serverCommand(srv servers.Server, unset []string) (string, []string, map[string]string, error) {
	env := map[string]string{}
	for _, k := range serverEnvKeys {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	maps.Copy(env, srv.Env)
	var args []string
	for _, k := range slices.Sorted(slices.Values(unset)) {
		if _, kept := env[k]; !kept {
			args = append(args, "-u", k)
		}
	}
	if srv.Dir != "" {
		args = append(args, "/bin/sh", "-c", `cd "$0" && exec "$@"`, srv.Dir)
	}
	args = append(args, srv.Command)
	args = append(args, srv.Args...)
	return "/usr/bin/env", args, env, nil
}
