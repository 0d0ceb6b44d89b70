package mcpproxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/internal/engine/mcpproxy"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Clean()
	os.Exit(code)
}

// testServer is internal/testkit/testserver as a stdio server named name.
func testServer(t testing.TB, name string, args ...string) servers.Server {
	t.Helper()
	dir, err := testbin.Build(testbin.Options{}, testbin.TestServer)
	if err != nil {
		t.Fatal(err)
	}
	return servers.Server{Name: name, Command: testbin.Path(dir, testbin.TestServer), Args: args}
}

// notesServer is the test server with its note tools, keeping notes in a
// folder of the test's own, which it returns.
func notesServer(t testing.TB, name string, args ...string) (servers.Server, string) {
	dir := t.TempDir()
	return testServer(t, name, append([]string{"--notes", dir}, args...)...), dir
}

func newHost(t testing.TB) *mcpproxy.Host {
	t.Helper()
	h, err := mcpproxy.NewHost()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func open(t testing.TB, h *mcpproxy.Host, trial string, list ...servers.Server) *mcpproxy.Set {
	t.Helper()
	set, err := h.Open(context.Background(), list, mcpproxy.Options{Trial: trial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	return set
}

// connector is a client of the set's proxy for the server at index i.
type connector func(t testing.TB, set *mcpproxy.Set, i int) *servers.Conn

// connectHTTP is a connector as a client in a process of its own reaches
// the proxy: through servers.Connect, over HTTP, with the set's header.
func connectHTTP(t testing.TB, set *mcpproxy.Set, i int) *servers.Conn {
	t.Helper()
	c, err := servers.Connect(context.Background(), set.Servers()[i])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// connectInProcess is a connector as the api client, in the worker's
// process, reaches the proxy: Set.Conns, with no MCP hop.
func connectInProcess(t testing.TB, set *mcpproxy.Set, i int) *servers.Conn {
	t.Helper()
	c := set.Conns()[i]
	t.Cleanup(func() { c.Close() })
	return c
}

// eachFace runs test once on each face of the proxy, in parallel.
func eachFace(t *testing.T, test func(*testing.T, connector)) {
	t.Parallel()
	for _, f := range []struct {
		name    string
		connect connector
	}{{"http", connectHTTP}, {"in-process", connectInProcess}} {
		t.Run(f.name, func(t *testing.T) { test(t, f.connect) })
	}
}

func ptr(s string) *string { return &s }

func call(t *testing.T, c *servers.Conn, tool, args string) servers.CallResult {
	t.Helper()
	res, err := c.Call(context.Background(), tool, json.RawMessage(args))
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	return res
}

func TestToolVariants(t *testing.T) { eachFace(t, testToolVariants) }

func testToolVariants(t *testing.T, connect connector) {
	t.Parallel()
	srv := testServer(t, "tools")
	srv.Tools = map[string]servers.ToolOverride{
		"echo":  {Name: "repeat", Title: ptr("Say it again"), Description: ptr("Say the text back."), Parameters: map[string]string{"text": "What to say back."}},
		"crash": {Hidden: true},
		"fail":  {Description: ptr("Always fails.")},
	}
	set := open(t, newHost(t), "case/v/0", srv)
	c := connect(t, set, 0)

	byName := map[string]*mcp.Tool{}
	for _, tool := range c.Listed {
		byName[tool.Name] = tool
	}
	if _, ok := byName["crash"]; ok {
		t.Error("the hidden tool crash is offered")
	}
	if _, ok := byName["echo"]; ok {
		t.Error("the renamed tool echo is offered under its server name")
	}
	r := byName["repeat"]
	if r == nil {
		t.Fatalf("no tool repeat offered; offered: %v", names(c.Listed))
	}
	if r.Title != "Say it again" || r.Description != "Say the text back." {
		t.Errorf("repeat offered with title %q, description %q", r.Title, r.Description)
	}
	schema, _ := json.Marshal(r.InputSchema)
	if !strings.Contains(string(schema), `"description":"What to say back."`) {
		t.Errorf("repeat's input schema lacks the new parameter description: %s", schema)
	}
	if got := byName["fail"]; got == nil || got.Description != "Always fails." {
		t.Errorf("fail offered as %+v", got)
	}
	if res := call(t, c, "repeat", `{"text":"héllo"}`); res.Text != "echo: héllo" {
		t.Errorf("repeat answered %q; want the server's echo", res.Text)
	}

	ev := set.Evidence()
	if len(ev.Calls) != 1 {
		t.Fatalf("evidence has %d calls, want 1: %+v", len(ev.Calls), ev.Calls)
	}
	got := ev.Calls[0]
	if got.Tool != "echo" || got.OfferedAs != "repeat" || got.Server != "tools" || got.Evidence != transcript.EvidenceServer {
		t.Errorf("the call is recorded as %+v; want tool echo offered as repeat", got)
	}
	if got.Result != "echo: héllo" || string(got.Arguments) != `{"text":"héllo"}` {
		t.Errorf("the call's record: arguments %s, result %q", got.Arguments, got.Result)
	}
	info := ev.Servers[0]
	if info.Offered["echo"] != "repeat" || slices.Contains(info.Tools, "crash") || !slices.Contains(info.Tools, "echo") {
		t.Errorf("server info %+v: want server names, crash hidden, echo offered as repeat", info)
	}
	direct, err := servers.Connect(context.Background(), testServer(t, "tools"))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if info.ServerToolsHash != mcpproxy.ListHash(direct.Listed) {
		t.Error("the recorded server tool hash is not the hash of the server's own list")
	}
	if info.ToolsHash == "" || info.ToolsHash == info.ServerToolsHash {
		t.Errorf("the offered tools hash %q should differ from the server's own", info.ToolsHash)
	}
}

func names(tools []*mcp.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

func TestBadVariants(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	tests := []struct {
		name string
		over map[string]servers.ToolOverride
		want string
	}{
		{"unknown tool", map[string]servers.ToolOverride{"ecko": {Hidden: true}}, `no tool "ecko"`},
		{"unknown parameter", map[string]servers.ToolOverride{"echo": {Parameters: map[string]string{"txt": "x"}}}, `no parameter "txt"`},
		{"two tools under one name", map[string]servers.ToolOverride{"echo": {Name: "fail"}}, `as "fail"`},
		{"invalid name", map[string]servers.ToolOverride{"echo": {Name: "say it"}}, "not a valid MCP tool name"},
		{"every tool hidden", map[string]servers.ToolOverride{"echo": {Hidden: true}, "sleep": {Hidden: true}, "fail": {Hidden: true}, "crash": {Hidden: true}}, "hides every tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testServer(t, "tools")
			srv.Tools = tt.over
			set, err := h.Open(context.Background(), []servers.Server{srv}, mcpproxy.Options{})
			if err == nil {
				set.Close()
				t.Fatal("Open accepted the variant")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "tools") {
				t.Errorf("error %q; want it to say %q and name the server", err, tt.want)
			}
		})
	}
}

func TestEvidenceOfFailures(t *testing.T) { eachFace(t, testEvidenceOfFailures) }

func testEvidenceOfFailures(t *testing.T, connect connector) {
	t.Parallel()
	set := open(t, newHost(t), "k", testServer(t, "tools"))
	c := connect(t, set, 0)
	if res := call(t, c, "fail", `{"reason":"disk full"}`); !res.IsError || res.Text != "fail: disk full" {
		t.Errorf("fail answered %+v", res)
	}
	if _, err := c.Call(context.Background(), "crash", json.RawMessage(`{}`)); err == nil {
		t.Error("a call that crashed the server succeeded")
	}
	ev := set.Evidence()
	if len(ev.Calls) != 2 {
		t.Fatalf("evidence: %+v", ev.Calls)
	}
	if !ev.Calls[0].IsError || ev.Calls[0].Result != "fail: disk full" {
		t.Errorf("the error result is recorded as %+v", ev.Calls[0])
	}
	if ev.Calls[1].Error == "" || !strings.Contains(ev.Calls[1].Error, "crash") {
		t.Errorf("the crash is recorded as %+v; want an error that names the tool", ev.Calls[1])
	}
}

func TestDryRun(t *testing.T) { eachFace(t, testDryRun) }

func testDryRun(t *testing.T, connect connector) {
	t.Parallel()
	h := newHost(t)
	t.Run("declared", func(t *testing.T) {
		srv, dir := notesServer(t, "notes")
		srv.DryRun = servers.DryRunDeclared
		srv.Writes = []string{testserver.WriteNote, testserver.TouchNote}
		srv.Simulated = map[string]servers.SimulatedResult{testserver.TouchNote: {Text: "touched it"}}
		set := open(t, h, "k", srv)
		c := connect(t, set, 0)
		res := call(t, c, testserver.WriteNote, `{"name":"a","text":"hello"}`)
		if res.IsError || !strings.Contains(res.Text, `"bytes":0`) {
			t.Errorf("a simulated write answered %+v; want an instance of the output schema", res)
		}
		if res := call(t, c, testserver.TouchNote, `{"name":"b"}`); res.Text != "touched it" {
			t.Errorf("the configured simulated result is %q", res.Text)
		}
		// delete_note is not declared a write: it reaches the server.
		if res := call(t, c, testserver.DeleteNote, `{"name":"a"}`); !res.IsError {
			t.Errorf("delete_note of a note never written answered %+v", res)
		}
		assertNoNotes(t, dir)
		ev := set.Evidence()
		want := []bool{true, true, false}
		for i, tc := range ev.Calls {
			if tc.Simulated != want[i] {
				t.Errorf("call %d (%s) simulated %v, want %v", i, tc.Tool, tc.Simulated, want[i])
			}
		}
	})
	t.Run("annotated", func(t *testing.T) {
		srv, dir := notesServer(t, "notes")
		srv.DryRun = servers.DryRunAnnotated
		set := open(t, h, "k", srv)
		c := connect(t, set, 0)
		for _, tool := range []string{testserver.WriteNote, testserver.TouchNote, testserver.DeleteNote, "echo"} {
			call(t, c, tool, `{"name":"x","text":"y"}`)
		}
		call(t, c, testserver.ReadNote, `{"name":"x"}`)
		assertNoNotes(t, dir)
		for _, tc := range set.Evidence().Calls {
			if wantSim := tc.Tool != testserver.ReadNote; tc.Simulated != wantSim {
				t.Errorf("%s simulated %v; the annotated dry run simulates every tool not annotated read-only", tc.Tool, tc.Simulated)
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		srv, dir := notesServer(t, "notes")
		srv.Writes = []string{testserver.WriteNote}
		set := open(t, h, "k", srv)
		call(t, connect(t, set, 0), testserver.WriteNote, `{"name":"real","text":"y"}`)
		if _, err := os.Stat(filepath.Join(dir, "real")); err != nil {
			t.Errorf("without a dry run the write did not reach the server: %v", err)
		}
	})
}

func assertNoNotes(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		t.Errorf("a simulated write reached the server: it left %s", entries[0].Name())
	}
}

func TestFaults(t *testing.T) { eachFace(t, testFaults) }

func testFaults(t *testing.T, connect connector) {
	t.Parallel()
	h := newHost(t)
	t.Run("error result, not forwarded", func(t *testing.T) {
		srv, dir := notesServer(t, "notes")
		srv.Faults = []servers.Fault{{Kind: servers.FaultError, Rate: 1, Tools: []string{testserver.WriteNote}, Message: "quota exceeded"}}
		set := open(t, h, "k", srv)
		c := connect(t, set, 0)
		if res := call(t, c, testserver.WriteNote, `{"name":"a","text":"b"}`); !res.IsError || res.Text != "quota exceeded" {
			t.Errorf("the injected error answered %+v", res)
		}
		if res := call(t, c, "echo", `{"text":"b"}`); res.IsError {
			t.Errorf("a tool the fault does not name failed: %+v", res)
		}
		assertNoNotes(t, dir)
		ev := set.Evidence()
		if ev.Calls[0].Injected != servers.FaultError || ev.Calls[1].Injected != "" {
			t.Errorf("injected marks: %q, %q", ev.Calls[0].Injected, ev.Calls[1].Injected)
		}
	})
	t.Run("latency and protocol error", func(t *testing.T) {
		srv := testServer(t, "tools")
		srv.Faults = []servers.Fault{{Kind: servers.FaultLatency, Rate: 1, Delay: 20 * time.Millisecond}, {Kind: servers.FaultProtocol, Rate: 1, AfterCalls: 1}}
		set := open(t, h, "k", srv)
		c := connect(t, set, 0)
		call(t, c, "echo", `{"text":"1"}`)
		if _, err := c.Call(context.Background(), "echo", json.RawMessage(`{"text":"2"}`)); err == nil {
			t.Error("the call after afterCalls got no protocol error")
		}
		ev := set.Evidence()
		if ev.Calls[0].Injected != "latency 20ms" || ev.Calls[1].Injected != "latency 20ms, protocol" || ev.Calls[1].Error == "" {
			t.Errorf("injected marks: %+v", ev.Calls)
		}
	})
	t.Run("disconnect", func(t *testing.T) {
		srv := testServer(t, "tools")
		srv.Faults = []servers.Fault{{Kind: servers.FaultDisconnect, Rate: 1, AfterCalls: 1}}
		set := open(t, h, "k", srv)
		c := connect(t, set, 0)
		call(t, c, "echo", `{"text":"1"}`)
		for i := range 2 {
			if _, err := c.Call(context.Background(), "echo", json.RawMessage(`{"text":"2"}`)); err == nil {
				t.Errorf("call %d after the disconnect succeeded", i+2)
			}
		}
		// Its endpoint is gone too.
		s := set.Servers()[0]
		req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(`{}`))
		req.Header.Set("Authorization", s.Headers["Authorization"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("the endpoint of a disconnected server answers %d", resp.StatusCode)
		}
		for i, tc := range set.Evidence().Calls[1:] {
			if tc.Injected != servers.FaultDisconnect {
				t.Errorf("call %d after the disconnect is marked %q", i+2, tc.Injected)
			}
		}
	})
	t.Run("rate is a function of the trial", func(t *testing.T) {
		srv := testServer(t, "tools")
		srv.Faults = []servers.Fault{{Kind: servers.FaultError, Rate: 0.5}}
		pattern := func(trial string) string {
			set := open(t, h, trial, srv)
			c := connect(t, set, 0)
			var b strings.Builder
			for range 60 {
				if call(t, c, "echo", `{"text":"x"}`).IsError {
					b.WriteByte('x')
				} else {
					b.WriteByte('.')
				}
			}
			return b.String()
		}
		a, again, other := pattern("case-1/v/0"), pattern("case-1/v/0"), pattern("case-2/v/0")
		if a != again {
			t.Errorf("the same trial saw different faults:\n%s\n%s", a, again)
		}
		if a == other {
			t.Errorf("two trials saw the same faults: %s", a)
		}
		if n := strings.Count(a, "x"); n < 15 || n > 45 {
			t.Errorf("a rate of 0.5 hit %d of 60 calls: %s", n, a)
		}
	})
}

func TestEndpointsNeedTheirToken(t *testing.T) {
	t.Parallel()
	set := open(t, newHost(t), "k", testServer(t, "tools"))
	s := set.Servers()[0]
	if s.Command != "" || len(s.Env) != 0 || !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("the proxy endpoint is %+v; want a loopback URL and nothing else of the server", s)
	}
	for name, mutate := range map[string]func(*servers.Server){
		"no token":    func(s *servers.Server) { s.Headers = nil },
		"wrong token": func(s *servers.Server) { s.Headers = map[string]string{"Authorization": "Bearer 0000"} },
		"wrong path":  func(s *servers.Server) { s.URL += "x" },
	} {
		bad := s
		mutate(&bad)
		bad.StartupTimeout = 5 * time.Second
		if c, err := servers.Connect(context.Background(), bad); err == nil {
			c.Close()
			t.Errorf("%s: the proxy let a client in", name)
		}
	}
}

func TestOlderProtocolAndManyTools(t *testing.T) { eachFace(t, testOlderProtocolAndManyTools) }

func testOlderProtocolAndManyTools(t *testing.T, connect connector) {
	t.Parallel()
	set := open(t, newHost(t), "k", testServer(t, "old", "--protocol", "2024-11-05", "--many"))
	c := connect(t, set, 0)
	if n := len(c.Listed); n < testserver.ManyTools {
		t.Errorf("the proxy offers %d tools of the server's %d+", n, testserver.ManyTools)
	}
	if res := call(t, c, testserver.UnicodeTool, `{"text":"Zürich"}`); res.Text != testserver.UnicodeTool+": Zürich" {
		t.Errorf("the non-ASCII tool answered %q", res.Text)
	}
	if v := set.Evidence().Servers[0].ProtocolVersion; v != "2024-11-05" {
		t.Errorf("recorded protocol version %q; the server speaks only 2024-11-05", v)
	}
}

func TestServerFailsToStart(t *testing.T) {
	t.Parallel()
	_, err := newHost(t).Open(context.Background(), []servers.Server{testServer(t, "db", "--fail-start")}, mcpproxy.Options{})
	if err == nil || !strings.Contains(err.Error(), "db") || !strings.Contains(err.Error(), "cannot open the database") {
		t.Errorf("error %v; want the server's name and what it printed", err)
	}
}

func TestMaxCalls(t *testing.T) { eachFace(t, testMaxCalls) }

func testMaxCalls(t *testing.T, connect connector) {
	t.Parallel()
	set, err := newHost(t).Open(context.Background(), []servers.Server{testServer(t, "a"), testServer(t, "b")}, mcpproxy.Options{MaxCalls: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	a, b := connect(t, set, 0), connect(t, set, 1)
	call(t, a, "echo", `{"text":"1"}`)
	call(t, b, "echo", `{"text":"2"}`)
	// The budget is the trial's, across its servers.
	for _, c := range []*servers.Conn{a, b} {
		if res := call(t, c, "echo", `{"text":"3"}`); !res.IsError || !strings.Contains(res.Text, "at most 2 tool calls") {
			t.Errorf("a call past the limit answered %+v", res)
		}
	}
	if n := len(set.Evidence().Calls); n != 2 {
		t.Errorf("%d calls recorded; the calls past the limit never reached a server", n)
	}
}
