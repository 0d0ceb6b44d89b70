// Command mst runs evals of how AI clients use MCP servers.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/mst-eval/mst/internal/cli"
)

// gcPercent is mst's garbage-collection target when GOGC is not set. The
// MCP SDK's JSON decoding makes about half a megabyte of garbage per tool
// call that goes through MST's proxy; collecting less often cuts the time
// the proxy adds to a call by about a third, for a heap that may grow to
// five times what is live instead of twice (docs/proxy.md, Overhead).
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.OSStdio())
	stop()
	os.Exit(code)
}
