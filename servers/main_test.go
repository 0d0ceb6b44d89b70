package servers_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/servers"
)

// The tests run three kinds of servers, all real processes or real HTTP
// endpoints speaking MCP:
//
//   - internal/testkit/testserver's binary, built once per test binary (testServer);
//   - servers defined in fixtures_test.go, run over stdio by re-executing this
//     test binary with roleEnv set (fixture), or over streamable HTTP with
//     httptest (httpFixture);
//   - the npm server-everything and the go-sdk example server, installed under
//     $MST_PEERS (internal/testkit/peertest).

// roleEnv names the fixture a re-executed test binary runs instead of the
// tests. Servers get a minimal environment, so it travels in Server.Env.
const roleEnv = "MST_SERVERS_TEST_ROLE"

// secretEnv is set in the test process and must not reach stdio servers.
const secretEnv = "MST_SERVERS_TEST_SECRET"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	os.Setenv(secretEnv, "do-not-leak")
	code := m.Run()
	testbin.Clean()
	os.Exit(code)
}

// testServer returns internal/testkit/testserver's binary as a stdio server named
// name, with args (--hang, --fail-start, --no-tools).
func testServer(t *testing.T, name string, args ...string) servers.Server {
	t.Helper()
	dir, err := testbin.Build(testbin.Options{}, testbin.TestServer)
	if err != nil {
		t.Fatal(err)
	}
	return servers.Server{Name: name, Command: testbin.Path(dir, testbin.TestServer), Args: args}
}

// fixture returns the fixture role (see runRole) as a stdio server named
// name: this test binary, re-executed.
func fixture(t *testing.T, name, role string) servers.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return servers.Server{Name: name, Command: exe, Env: map[string]string{roleEnv: role}}
}

// httpFixture serves srv over streamable HTTP for the test's lifetime, with
// wrap (if not nil) around the MCP handler, and returns it as a server named
// name.
func httpFixture(t *testing.T, name string, srv *mcp.Server, wrap func(http.Handler) http.Handler) servers.Server {
	t.Helper()
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return servers.Server{Name: name, URL: hs.URL}
}

// withPIDFile wraps a stdio server in sh, which writes its process id to a
// file and then execs the server under the same id. It returns the wrapped
// server and a function that reads the id once the server has started.
func withPIDFile(t *testing.T, s servers.Server) (servers.Server, func() int) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	s.Args = append([]string{"-c", `echo $$ > "$MST_PID_FILE" && exec "$0" "$@"`, s.Command}, s.Args...)
	s.Command = "/bin/sh"
	env := map[string]string{"MST_PID_FILE": pidFile}
	for k, v := range s.Env {
		env[k] = v
	}
	s.Env = env
	return s, func() int {
		t.Helper()
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("the server never started: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("pid file %q: %v", b, err)
		}
		return pid
	}
}

// processGone reports whether pid no longer exists: it exited and was
// reaped (a zombie still counts as present).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
