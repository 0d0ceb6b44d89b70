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
	"github.com/mst-eval/mst/internal/ground/gctune"
	"github.com/mst-eval/mst/plugin"
)

// Main runs mst with the process's arguments and stdio and the given
// plugins, and exits with mst's exit code.
func Main(plugins ...plugin.Plugin) {
	gctune.Apply()
	// Ctrl-C or SIGTERM ends the command's context; a second one, or
	// cli.StopGrace without the command ending, ends the process at once
	// (cli.Interrupts).
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stdio := cli.OSStdio()
	stdio.Stopping = new(cli.Stopping)
	finished, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		cli.Interrupts(finished, sigs, cancel, stdio.Stopping, os.Stderr, cli.StopGrace, os.Exit)
	}()
	code := cli.MainWith(ctx, os.Args[1:], stdio, plugins)
	close(finished)
	<-done
	cancel(nil)
	signal.Stop(sigs)
	os.Exit(code)
}
