// Package testserver is a small MCP server for MST's own tests, with tools
// that misbehave on purpose: one that makes the server exit, one that
// sleeps. It runs over stdio inside the test binary (testscript registers
// Main as a command) so tests need no separate build.
//
// Flags (as arguments): --hang makes the server read stdin and never answer,
// for readiness timeouts; --fail-start makes it print a message on stderr
// and exit 3 before speaking MCP; --no-tools makes it list no tools.
package testserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Main runs the server on the process's stdio and returns the exit code.
func Main() int {
	args := os.Args[1:]
	switch {
	case slices.Contains(args, "--fail-start"):
		fmt.Fprintln(os.Stderr, "testserver: cannot open the database at /nonexistent/db.sqlite")
		return 3
	case slices.Contains(args, "--hang"):
		fmt.Fprintln(os.Stderr, "testserver: warming up a very slow cache")
		io.Copy(io.Discard, os.Stdin)
		return 0
	}
	s := New(!slices.Contains(args, "--no-tools"))
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		return 1
	}
	return 0
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

type sleepIn struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to sleep"`
}

type crashIn struct {
	Code int `json:"code,omitempty" jsonschema:"the exit code"`
}

// New returns the server; with tools false it lists none.
func New(tools bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mst-testserver", Version: "1.0.0"}, nil)
	if !tools {
		return s
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the given text back unchanged."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep (wait, pause) for a number of seconds, then say so."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("slept %gs", in.Seconds)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Crash the server process (exit) immediately."},
		func(ctx context.Context, req *mcp.CallToolRequest, in crashIn) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "testserver: crashing as asked")
			os.Exit(max(in.Code, 1))
			return nil, nil, nil
		})
	return s
}
