package mcpproxy_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/internal/engine/mcpproxy"
	"github.com/mst-eval/mst/servers"
)

// TestStdioFace: a client that speaks MCP over stdio reaches the proxy
// through ServeStdio (what `mst mcp-stdio` runs), sees the variant's view
// and its calls land in the proxy's record.
func TestStdioFace(t *testing.T) {
	t.Parallel()
	srv := testServer(t, "tools")
	srv.Tools = map[string]servers.ToolOverride{"echo": {Name: "say"}}
	set := open(t, newHost(t), "k", srv)
	stdio := set.StdioServers("/path/to/mst")[0]
	if stdio.Command != "/path/to/mst" || strings.Join(stdio.Args, " ") != "mcp-stdio" || strings.Contains(strings.Join(stdio.Args, " "), stdio.Env[mcpproxy.StdioTokenEnv]) {
		t.Fatalf("stdio server %+v: want mst mcp-stdio with the token only in its environment", stdio)
	}

	clientToRelay, relayIn := io.Pipe()
	relayToClient, relayOut := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	relayed := make(chan error, 1)
	go func() {
		relayed <- mcpproxy.ServeStdio(ctx, stdio.Env[mcpproxy.StdioURLEnv], stdio.Env[mcpproxy.StdioTokenEnv], clientToRelay, relayOut)
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "1"}, nil)
	sess, err := c.Connect(ctx, &mcp.IOTransport{Reader: relayToClient, Writer: relayIn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(toolNames(tools.Tools), "say") || strings.Contains(toolNames(tools.Tools), "echo") {
		t.Errorf("over stdio the client sees %s; want the variant's view", toolNames(tools.Tools))
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "say", Arguments: json.RawMessage(`{"text":"über stdio"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := servers.ResultText(res); got != "echo: über stdio" {
		t.Errorf("the call answered %q", got)
	}
	sess.Close()
	relayIn.Close()
	if err := <-relayed; err != nil {
		t.Errorf("ServeStdio ended with %v after its client left", err)
	}
	if ev := set.Evidence(); len(ev.Calls) != 1 || ev.Calls[0].Tool != "echo" || ev.Calls[0].OfferedAs != "say" {
		t.Errorf("the proxy's record: %+v", ev.Calls)
	}
}

func TestStdioNeedsItsProxy(t *testing.T) {
	t.Parallel()
	err := mcpproxy.ServeStdio(t.Context(), "", "", strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), mcpproxy.StdioURLEnv) {
		t.Errorf("ServeStdio without its variables = %v; want an error naming them", err)
	}
}

func toolNames(tools []*mcp.Tool) string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return strings.Join(out, ",")
}
