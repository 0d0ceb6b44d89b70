// Command mcp-testserver runs internal/testserver, MST's own test MCP
// server, as a program of its own. The bench command uses its sleep tool
// as a trial with a fixed latency.
package main

import (
	"os"

	"github.com/mst-eval/mst/internal/testserver"
)

func main() { os.Exit(testserver.Main()) }
