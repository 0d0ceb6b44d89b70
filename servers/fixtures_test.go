package servers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runRole runs the fixture named role on stdio and returns the exit code.
func runRole(role string) int {
	switch role {
	case "catalog":
		return runSDK(catalogServer(nil))
	case "catalog-2024-11-05":
		return runSDK(catalogServer(&mcp.ServerOptions{SupportedProtocolVersions: []string{"2024-11-05"}}))
	case "lingering", "deaf":
		// Serves the catalog, then stays when its stdin closes; deaf also
		// ignores SIGTERM.
		if role == "deaf" {
			signal.Ignore(syscall.SIGTERM)
		}
		runSDK(catalogServer(nil))
		fmt.Fprintln(os.Stderr, role+": my stdin closed, but I stay")
		for {
			time.Sleep(time.Hour)
		}
	case "legacy":
		return runLegacy()
	case "connect-deaf":
		return runConnectDeaf()
	case "hangup":
		// Reads one request, stops reading (closes stdin), answers it with
		// an error and exits: the client's next write finds no reader.
		in := bufio.NewReader(os.Stdin)
		line, _ := in.ReadBytes('\n')
		os.Stdin.Close()
		var req struct{ ID json.RawMessage }
		json.Unmarshal(line, &req)
		fmt.Fprintln(os.Stderr, "hangup: lost the connection to the database")
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", req.ID)
		return 1
	case "stubborn":
		// Never answers, ignores the end of stdin and SIGTERM: only SIGKILL
		// stops it.
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "stubborn: ignoring stdin and SIGTERM")
		for {
			time.Sleep(time.Hour)
		}
	}
	fmt.Fprintf(os.Stderr, "unknown fixture role %q\n", role)
	return 2
}

func runSDK(s *mcp.Server) int {
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "fixture:", err)
		return 1
	}
	return 0
}

// Names of catalog tools with particular shapes; the rest are fillers.
var (
	longName    = strings.Repeat("abcdefgh", 16) // 128 bytes, the longest the spec allows
	tooLongName = "too_long_" + strings.Repeat("x", 300)
	unicodeName = "wetter_für_zürich_天気_🌦"
	spacedName  = "greet (structured)"
)

// catalogTools are the catalog server's tools, in the order it adds them
// (it lists them sorted by name): plain and annotated ones, ones whose
// results are errors, odd names, and fillers to make more than 40.
func catalogTools() []*mcp.Tool {
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"anything"}}}`)
	f := false
	tools := []*mcp.Tool{
		{Name: "echo", Description: "Echo the text back.", InputSchema: schema},
		{Name: "lookup", Title: "Look up", Description: "Look a word up (read-only).", InputSchema: schema,
			Annotations: &mcp.ToolAnnotations{Title: "Look up", ReadOnlyHint: true, DestructiveHint: &f, IdempotentHint: true, OpenWorldHint: &f}},
		{Name: "wipe", Description: "Wipe everything (destructive).", InputSchema: schema,
			Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}},
		{Name: "fail", Description: "Always fails with an error result.", InputSchema: schema},
		{Name: "env", Description: "Return the value of the environment variable named text.", InputSchema: schema},
		{Name: longName, Description: "A tool with a 128-byte name.", InputSchema: schema},
		{Name: tooLongName, Description: "A tool whose name is longer than the spec allows.", InputSchema: schema},
		{Name: unicodeName, Description: "Ein Werkzeug mit Umlauten, 漢字 und Emoji im Namen.", InputSchema: schema},
		{Name: spacedName, Description: "A tool whose name has a space and parentheses.", InputSchema: schema},
	}
	for i := range 40 {
		tools = append(tools, &mcp.Tool{Name: fmt.Sprintf("filler_%02d", i), Description: fmt.Sprintf("Filler tool number %d.", i), InputSchema: schema})
	}
	return tools
}

// catalogServer serves catalogTools in pages of 7, so listing them takes
// several tools/list requests. Every tool answers "<name>: <text>", except
// fail (an error result) and env.
func catalogServer(opts *mcp.ServerOptions) *mcp.Server {
	if opts == nil {
		opts = &mcp.ServerOptions{}
	}
	opts.PageSize = 7
	s := mcp.NewServer(&mcp.Implementation{Name: "catalog", Version: "0.1.0"}, opts)
	for _, tool := range catalogTools() {
		s.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Text string }
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			text := tool.Name + ": " + in.Text
			switch tool.Name {
			case "fail":
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the database is locked"}}}, nil
			case "env":
				text = in.Text + "=" + os.Getenv(in.Text)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})
	}
	return s
}

// runLegacy is a minimal hand-written server of protocol version 2024-11-05:
// it answers initialize with that version whatever the client asks for,
// lists two tools in an order that is not sorted, answers calls of its
// methods tool with the methods it was sent so far, and answers anything
// else with "method not found", as JSON-RPC requires.
func runLegacy() int {
	type message struct {
		ID     json.RawMessage `json:"id,omitempty"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}
	var methods []string
	out := json.NewEncoder(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var m message
		if err := json.Unmarshal(in.Bytes(), &m); err != nil {
			fmt.Fprintln(os.Stderr, "legacy: bad message:", err)
			return 1
		}
		methods = append(methods, m.Method)
		if m.ID == nil {
			continue // a notification
		}
		reply := map[string]any{"jsonrpc": "2.0", "id": m.ID}
		switch m.Method {
		case "initialize":
			reply["result"] = map[string]any{
				"protocolVersion": "2024-11-05",
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "legacy", "version": "2024.11"},
			}
		case "tools/list":
			reply["result"] = map[string]any{"tools": []any{
				map[string]any{"name": "zeta", "description": "Listed first.", "inputSchema": map[string]any{"type": "object"}},
				map[string]any{"name": "methods", "description": "Say which methods were called.", "inputSchema": map[string]any{"type": "object"}},
			}}
		case "tools/call":
			reply["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Join(methods, " ")}}}
		default:
			reply["error"] = map[string]any{"code": -32601, "message": "method not found: " + m.Method}
		}
		if err := out.Encode(reply); err != nil {
			return 1
		}
	}
	return 0
}
