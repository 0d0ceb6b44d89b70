// Command mst runs evals of how AI clients use MCP servers.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/gctune"
)

func main() {
	gctune.Apply()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.OSStdio())
	stop()
	os.Exit(code)
}
