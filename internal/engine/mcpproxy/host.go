package mcpproxy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// Host serves the proxies of every open Set over streamable HTTP on one
// loopback port. Each proxy has a path and a bearer token of its own, made
// from 128 random bits each; a request with any other path or token gets
// 404. A Host is safe for concurrent use.
type Host struct {
	ln  net.Listener
	srv *http.Server

	mu     sync.Mutex
	routes map[string]*route // path → route
}

type route struct {
	token   string
	handler http.Handler
	proxy   *serverProxy
}

// NewHost listens on a free loopback port.
func NewHost() (*Host, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting MST's MCP proxy: %w", err)
	}
	h := &Host{ln: ln, routes: map[string]*route{}}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: nil}
	go h.srv.Serve(ln)
	return h, nil
}

// Addr is the host's address ("127.0.0.1:PORT").
func (h *Host) Addr() string { return h.ln.Addr().String() }

// Close stops serving. Sets still open stop answering; their backends are
// closed by their own Close.
func (h *Host) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.srv.Shutdown(ctx)
	if err != nil {
		h.srv.Close()
	}
	return err
}

// ServeHTTP routes a request to its proxy.
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	rt := h.routes[r.URL.Path]
	h.mu.Unlock()
	if rt == nil || !bearer(r, rt.token) {
		http.NotFound(w, r)
		return
	}
	rt.proxy.mu.Lock()
	gone := rt.proxy.gone
	rt.proxy.mu.Unlock()
	if gone {
		// The server "went away" (a disconnect fault): so does its
		// endpoint, as a real server's would.
		http.Error(w, "the server is not running", http.StatusServiceUnavailable)
		return
	}
	if r.Method == http.MethodDelete {
		// A client ending its session gives up its calls in flight; the
		// SDK would otherwise hold the DELETE until they end.
		rt.proxy.cancel(r.Header.Get("Mcp-Session-Id"), false)
	}
	rt.handler.ServeHTTP(w, r)
}

func bearer(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

func random() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Options are what a Set needs beyond its servers.
type Options struct {
	// Trial identifies the trial (its key as a string); it seeds which calls
	// faults hit.
	Trial string
	// Acquire, when set, is called before each call that reaches a server
	// and holds a place under the server's call limit until release.
	Acquire func(ctx context.Context, server string) (release func(), err error)
	// Logger receives the SDK's diagnostics; nil discards them.
	Logger *slog.Logger
	// MaxCalls, when above zero, is the most tool calls the trial may make
	// across its servers: a call past it is answered with an error result,
	// not sent to the server and not recorded (client.Definition
	// .ToolCallLimit).
	MaxCalls int
	// Take, when set, may give an open connection to a server (one that
	// no trial has used, such as the readiness check's) in place of
	// starting it; the Set then owns and closes it. nil: start it.
	Take func(servers.Server) *servers.Conn
}

// Set is the proxies of one trial, one per server. Each has two faces: MCP
// endpoints over streamable HTTP (Servers, StdioServers), made the first
// time a client asks for them, and connections in this process (Conns).
type Set struct {
	host    *Host
	proxies []*serverProxy
	rec     *recorder
	budget  *budget // nil: no limit
	once    sync.Once

	// The HTTP face, made by endpoints; paths, tokens and servers are
	// written under host.mu.
	httpOnce sync.Once
	closed   atomic.Bool
	paths    []string
	tokens   []string
	servers  []*mcp.Server // the proxies' MCP servers, for Close
	logger   *slog.Logger
}

// Open connects to every server in list (concurrently, each within its own
// startup timeout) and puts a proxy in front of each. An error, when a
// server cannot be reached or the variant's view of it is wrong, names the
// server; it wraps servers.ErrServer when the server is to blame.
func (h *Host) Open(ctx context.Context, list []servers.Server, o Options) (*Set, error) {
	s := &Set{host: h, rec: &recorder{}}
	if o.MaxCalls > 0 {
		s.budget = &budget{left: o.MaxCalls, max: o.MaxCalls}
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	conns := make([]*servers.Conn, len(list))
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, decl := range list {
		wg.Go(func() {
			raw := decl
			raw.Tools = nil // the proxy applies the variant's view itself
			if o.Take != nil {
				if c := o.Take(raw); c != nil {
					conns[i] = c
					return
				}
			}
			conns[i], errs[i] = servers.Connect(ctx, raw)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range conns {
			c.Close()
		}
		return nil, err
	}
	for i, decl := range list {
		v, err := newView(decl, conns[i].Listed)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		p := &serverProxy{decl: decl, conn: conns[i], view: v, simulate: v.simulated(decl), seed: o.Trial + "\x00" + decl.Name, rec: s.rec, acquire: o.Acquire, budget: s.budget}
		s.proxies = append(s.proxies, p)
	}
	s.logger = logger
	return s, nil
}

// endpoints serves the set's proxies on the host, the first time a client
// needs them: a client that takes the proxies in this process (Conns)
// never pays for the SDK's servers. After Close it makes paths that
// answer 404.
func (s *Set) endpoints() {
	s.httpOnce.Do(func() {
		h := s.host
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, p := range s.proxies {
			path, token := "/mcp/"+random(), random()
			s.paths, s.tokens = append(s.paths, path), append(s.tokens, token)
			if s.closed.Load() {
				continue
			}
			srv := p.mcpServer(s.logger)
			s.servers = append(s.servers, srv)
			handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true, Logger: s.logger})
			h.routes[path] = &route{token: token, handler: handler, proxy: p}
		}
	})
}

// mcpServer is the MCP server the client talks to: the view's tools, each
// handled by the proxy.
func (p *serverProxy) mcpServer(logger *slog.Logger) *mcp.Server {
	srv := mcp.NewServer(p.implementation(), &mcp.ServerOptions{Instructions: p.conn.Instructions(), Logger: logger})
	for _, t := range p.view.offered {
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args json.RawMessage
			if req.Params != nil {
				args = req.Params.Arguments
			}
			sid := ""
			if req.Session != nil {
				sid = req.Session.ID()
			}
			ctx, done := p.track(ctx, sid)
			defer done()
			return p.call(ctx, t.Name, args)
		})
	}
	return srv
}

// Servers are the endpoints the trial's client uses instead of the
// servers, in the same order and under the same names: streamable-HTTP
// servers on the loopback, each with the Authorization header it needs.
func (s *Set) Servers() []servers.Server {
	s.endpoints()
	out := make([]servers.Server, len(s.proxies))
	for i, p := range s.proxies {
		out[i] = servers.Server{
			Name:           p.decl.Name,
			URL:            "http://" + s.host.Addr() + s.paths[i],
			Headers:        map[string]string{"Authorization": "Bearer " + s.tokens[i]},
			StartupTimeout: p.decl.StartupTimeout,
		}
	}
	return out
}

// Offered are the names under which the proxies offer each server's tools
// (a renamed tool under its new name), by server: what a client program
// connected to Servers sees (client.Trial.Tools).
func (s *Set) Offered() map[string][]string {
	out := make(map[string][]string, len(s.proxies))
	for _, p := range s.proxies {
		names := make([]string, len(p.view.offered))
		for i, t := range p.view.offered {
			names[i] = t.Name
		}
		out[p.decl.Name] = names
	}
	return out
}

// Evidence is what the proxies of one trial saw.
type Evidence struct {
	// Servers describe each server as the proxy found it: its own tool list
	// and hash, and what the variant offered of it.
	Servers []transcript.ServerInfo
	// Calls are the tools/call requests the proxies got, in order, under
	// the servers' tool names.
	Calls []transcript.ToolCall
	// InFlight are the calls that had reached a proxy and not yet come
	// back when the evidence was taken (their Started set, nothing else).
	InFlight []transcript.ToolCall
	// ServerFailed, when set, says how a server failed by itself during
	// the trial (it exited, or its connection broke), a failure MST did not
	// inject; Merge then makes the trial errored (server).
	ServerFailed string
}

// Evidence returns what the proxies have seen so far.
func (s *Set) Evidence() Evidence {
	var ev Evidence
	for _, p := range s.proxies {
		info := transcript.ServerInfo{
			Name: p.decl.Name, Transport: p.decl.Transport(), ToolsHash: p.view.offeredHash(),
			Implementation: p.conn.Implementation, ProtocolVersion: p.conn.ProtocolVersion(),
			ServerToolsHash: p.view.hash,
		}
		for _, t := range p.view.offered {
			info.Tools = append(info.Tools, p.view.real[t.Name])
		}
		if len(p.view.renamed) > 0 {
			info.Offered = p.view.renamed
		}
		ev.Servers = append(ev.Servers, info)
	}
	ev.Calls = s.rec.all()
	ev.InFlight = s.rec.inFlight()
	ev.ServerFailed = s.rec.failure()
	return ev
}

// Close stops the proxies' endpoints and closes the connections to the
// servers (stopping stdio servers). It is safe to call more than once.
func (s *Set) Close() error {
	var errs []error
	s.once.Do(func() {
		s.closed.Store(true)
		s.host.mu.Lock()
		for _, path := range s.paths {
			delete(s.host.routes, path)
		}
		srvs := s.servers
		s.host.mu.Unlock()
		for _, p := range s.proxies {
			p.cancel("", true)
		}
		for _, srv := range srvs {
			for ss := range srv.Sessions() {
				ss.Close()
			}
		}
		for _, p := range s.proxies {
			errs = append(errs, p.close())
		}
	})
	return errors.Join(errs...)
}
