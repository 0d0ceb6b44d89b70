package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/servers"
)

// Conns are the set's proxies as connections in this process, in the
// order and under the names of the servers, for a client that runs inside
// the worker (client.Definition.InProcessServers). A call on one goes to
// the proxy as a function call, with no MCP message encoded or decoded on
// the way, and meets the same policy and record as a call through Servers:
// the variant's view, the call limit, faults, dry runs, the call limits
// across shards, the server-side record. What a client sees is what it
// would see over HTTP: the tools in the order the SDK's server lists them
// (by name), the arguments recorded as the SDK would send them, the same
// results and error texts. After a disconnect fault, or once the set is
// closed, a call fails without reaching the proxy, as a request to the
// HTTP face's endpoint would.
//
// Each call of Conns makes new connections. Closing one ends its calls in
// flight; the set, not the client, stops the servers.
func (s *Set) Conns() []*servers.Conn {
	out := make([]*servers.Conn, len(s.proxies))
	for i, p := range s.proxies {
		out[i] = servers.ConnectInProcess(
			servers.Server{Name: p.decl.Name, StartupTimeout: p.decl.StartupTimeout},
			&local{set: s, p: p, session: "in-process " + random()},
		)
	}
	return out
}

// local is one in-process connection to a proxy (servers.InProcess).
type local struct {
	set     *Set
	p       *serverProxy
	session string // the key of its calls in flight (serverProxy.track)
}

func (l *local) Tools() []*mcp.Tool {
	tools := slices.Clone(l.p.view.offered)
	slices.SortFunc(tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	return tools
}

func (l *local) CallTool(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	p := l.p
	p.mu.Lock()
	gone := p.gone
	p.mu.Unlock()
	switch {
	case gone:
		return nil, fmt.Errorf("%w: the server is not running", servers.ErrServer)
	case l.set.closed.Load():
		return nil, fmt.Errorf("%w: the trial's proxies are closed", servers.ErrServer)
	}
	if _, ok := p.view.real[name]; !ok {
		// What the SDK's server answers.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	ctx, done := p.track(ctx, l.session)
	defer done()
	return p.call(ctx, name, args)
}

func (l *local) Implementation() string {
	impl := l.p.implementation()
	return strings.TrimSpace(impl.Name + " " + impl.Version)
}

func (l *local) ProtocolVersion() string { return l.p.conn.ProtocolVersion() }

func (l *local) Instructions() string { return l.p.conn.Instructions() }

func (l *local) Close() error {
	l.p.cancel(l.session, false)
	return nil
}

// implementation is the name and version the proxy reports to its
// clients: the server's own.
func (p *serverProxy) implementation() *mcp.Implementation {
	name, version, _ := strings.Cut(p.conn.Implementation, " ")
	if name == "" {
		name = p.decl.Name
	}
	return &mcp.Implementation{Name: name, Version: version}
}
