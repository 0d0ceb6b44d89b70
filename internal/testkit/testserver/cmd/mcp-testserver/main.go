// Command mcp-testserver runs MST's test MCP server (internal/testkit/testserver)
// over stdio, as a program of its own: for tests whose servers run where
// the test binary cannot, such as in a worker container (build it with
// CGO_ENABLED=0 for a scratch image).
package main

import (
	"os"

	"github.com/mst-eval/mst/internal/testkit/testserver"
)

func main() {
	os.Exit(testserver.Main())
}
