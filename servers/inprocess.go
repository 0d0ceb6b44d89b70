package servers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// InProcess is an MCP server that lives in this process and is reached by
// function calls rather than over a transport: MST's proxy, for a client
// that runs inside the worker (client.Definition.InProcessServers). It
// gives what an MCP session with it would, as Go values, with nothing
// encoded or decoded between the two.
//
// Its methods may be called from any goroutine.
type InProcess interface {
	// Tools are the tools the server offers, in the order a tools/list
	// answer of it would give them.
	Tools() []*mcp.Tool
	// CallTool handles one tools/call of the tool offered as name, with
	// args as compact JSON. An error is a *jsonrpc.Error when the server
	// answers with one, ctx's error when ctx ended, and ErrServer (wrapped)
	// when the server is gone.
	CallTool(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error)
	// Implementation is the name and version the server reports.
	Implementation() string
	// ProtocolVersion and Instructions are what the server's initialize
	// answer would say.
	ProtocolVersion() string
	Instructions() string
	// Close ends the calls still in flight through this connection, as
	// a client ending its MCP session does. It is safe to call more than
	// once.
	Close() error
}

// ConnectInProcess opens a Conn on a server in this process. s names the
// server (only its Name and StartupTimeout count: it has no command or URL,
// and no tool overrides, dry run or faults, which are the in-process
// server's own business). Call, CallRaw and the rest then behave as on a
// Conn from Connect to the same server over MCP: the same tools, results
// and error texts.
func ConnectInProcess(s Server, l InProcess) *Conn {
	c := &Conn{Server: s.Declaration(), local: l, Implementation: l.Implementation(), Listed: l.Tools()}
	c.Tools = offered(c.Server, c.Listed)
	return c
}

// callLocal is CallRaw on an in-process server. The arguments are compacted
// as the SDK's encoder would send them (the server records them as it gets
// them), and a JSON-RPC error comes back wrapped with the words the SDK's
// client puts around it, so that a transcript does not depend on the way
// the client reached the server.
func (c *Conn) callLocal(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	var compact bytes.Buffer
	if a := bytes.TrimSpace(args); len(a) == 0 || string(a) == "null" {
		compact.WriteString("{}")
	} else if err := json.Compact(&compact, a); err != nil {
		return nil, fmt.Errorf("server %s: tool %s: the arguments are not valid JSON: %w", c.Server.Name, tool, err)
	}
	res, err := c.local.CallTool(ctx, tool, compact.Bytes())
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, ErrServer):
		return nil, fmt.Errorf("server %s: tool %s: %w", c.Server.Name, tool, err)
	}
	rpc, ok := errors.AsType[*jsonrpc.Error](err)
	if !ok {
		// What the SDK's server makes of a handler's other errors.
		rpc = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return nil, fmt.Errorf("server %s: tool %s: %w: %w", c.Server.Name, tool, ErrServer, fmt.Errorf("calling %q: %w", "tools/call", rpc))
}
