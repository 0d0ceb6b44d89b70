package clienttest

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/internal/testserver"
	"github.com/mst-eval/mst/servers"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  string
)

// testServerBin builds internal/testserver/cmd/mcp-testserver once per
// test binary, into the user's cache (a temporary name renamed into place,
// so test binaries that build at once do not collide).
func testServerBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err.Error()
			return
		}
		dir := filepath.Join(os.TempDir(), "mst-clienttest")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err.Error()
			return
		}
		tmp, err := os.CreateTemp(dir, "mcp-testserver-*")
		if err != nil {
			buildErr = err.Error()
			return
		}
		tmp.Close()
		cmd := exec.Command("go", "build", "-o", tmp.Name(), "./internal/testserver/cmd/mcp-testserver")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp.Name())
			buildErr = "building the MCP test server: " + err.Error() + ": " + string(out)
			return
		}
		built = filepath.Join(dir, "mcp-testserver")
		if err := os.Rename(tmp.Name(), built); err != nil {
			buildErr = err.Error()
		}
	})
	if buildErr != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(buildErr)
		}
		t.Skip(buildErr)
	}
	return built
}

// moduleRoot is the folder of the go.mod above the test's folder.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
	}
	return "", os.ErrNotExist
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
