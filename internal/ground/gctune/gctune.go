// Package gctune sets mst's garbage-collection target, for the mst
// command and for the benchmarks that measure what it costs.
package gctune

import (
	"os"
	"runtime/debug"
)

// Percent is mst's garbage-collection target when GOGC is not set. The
// MCP SDK's JSON decoding makes about half a megabyte of garbage per tool
// call that goes through MST's proxy, and a 32 KiB buffer for every
// message it reads; collecting less often cuts the time the proxy adds to
// a call by about a third, and MST's own CPU per trial by about a quarter
// (docs/design/019-memory-per-trial.md), for a heap that may grow to five
// times what is live instead of twice (docs/proxy.md, Overhead).
const Percent = 400

// Apply sets the target to Percent unless the environment sets GOGC.
func Apply() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(Percent)
	}
}
