package servers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/servers"
)

// connect connects to s and closes the connection when the test ends.
func connect(t *testing.T, s servers.Server) *servers.Conn {
	t.Helper()
	c, err := servers.Connect(t.Context(), s)
	if err != nil {
		t.Fatalf("Connect(%s over %s) = %v", s.Name, s.Transport(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func toolNames(tools []servers.Tool) []string {
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestConnectListCall connects to each kind of server, lists its tools and
// calls one with arguments.
func TestConnectListCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) servers.Server
		tool   string
		args   string
		want   string
	}{
		{"testserver over stdio", func(t *testing.T) servers.Server { return testServer(t, "test") },
			"echo", `{"text":"héllo, 世界 🌍"}`, "echo: héllo, 世界 🌍"},
		{"testserver over http", func(t *testing.T) servers.Server { return httpFixture(t, "test", testserver.New(true), nil) },
			"echo", `{"text":"héllo, 世界 🌍"}`, "echo: héllo, 世界 🌍"},
		{"catalog over stdio", func(t *testing.T) servers.Server { return fixture(t, "catalog", "catalog") },
			"echo", `{"text":"x"}`, "echo: x"},
		{"npm server-everything", func(t *testing.T) servers.Server { return peertest.Everything(t) },
			"echo", `{"message":"hi there"}`, "Echo: hi there"},
		{"go-sdk example server", func(t *testing.T) servers.Server { return peertest.GoEverything(t) },
			"greet", `{"name":"Ada"}`, "Ada"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.server(t)
			c := connect(t, s)
			if c.Implementation == "" {
				t.Errorf("Connect(%s).Implementation is empty, want the server's name and version", s.Name)
			}
			if !slices.Contains(toolNames(c.Tools), tc.tool) {
				t.Fatalf("Connect(%s).Tools = %q, want %s among them", s.Name, toolNames(c.Tools), tc.tool)
			}
			for _, tool := range c.Tools {
				var schema map[string]any
				if tool.Server != s.Name || json.Unmarshal(tool.InputSchema, &schema) != nil || schema["type"] != "object" {
					t.Errorf("Connect(%s) tool %q: server %q, input schema %s; want server %q and an object schema", s.Name, tool.Name, tool.Server, tool.InputSchema, s.Name)
				}
			}
			res, err := c.Call(t.Context(), tc.tool, json.RawMessage(tc.args))
			if err != nil || res.IsError || !strings.Contains(res.Text, tc.want) {
				t.Errorf("Call(%s, %s) = %+v, %v; want a result containing %q", tc.tool, tc.args, res, err, tc.want)
			}
			// The same server offers the same tools on a second connection.
			if again := connect(t, s); servers.ToolsHash(again.Tools) != servers.ToolsHash(c.Tools) {
				t.Errorf("ToolsHash differs between two connections to %s: %q, then %q", s.Name, toolNames(c.Tools), toolNames(again.Tools))
			}
		})
	}
}

// TestCallErrorResult checks that a tool's error result is a result marked
// IsError, not a Go error: the model sees it, and the trial goes on.
func TestCallErrorResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) servers.Server
		tool   string
		args   string
		want   string
	}{
		{"fixture isError over stdio", func(t *testing.T) servers.Server { return fixture(t, "catalog", "catalog") },
			"fail", `{}`, "the database is locked"},
		{"fixture isError over http", func(t *testing.T) servers.Server { return httpFixture(t, "catalog", catalogServer(nil), nil) },
			"fail", `{}`, "the database is locked"},
		{"arguments the schema refuses", func(t *testing.T) servers.Server { return testServer(t, "test") },
			"echo", `{"text":42}`, "text"},
		{"npm server-everything thrown error", func(t *testing.T) servers.Server { return peertest.Everything(t) },
			"get-resource-reference", `{"resourceId":-1}`, "Invalid resourceId"},
		{"a tool the server does not offer", func(t *testing.T) servers.Server { return testServer(t, "test") },
			"no-such-tool", `{}`, `server test offers no tool "no-such-tool"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := connect(t, tc.server(t))
			res, err := c.Call(t.Context(), tc.tool, json.RawMessage(tc.args))
			if err != nil || !res.IsError || !strings.Contains(res.Text, tc.want) {
				t.Errorf("Call(%s, %s) = %+v, %v; want an error result containing %q", tc.tool, tc.args, res, err, tc.want)
			}
		})
	}
}

// TestCatalog lists a server of 49 tools in pages of 7 (plain and annotated
// tools, 128-byte, over-long, Unicode and spaced names) over each transport
// and protocol version, and calls every tool by the name it was listed
// under.
func TestCatalog(t *testing.T) {
	t.Parallel()
	var want []servers.Tool
	for _, tool := range catalogTools() {
		schema, _ := json.Marshal(tool.InputSchema)
		want = append(want, servers.Tool{Server: "catalog", Name: tool.Name, Description: tool.Description, InputSchema: schema})
	}
	// The go-sdk server lists its tools sorted by name.
	slices.SortFunc(want, func(a, b servers.Tool) int { return strings.Compare(a.Name, b.Name) })
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) servers.Server
	}{
		{"stdio", func(t *testing.T) servers.Server { return fixture(t, "catalog", "catalog") }},
		{"http", func(t *testing.T) servers.Server { return httpFixture(t, "catalog", catalogServer(nil), nil) }},
		{"stdio, protocol 2024-11-05", func(t *testing.T) servers.Server { return fixture(t, "catalog", "catalog-2024-11-05") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := connect(t, tc.server(t))
			if diff := cmp.Diff(want, c.Tools, cmp.Transformer("json", func(m json.RawMessage) any {
				var v any
				json.Unmarshal(m, &v)
				return v
			})); diff != "" {
				t.Fatalf("Connect(catalog of %d tools).Tools differs (-want +got):\n%s", len(want), diff)
			}
			for _, tool := range c.Tools {
				if tool.Name == "fail" || tool.Name == "env" {
					continue
				}
				res, err := c.Call(t.Context(), tool.Name, json.RawMessage(`{"text":"ping"}`))
				if wantText := tool.Name + ": ping"; err != nil || res.IsError || res.Text != wantText {
					t.Errorf("Call(%q) = %+v, %v; want %q", tool.Name, res, err, wantText)
				}
			}
		})
	}
}

// TestLegacyServer talks to a hand-written server that only knows protocol
// version 2024-11-05 and lists its tools unsorted.
func TestLegacyServer(t *testing.T) {
	t.Parallel()
	c := connect(t, fixture(t, "legacy", "legacy"))
	if got, want := toolNames(c.Tools), []string{"zeta", "methods"}; !slices.Equal(got, want) {
		t.Errorf("Connect(legacy).Tools = %q, want %q (the server's order)", got, want)
	}
	if c.Implementation != "legacy 2024.11" {
		t.Errorf("Connect(legacy).Implementation = %q, want %q", c.Implementation, "legacy 2024.11")
	}
	res, err := c.Call(t.Context(), "methods", nil)
	if err != nil || res.IsError {
		t.Fatalf("Call(methods) = %+v, %v; want a result", res, err)
	}
	// The handshake of that version: initialize, then the initialized
	// notification, before any other request.
	methods := strings.Fields(res.Text)
	init, initialized, list := slices.Index(methods, "initialize"), slices.Index(methods, "notifications/initialized"), slices.Index(methods, "tools/list")
	if init < 0 || !(init < initialized && initialized < list) || methods[len(methods)-1] != "tools/call" {
		t.Errorf("legacy server was sent %q, want initialize, notifications/initialized, tools/list, tools/call in that order", methods)
	}
}

// TestConnectFailures checks that each way a server can fail to come up is
// an error that names the server and says what went wrong, and that Close
// is safe on what a failed Connect returns.
func TestConnectFailures(t *testing.T) {
	t.Parallel()
	refused := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr + "/mcp"
	}
	for _, tc := range []struct {
		name      string
		server    func(t *testing.T) servers.Server
		want      []string
		errServer bool // the error wraps ErrServer (the server's fault, not the config's)
	}{
		{"exits at once",
			func(t *testing.T) servers.Server { return testServer(t, "db", "--fail-start") },
			[]string{"server db", "the server printed", "testserver: cannot open the database at /nonexistent/db.sqlite"}, true},
		{"stops reading after one request",
			func(t *testing.T) servers.Server { return fixture(t, "hangup", "hangup") },
			[]string{"server hangup", "the server printed", "hangup: lost the connection to the database"}, true},
		{"lists no tools",
			func(t *testing.T) servers.Server { return testServer(t, "empty", "--no-tools") },
			[]string{"server empty", "lists no tools"}, true},
		{"command does not exist",
			func(t *testing.T) servers.Server {
				return servers.Server{Name: "ghost", Command: t.TempDir() + "/no-such-server"}
			},
			[]string{"server ghost", "cannot start", "no-such-server", "check servers.ghost.command"}, true},
		{"command not on PATH",
			func(t *testing.T) servers.Server { return servers.Server{Name: "ghost", Command: "mst-no-such-server"} },
			[]string{"server ghost", "cannot start", "mst-no-such-server", "check servers.ghost.command"}, true},
		{"neither command nor url",
			func(t *testing.T) servers.Server { return servers.Server{Name: "blank"} },
			[]string{"server blank", "neither command nor url"}, false},
		{"url refuses connections",
			func(t *testing.T) servers.Server { return servers.Server{Name: "down", URL: refused(t)} },
			[]string{"server down", "connection refused"}, true},
		{"url is not an MCP endpoint",
			func(t *testing.T) servers.Server {
				s := httpFixture(t, "lost", testserver.New(true), func(http.Handler) http.Handler { return http.NotFoundHandler() })
				return s
			},
			[]string{"server lost", "Not Found"}, true},
		{"server refuses the credentials",
			func(t *testing.T) servers.Server {
				s := httpFixture(t, "guarded", testserver.New(true), requireHeader("Authorization", "Bearer right"))
				s.Headers = map[string]string{"Authorization": "Bearer wrong"}
				return s
			},
			[]string{"server guarded", "Unauthorized"}, true},
		{"header name is not valid",
			func(t *testing.T) servers.Server {
				s := httpFixture(t, "badheader", testserver.New(true), nil)
				s.Headers = map[string]string{"X Api Key": "1"}
				return s
			},
			[]string{"server badheader", `"X Api Key"`, "servers.badheader.headers"}, false},
		{"header value is not valid",
			func(t *testing.T) servers.Server {
				s := httpFixture(t, "badheader", testserver.New(true), nil)
				s.Headers = map[string]string{"X-Api-Key": "line\nbreak"}
				return s
			},
			[]string{"server badheader", `"X-Api-Key"`, "servers.badheader.headers"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := servers.Connect(t.Context(), tc.server(t))
			if c != nil || err == nil {
				t.Fatalf("Connect = %v, %v; want an error", c, err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Connect = %q, want it to contain %q", err, want)
				}
			}
			if got := errors.Is(err, servers.ErrServer); got != tc.errServer {
				t.Errorf("errors.Is(Connect = %q, ErrServer) = %v, want %v", err, got, tc.errServer)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close after a failed Connect = %v, want nil", err)
			}
		})
	}
}

// requireHeader answers 401 to requests without header key set to value.
func requireHeader(key, value string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(key) != value {
				http.Error(w, "missing credentials", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestHeadersReachEveryRequest checks that the declared headers go with
// every request of a session, not only the first.
func TestHeadersReachEveryRequest(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen []string
	)
	s := httpFixture(t, "guarded", testserver.New(true), func(next http.Handler) http.Handler {
		return requireHeader("Authorization", "Bearer right")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Method+" "+r.Header.Get("X-Tenant"))
			mu.Unlock()
			next.ServeHTTP(w, r)
		}))
	})
	s.Headers = map[string]string{"Authorization": "Bearer right", "X-Tenant": "acme"}
	c, err := servers.Connect(t.Context(), s)
	if err != nil {
		t.Fatalf("Connect(with the right headers) = %v", err)
	}
	if res, err := c.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`)); err != nil || res.IsError {
		t.Errorf("Call(echo) = %+v, %v; want a result", res, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 3 || !slices.Contains(seen, "DELETE acme") {
		t.Errorf("requests the server saw = %q, want initialize, tools/list, tools/call and the closing DELETE, each with X-Tenant acme", seen)
	}
	for _, r := range seen {
		if !strings.HasSuffix(r, " acme") {
			t.Errorf("request %q reached the server without the declared X-Tenant header", r)
		}
	}
}

// TestStartupTimeout checks that a server that never answers is given up
// on after its startup timeout, that the error says so and quotes it, and
// that its process is gone when Connect returns, even when it ignores the
// end of its input and SIGTERM.
func TestStartupTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		server  func(t *testing.T) servers.Server
		printed string
	}{
		{"reads and never answers", func(t *testing.T) servers.Server { return testServer(t, "slow", "--hang") }, "warming up a very slow cache"},
		{"ignores stdin and SIGTERM", func(t *testing.T) servers.Server { return fixture(t, "slow", "stubborn") }, "stubborn: ignoring stdin and SIGTERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, pid := withPIDFile(t, tc.server(t))
			s.StartupTimeout = time.Second
			c, err := servers.Connect(t.Context(), s)
			if err == nil {
				c.Close()
				t.Fatal("Connect(a server that never answers) = nil error")
			}
			for _, want := range []string{"server slow", "no answer within 1s", "servers.slow.startupTimeout", tc.printed} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Connect(a server that never answers) = %q, want it to contain %q", err, want)
				}
			}
			if !errors.Is(err, servers.ErrServer) {
				t.Errorf("errors.Is(Connect = %q, ErrServer) = false, want true", err)
			}
			if p := pid(); !processGone(p) {
				t.Errorf("server process %d still exists after Connect returned", p)
			}
		})
	}
}

// TestOverrides checks a variant's tool overrides against the test
// server's tools (echo, sleep, crash and others).
func TestOverrides(t *testing.T) {
	t.Parallel()
	plain := connect(t, testServer(t, "test"))
	short, empty := "Repeat it.", ""
	hideAll := map[string]servers.ToolOverride{}
	for _, tool := range plain.Tools {
		hideAll[tool.Name] = servers.ToolOverride{Hidden: true}
	}
	for _, tc := range []struct {
		name      string
		overrides map[string]servers.ToolOverride
		wantErr   []string
	}{
		{"description", map[string]servers.ToolOverride{"echo": {Description: &short}}, nil},
		{"empty description", map[string]servers.ToolOverride{"echo": {Description: &empty}}, nil},
		{"hidden", map[string]servers.ToolOverride{"crash": {Hidden: true}}, nil},
		{"hidden and described", map[string]servers.ToolOverride{"crash": {Hidden: true}, "sleep": {Hidden: true}, "echo": {Description: &short}}, nil},
		{"unknown tools", map[string]servers.ToolOverride{"ecko": {Hidden: true}, "missing": {Description: &short}},
			[]string{"server test", `"ecko"`, `"missing"`, "it has: " + strings.Join(toolNames(plain.Tools), ", "), "tools.test"}},
		{"every tool hidden", hideAll, []string{"server test", "hides every tool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := testServer(t, "test")
			s.Tools = tc.overrides
			c, err := servers.Connect(t.Context(), s)
			if tc.wantErr != nil {
				if err == nil {
					c.Close()
					t.Fatalf("Connect(overrides %v) = nil error, want one", tc.overrides)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Connect(overrides %v) = %q, want it to contain %q", tc.overrides, err, want)
					}
				}
				if errors.Is(err, servers.ErrServer) {
					t.Errorf("errors.Is(Connect = %q, ErrServer) = true, want false: the variant is wrong, not the server", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Connect(overrides %v) = %v", tc.overrides, err)
			}
			t.Cleanup(func() { c.Close() })
			var want []servers.Tool
			for _, tool := range plain.Tools {
				o := tc.overrides[tool.Name]
				if o.Hidden {
					continue
				}
				if o.Description != nil {
					tool.Description = *o.Description
				}
				want = append(want, tool)
			}
			if diff := cmp.Diff(want, c.Tools); diff != "" {
				t.Errorf("Connect(overrides %v).Tools differs (-want +got):\n%s", tc.overrides, diff)
			}
			if servers.ToolsHash(c.Tools) == servers.ToolsHash(plain.Tools) {
				t.Errorf("ToolsHash(with overrides %v) = ToolsHash(without), want them to differ", tc.overrides)
			}
			for name, o := range tc.overrides {
				if !o.Hidden {
					continue
				}
				res, err := c.Call(t.Context(), name, json.RawMessage(`{}`))
				if err != nil || !res.IsError || !strings.Contains(res.Text, name) {
					t.Errorf("Call(hidden tool %s) = %+v, %v; want an error result naming it", name, res, err)
				}
			}
			// Had the hidden crash tool reached the server, it would have
			// exited.
			if res, err := c.Call(t.Context(), "echo", json.RawMessage(`{"text":"still here"}`)); err != nil || res.Text != "echo: still here" {
				t.Errorf("Call(echo) after the hidden calls = %+v, %v; want echo: still here", res, err)
			}
		})
	}
}

// TestConcurrentCalls makes many calls at once on one connection; each
// gets its own answer.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) servers.Server
	}{
		{"stdio", func(t *testing.T) servers.Server { return testServer(t, "test") }},
		{"http", func(t *testing.T) servers.Server { return httpFixture(t, "test", testserver.New(true), nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := connect(t, tc.server(t))
			const n = 64
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					text := fmt.Sprintf("call %d", i)
					res, err := c.Call(t.Context(), "echo", json.RawMessage(fmt.Sprintf(`{"text":%q}`, text)))
					if err != nil || res.Text != "echo: "+text {
						errs[i] = fmt.Errorf("Call(echo %q) = %+v, %v; want echo: %s", text, res, err, text)
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Errorf("%d concurrent calls on one connection:\n%v", n, err)
			}
		})
	}
}

// TestCallWhenServerExits checks that a call during which the server
// exits is an error that wraps ErrServer and quotes what the server
// printed.
func TestCallWhenServerExits(t *testing.T) {
	t.Parallel()
	c := connect(t, testServer(t, "test"))
	_, err := c.Call(t.Context(), "crash", json.RawMessage(`{"code":7}`))
	if err == nil || !errors.Is(err, servers.ErrServer) {
		t.Fatalf("Call(crash) = %v, want an error wrapping ErrServer", err)
	}
	for _, want := range []string{"server test", "tool crash", "testserver: crashing as asked"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Call(crash) = %q, want it to contain %q", err, want)
		}
	}
	if _, err := c.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`)); !errors.Is(err, servers.ErrServer) {
		t.Errorf("Call(echo) after the server exited = %v, want an error wrapping ErrServer", err)
	}
}

// TestCallCancelled checks that a call whose context ends returns the
// context's error, not ErrServer, and leaves the connection usable.
func TestCallCancelled(t *testing.T) {
	t.Parallel()
	c := connect(t, testServer(t, "test"))
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Call(ctx, "sleep", json.RawMessage(`{"seconds":600}`))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, servers.ErrServer) {
		t.Errorf("Call(sleep 600s, ctx ending after 100ms) = %v, want context.DeadlineExceeded", err)
	}
	if res, err := c.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`)); err != nil || res.Text != "echo: x" {
		t.Errorf("Call(echo) after a cancelled call = %+v, %v; want echo: x", res, err)
	}
}

// TestServerEnvironment checks that a stdio server gets the declared
// environment and a minimal one from MST, not all of MST's.
func TestServerEnvironment(t *testing.T) {
	t.Parallel()
	s := fixture(t, "catalog", "catalog")
	s.Env["MST_GREETING"] = "grüezi"
	c := connect(t, s)
	for name, want := range map[string]string{"MST_GREETING": "grüezi", secretEnv: ""} {
		res, err := c.Call(t.Context(), "env", json.RawMessage(fmt.Sprintf(`{"text":%q}`, name)))
		if err != nil || res.Text != name+"="+want {
			t.Errorf("Call(env %s) = %+v, %v; want %s=%s", name, res, err, name, want)
		}
	}
}

// TestCloseTwice checks that closing a connection twice is safe.
func TestCloseTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) servers.Server
	}{
		{"stdio", func(t *testing.T) servers.Server { return testServer(t, "test") }},
		{"http", func(t *testing.T) servers.Server { return httpFixture(t, "test", testserver.New(true), nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := servers.Connect(t.Context(), tc.server(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close = %v, want nil", err)
			}
			c.Close()
			if _, err := c.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`)); err == nil {
				t.Errorf("Call after Close = nil error, want one")
			}
		})
	}
}

// TestCloseStopsServer checks that Close stops a stdio server in steps
// (closing its stdin, SIGTERM, SIGKILL), whichever step it needs, and
// returns nil: the server is gone when Close returns.
func TestCloseStopsServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) servers.Server
	}{
		{"exits when stdin closes", func(t *testing.T) servers.Server { return testServer(t, "test") }},
		{"needs SIGTERM", func(t *testing.T) servers.Server { return fixture(t, "catalog", "lingering") }},
		{"needs SIGKILL", func(t *testing.T) servers.Server { return fixture(t, "catalog", "deaf") }},
		{"npm server-everything", func(t *testing.T) servers.Server { return peertest.Everything(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, pid := withPIDFile(t, tc.server(t))
			c, err := servers.Connect(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close = %v, want nil", err)
			}
			if p := pid(); !processGone(p) {
				t.Errorf("server process %d still exists after Close returned", p)
			}
		})
	}
}
