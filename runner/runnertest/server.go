package runnertest

import (
	"os"
	"testing"

	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/servers"
)

// ServeEnv is the environment variable with which the suite starts a
// program as its test MCP server. Serve acts on it; a Harness.Server
// command may ignore it.
const ServeEnv = "MST_RUNNERTEST_SERVE"

// Serve runs the test MCP server (internal/testkit/testserver) on the process's
// stdio and exits, when the suite started this process as its server;
// otherwise it returns at once. Call it first in TestMain, before anything
// that is slow or prints.
func Serve() {
	if os.Getenv(ServeEnv) != "1" {
		return
	}
	os.Exit(testserver.Main())
}

// server is the test MCP server as a variant declares it, with extra
// arguments for the test server (--fail-start and so on).
func (h *Harness) server(t *testing.T, args ...string) servers.Server {
	t.Helper()
	cmd := h.Server
	if len(cmd) == 0 {
		exe, err := os.Executable()
		if err != nil {
			t.Fatalf("finding the test binary to serve MCP: %v", err)
		}
		cmd = []string{exe}
	}
	return servers.Server{
		Name:    "test",
		Command: cmd[0],
		Args:    append(append([]string(nil), cmd[1:]...), args...),
		Env:     map[string]string{ServeEnv: "1"},
	}
}
