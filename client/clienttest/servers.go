package clienttest

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/servers"
)

// testServerBin builds internal/testkit/testserver/cmd/mcp-testserver once per
// test binary; a build that fails fails the test.
func testServerBin(t *testing.T) string {
	t.Helper()
	dir, err := testbin.Build(testbin.Options{}, testbin.TestServer)
	if err != nil {
		t.Fatal(err)
	}
	return testbin.Path(dir, testbin.TestServer)
}

// testServer is the MCP test server over stdio, named name, with args,
// and a tag on its command line that tells the test's own servers apart
// from any other test's (see tagOf).
func testServer(t *testing.T, name string, args ...string) servers.Server {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	args = append(args, "--tag", "clienttest-"+hex.EncodeToString(b))
	return servers.Server{Name: name, Command: testServerBin(t), Args: args}
}

// tagOf returns the tag testServer put on srv's command line.
func tagOf(srv servers.Server) string {
	for i, a := range srv.Args {
		if a == "--tag" && i+1 < len(srv.Args) {
			return srv.Args[i+1]
		}
	}
	return ""
}

// httpServer is the MCP test server over streamable HTTP, in the test's
// process.
func httpServer(t *testing.T, name string) servers.Server {
	t.Helper()
	s := testserver.New(true)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	return servers.Server{Name: name, URL: hs.URL}
}
