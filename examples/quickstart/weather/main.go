// Command weather is the quickstart's MCP server, speaking MCP over stdio:
// five weather tools over canned data, with the terse descriptions many
// real servers ship. See examples/quickstart/README.md.
//
// Build it next to mst with:
//
//	go build -o bin/ ./cmd/mst ./examples/quickstart/weather
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/mst-eval/mst/examples/quickstart/internal/weather"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := weather.NewServer().Run(ctx, &mcp.StdioTransport{})
	stop()
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "weather: %v\n", err)
		os.Exit(1)
	}
}
