// Package mstcmd is the mst command, for builds of mst with Go plugins
// compiled in. A custom build's main is one line:
//
//	func main() { mstcmd.Main(acme.Plugin(), other.Plugin()) }
//
// `mst build --with MODULE` writes that main and builds it.
package mstcmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/gctune"
	"github.com/mst-eval/mst/plugin"
)

// Main runs mst with the process's arguments and stdio and the given
// plugins, and exits with mst's exit code.
func Main(plugins ...plugin.Plugin) {
	gctune.Apply()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.MainWith(ctx, os.Args[1:], cli.OSStdio(), plugins)
	stop()
	os.Exit(code)
}
