package desktop

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/servers"
)

// front is what a desktop app's managed settings name as its MCP servers:
// one streamable-HTTP endpoint per server of the variant, on the loopback,
// at an address that stays the same for the whole session. A desktop app
// reads its settings when it starts, and restarting it costs seconds to
// minutes, while MST's proxies are new for every trial; so each trial
// attaches its proxies behind the front, and the front hands the app's
// tool listings and calls to them. Between trials a call gets an error
// result and a listing the tools last seen.
type front struct {
	ln     net.Listener
	srv    *http.Server
	token  string
	names  []string
	paths  map[string]string // server name → path
	logger *slog.Logger

	mu     sync.Mutex
	conns  map[string]*servers.Conn // the attached trial's proxies
	listed map[string][]*mcp.Tool   // the tools each server offered at its last attach
}

// newFront serves endpoints for the named servers.
func newFront(names []string, logger *slog.Logger) (*front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the desktop app's MCP front: %w", err)
	}
	f := &front{ln: ln, token: randomHex(), names: names, paths: map[string]string{}, logger: logger,
		conns: map[string]*servers.Conn{}, listed: map[string][]*mcp.Tool{}}
	mux := http.NewServeMux()
	for i, name := range names {
		path := fmt.Sprintf("/mcp/%d", i)
		f.paths[name] = path
		srv := f.server(name)
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Logger: logger})
		mux.Handle(path, f.guard(h))
	}
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	go f.srv.Serve(ln)
	return f, nil
}

func randomHex() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// guard answers 401 to a request without the front's token: only the app
// MST configured may call the variant's tools.
func (f *front) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(f.token)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// server is the MCP server the app sees for one of the variant's servers.
// It has no tools of its own: listing and calling go to the attached
// proxy.
func (f *front) server(name string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "mst"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		Logger:       f.logger,
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				f.mu.Lock()
				tools := f.listed[name]
				f.mu.Unlock()
				if tools == nil {
					tools = []*mcp.Tool{}
				}
				return &mcp.ListToolsResult{Tools: tools}, nil
			case "tools/call":
				r, ok := req.(*mcp.CallToolRequest)
				if !ok || r.Params == nil {
					return next(ctx, method, req)
				}
				f.mu.Lock()
				conn := f.conns[name]
				f.mu.Unlock()
				if conn == nil {
					return errorResult(fmt.Sprintf("server %s is not available: no MST trial is running", name)), nil
				}
				res, err := conn.CallRaw(ctx, r.Params.Name, r.Params.Arguments)
				if err != nil {
					// The proxy behind failed (its server exited): the app
					// gets an error result, as from a tool that failed,
					// and the proxy's record says what happened.
					return errorResult(err.Error()), nil
				}
				return res, nil
			}
			return next(ctx, method, req)
		}
	})
	return srv
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// endpoints are the servers as the app's settings name them.
func (f *front) endpoints() []servers.Server {
	out := make([]servers.Server, len(f.names))
	for i, name := range f.names {
		out[i] = servers.Server{
			Name:    name,
			URL:     "http://" + f.ln.Addr().String() + f.paths[name],
			Headers: map[string]string{"Authorization": "Bearer " + f.token},
		}
	}
	return out
}

// attach puts a trial's proxies behind the front (connecting to each) and
// reports whether any server's tool list differs from the last attach's
// (the app must then be restarted to see the new list).
func (f *front) attach(ctx context.Context, proxies []servers.Server) (changed bool, err error) {
	conns := map[string]*servers.Conn{}
	for _, p := range proxies {
		c, err := servers.Connect(ctx, p)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return false, err
		}
		conns[p.Name] = c
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, c := range conns {
		if !sameTools(f.listed[name], c.Listed) {
			changed = true
		}
		f.listed[name] = c.Listed
		f.conns[name] = c
	}
	return changed, nil
}

// toolServer returns the server that offers tool, as the app may name it
// (its own name, or SERVER__TOOL when two servers share one).
func (f *front) toolServer(tool string) (server, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.names {
		for _, t := range f.listed[s] {
			if t.Name == tool {
				return s, t.Name
			}
		}
	}
	for _, s := range f.names {
		for _, t := range f.listed[s] {
			if s+"__"+t.Name == tool {
				return s, t.Name
			}
		}
	}
	return "", tool
}

// detach ends the trial's connections to its proxies.
func (f *front) detach() {
	f.mu.Lock()
	conns := f.conns
	f.conns = map[string]*servers.Conn{}
	f.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (f *front) close() error {
	f.detach()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		return f.srv.Close()
	}
	return nil
}

func sameTools(a, b []*mcp.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description {
			return false
		}
	}
	return true
}
