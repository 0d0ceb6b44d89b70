// Package clientpython_test tests the program plugin mst-plugin-acmepy,
// whose client acmepy/client/first-tool speaks MCP over streamable HTTP:
// it starts the program, speaks mst.plugin/v1 with it by hand (one JSON
// line a request), and points its trials at MCP servers made with the
// official Go SDK in this process.
package clientpython_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/client/clienttest"
	"github.com/mst-eval/mst/internal/testkit/testneed"
	"github.com/mst-eval/mst/plugin"
)

const token = "Bearer s3cret"

// needPython returns python3's path; it skips without python3, except
// under CI, where it fails.
func needPython(t *testing.T) string {
	t.Helper()
	return testneed.Program(t, "python3", "the example program plugin needs it (apt-get install python3)")
}

// program is the plugin, started by hand.
type program struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *strings.Builder
	nextID int64
}

func startProgram(t *testing.T) *program {
	t.Helper()
	python := needPython(t)
	cmd := exec.Command(python, "mst-plugin-acmepy")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C"} // a plain environment, as MST gives; C locale on purpose
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &program{cmd: cmd, stdin: stdin, lines: make(chan string, 16), stderr: &strings.Builder{}}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		stdin.Close()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("the program did not exit within 5s of its stdin closing")
		}
	})
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *int64          `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends one request and returns its response; it fails after within.
func (p *program) call(t *testing.T, method string, params any, within time.Duration) rpcResponse {
	t.Helper()
	p.nextID++
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.nextID, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		t.Fatalf("writing %s: %v", method, err)
	}
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("the program ended before answering %s; stderr: %s", method, p.stderr)
		}
		var r rpcResponse
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.JSONRPC != "2.0" || r.ID == nil || *r.ID != p.nextID {
			t.Fatalf("%s: the program wrote %q, want a JSON-RPC response with id %d (%v)", method, l, p.nextID, err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("%s: no answer within %v; stderr: %s", method, within, p.stderr)
	}
	return rpcResponse{}
}

// runResult is client/run's result.
type runResult struct {
	Answer    string          `json:"answer"`
	ToolCalls json.RawMessage `json:"toolCalls"`
	Usage     *struct {
		InputTokens, OutputTokens, ModelCalls int
	} `json:"usage"`
	Outcome *struct {
		Status string `json:"status"`
		Detail string `json:"detail"`
	} `json:"outcome"`
	Telemetry map[string]any `json:"telemetry"`
}

type server struct {
	Name    string            `json:"name"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// run runs one trial of first-tool and returns its result.
func (p *program) run(t *testing.T, prompt string, options map[string]any, timeoutMs int, srvs ...server) runResult {
	t.Helper()
	if options == nil {
		options = map[string]any{}
	}
	if srvs == nil {
		srvs = []server{}
	}
	r := p.call(t, "client/run", map[string]any{
		"name": "first-tool", "variant": "v", "model": "offline", "options": options, "timeoutMs": timeoutMs,
		"credentials": map[string]string{},
		"trial":       map[string]any{"case": "oslo", "variant": "v", "trial": 0, "prompt": prompt, "metadata": map[string]any{}},
		"servers":     srvs,
	}, time.Duration(timeoutMs)*time.Millisecond+5*time.Second)
	if r.Error != nil {
		t.Fatalf("client/run(%q) error %d: %s", prompt, r.Error.Code, r.Error.Message)
	}
	var res runResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("client/run(%q) result %s: %v", prompt, r.Result, err)
	}
	return res
}

// call is one tool call an MCP server got.
type call struct {
	Tool string
	Args map[string]any
}

// mcpServer is an MCP server over streamable HTTP that wants token and
// records the tool calls and HTTP requests it gets.
type mcpServer struct {
	url string

	mu       sync.Mutex
	calls    []call
	requests []string        // "METHOD session-id-or-empty"
	types    map[string]bool // the Content-Types of its answers to POSTs
}

func (s *mcpServer) record(c call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *mcpServer) taken() ([]call, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, r := s.calls, s.requests
	s.calls, s.requests = nil, nil
	return c, r
}

type forecastIn struct {
	City string `json:"city" jsonschema:"the city"`
	Days int    `json:"days,omitempty" jsonschema:"how many days (optional)"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// newMCPServer serves the tools named (get_forecast, add) over
// streamable HTTP, answering with JSON rather than SSE when jsonResponse.
func newMCPServer(t *testing.T, jsonResponse bool, tools ...string) *mcpServer {
	t.Helper()
	s := &mcpServer{types: map[string]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
	for _, name := range tools {
		switch name {
		case "get_forecast":
			mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "The weather forecast for a city."},
				func(ctx context.Context, req *mcp.CallToolRequest, in forecastIn) (*mcp.CallToolResult, any, error) {
					var args map[string]any
					json.Unmarshal(req.Params.Arguments, &args)
					s.record(call{name, args})
					if in.City == "Atlantis" {
						return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no forecast for Atlantis"}}}, nil, nil
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.City + ": rain, 7°C"}}}, nil, nil
				})
		case "add":
			mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "Adds two numbers."},
				func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
					var args map[string]any
					json.Unmarshal(req.Params.Arguments, &args)
					s.record(call{name, args})
					return &mcp.CallToolResult{Content: []mcp.Content{
						&mcp.TextContent{Text: fmt.Sprint(in.A + in.B)},
						&mcp.TextContent{Text: "(sum)"},
					}}, nil, nil
				})
		default:
			t.Fatalf("no tool %s", name)
		}
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.Header.Get("Mcp-Session-Id"))
		s.mu.Unlock()
		if r.Header.Get("Authorization") != token {
			http.Error(w, "wrong or missing bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
		if r.Method == http.MethodPost {
			s.mu.Lock()
			s.types[strings.Split(w.Header().Get("Content-Type"), ";")[0]] = true
			s.mu.Unlock()
		}
	}))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	s.url = hs.URL + "/mcp"
	return s
}

func (s *mcpServer) as(name string) server {
	return server{Name: name, URL: s.url, Headers: map[string]string{"Authorization": token}}
}

func TestProtocol(t *testing.T) {
	p := startProgram(t)
	r := p.call(t, "initialize", map[string]any{"protocol": "mst.plugin/v1", "mstVersion": "test"}, 10*time.Second)
	if r.Error != nil {
		t.Fatalf("initialize: %s", r.Error.Message)
	}
	var m struct {
		Protocol, Namespace, Version string
		Clients                      []struct {
			Name, Description string
			Options           struct {
				Type                 string                     `json:"type"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
				Properties           map[string]json.RawMessage `json:"properties"`
			}
			Credentials    []string
			TimeoutSeconds int
		}
	}
	if err := json.Unmarshal(r.Result, &m); err != nil {
		t.Fatal(err)
	}
	if m.Protocol != "mst.plugin/v1" || m.Namespace != "acmepy" || m.Version != "1.0.0" || len(m.Clients) != 1 {
		t.Fatalf("manifest = %s", r.Result)
	}
	c := m.Clients[0]
	if c.Name != "first-tool" || c.Options.Type != "object" || c.Options.AdditionalProperties == nil || *c.Options.AdditionalProperties ||
		c.Credentials == nil || len(c.Credentials) != 0 || c.TimeoutSeconds != 120 {
		t.Errorf("client = %+v", c)
	}
	var timeout struct{ Type, Default string }
	if err := json.Unmarshal(c.Options.Properties["timeout"], &timeout); err != nil || timeout.Type != "string" || timeout.Default != "2m" {
		t.Errorf("option timeout = %s, want a string defaulting to 2m", c.Options.Properties["timeout"])
	}

	if r := p.call(t, "no/such", nil, 10*time.Second); r.Error == nil || r.Error.Code != -32601 {
		t.Errorf("an unknown method got %+v, want error -32601", r)
	}
	if r := p.call(t, "client/run", map[string]any{"name": "other"}, 10*time.Second); r.Error == nil || !strings.Contains(r.Error.Message, "first-tool") {
		t.Errorf("client/run of an unknown client got %+v, want an error naming first-tool", r)
	}
	if r := p.call(t, "client/run", map[string]any{"name": "first-tool", "options": map[string]any{"colour": "red"}}, 10*time.Second); r.Error == nil || !strings.Contains(r.Error.Message, "colour") {
		t.Errorf("client/run with an unknown option got %+v, want an error naming it", r)
	}

	res := p.run(t, "What is the forecast for Oslo?", nil, 10000)
	if res.Answer != "no servers" || res.Outcome == nil || res.Outcome.Status != "no-answer" {
		t.Errorf("no servers: %+v, want the answer \"no servers\", no-answer", res)
	}

	if r := p.call(t, "shutdown", nil, 10*time.Second); r.Error != nil || string(r.Result) != "null" {
		t.Errorf("shutdown got %+v, want null", r)
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	p := startProgram(t)
	sse := newMCPServer(t, false, "get_forecast", "add")
	js := newMCPServer(t, true, "get_forecast", "add")
	math := newMCPServer(t, true, "add")

	t.Cleanup(func() {
		// The SDK answers with SSE unless told JSONResponse.
		if !sse.types["text/event-stream"] || !js.types["application/json"] || js.types["text/event-stream"] {
			t.Errorf("content types: SSE server %v, JSON server %v", sse.types, js.types)
		}
	})
	for _, tc := range []struct {
		name      string
		prompt    string
		options   map[string]any
		srvs      []server
		want      *mcpServer // the server that gets the call
		tool      string
		args      map[string]any
		answer    string
		isError   bool
		telemetry string // the server's name in telemetry
	}{
		{name: "sse", prompt: "What is the forecast for Oslo?", srvs: []server{sse.as("weather")},
			want: sse, tool: "get_forecast", args: map[string]any{"city": "Oslo"}, answer: "Oslo: rain, 7°C", telemetry: "weather"},
		{name: "json", prompt: "What is the forecast for Oslo?", srvs: []server{js.as("weather")},
			want: js, tool: "get_forecast", args: map[string]any{"city": "Oslo"}, answer: "Oslo: rain, 7°C", telemetry: "weather"},
		{name: "numbers", prompt: "Please add 2.5 and 3!", srvs: []server{sse.as("calc")},
			want: sse, tool: "add", args: map[string]any{"a": 2.5, "b": 2.5}, answer: "5\n(sum)", telemetry: "calc"},
		{name: "no-number", prompt: "ADD them up", srvs: []server{js.as("calc")},
			want: js, tool: "add", args: map[string]any{"a": 1.0, "b": 1.0}, answer: "2\n(sum)", telemetry: "calc"},
		{name: "unicode", prompt: "Wie wird die Forecast-Lage für „Zürich“?", srvs: []server{sse.as("wetter")},
			want: sse, tool: "get_forecast", args: map[string]any{"city": "Zürich"}, answer: "Zürich: rain, 7°C", telemetry: "wetter"},
		{name: "cjk", prompt: "forecast 東京", srvs: []server{js.as("天気")},
			want: js, tool: "get_forecast", args: map[string]any{"city": "東京"}, answer: "東京: rain, 7°C", telemetry: "天気"},
		{name: "second-server", prompt: "What is the forecast for Oslo?", srvs: []server{math.as("math"), sse.as("weather")},
			want: sse, tool: "get_forecast", args: map[string]any{"city": "Oslo"}, answer: "Oslo: rain, 7°C", telemetry: "weather"},
		{name: "fallback", prompt: "Hello there 7", srvs: []server{math.as("math"), sse.as("weather")},
			want: math, tool: "add", args: map[string]any{"a": 7.0, "b": 7.0}, answer: "14\n(sum)", telemetry: "math"},
		{name: "option-tool", prompt: "What is the forecast for 4 days?", options: map[string]any{"tool": "add"}, srvs: []server{sse.as("weather")},
			want: sse, tool: "add", args: map[string]any{"a": 4.0, "b": 4.0}, answer: "8\n(sum)", telemetry: "weather"},
		{name: "tool-error", prompt: "Forecast, please, for Atlantis.", srvs: []server{js.as("weather")},
			want: js, tool: "get_forecast", args: map[string]any{"city": "Atlantis"}, answer: "no forecast for Atlantis", isError: true, telemetry: "weather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := p.run(t, tc.prompt, tc.options, 20000, tc.srvs...)
			if res.Outcome == nil || res.Outcome.Status != "answered" || res.Answer != tc.answer {
				t.Errorf("answer %q, outcome %+v; want %q, answered", res.Answer, res.Outcome, tc.answer)
			}
			if res.Telemetry["tool"] != tc.tool || res.Telemetry["server"] != tc.telemetry || res.Telemetry["isError"] != tc.isError {
				t.Errorf("telemetry = %v, want tool %s, server %s, isError %v", res.Telemetry, tc.tool, tc.telemetry, tc.isError)
			}
			if res.Usage == nil || res.Usage.ModelCalls != 0 {
				t.Errorf("usage = %+v, want zeros", res.Usage)
			}
			for _, s := range []*mcpServer{sse, js, math} {
				calls, reqs := s.taken()
				if s != tc.want {
					if len(calls) != 0 {
						t.Errorf("calls = %+v on a server that should get none", calls)
					}
					checkSession(t, reqs)
					continue
				}
				if len(calls) != 1 || calls[0].Tool != tc.tool || fmt.Sprint(calls[0].Args) != fmt.Sprint(tc.args) {
					t.Errorf("calls = %+v, want one %s with %v", calls, tc.tool, tc.args)
				}
				if len(reqs) == 0 {
					t.Errorf("the server got no requests")
				}
				checkSession(t, reqs)
			}
		})
	}
}

// checkSession checks that a session began with one POST without a
// session id, went on with it, and ended with a DELETE.
func checkSession(t *testing.T, reqs []string) {
	t.Helper()
	if len(reqs) == 0 {
		return
	}
	// initialize, notifications/initialized, tools/list, [tools/call], DELETE
	if len(reqs) < 4 || reqs[0] != "POST " || !strings.HasPrefix(reqs[len(reqs)-1], "DELETE ") {
		t.Errorf("HTTP requests = %q, want POST (no session), POSTs with the session, then DELETE", reqs)
		return
	}
	id := strings.TrimPrefix(reqs[1], "POST ")
	for _, r := range reqs[1:] {
		if id == "" || !strings.HasSuffix(r, " "+id) {
			t.Errorf("HTTP requests = %q, want all but the first with the session id", reqs)
			return
		}
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	p := startProgram(t)
	sse := newMCPServer(t, false, "get_forecast")

	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/mcp"
	l.Close()

	// A server that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})

	// A server that answers 500 to everything.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the database is down", http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)

	for _, tc := range []struct {
		name    string
		timeout int
		srvs    []server
		detail  []string
		within  time.Duration
	}{
		{"unreachable", 20000, []server{{Name: "gone", URL: closed}}, []string{"gone", "initialize"}, 5 * time.Second},
		{"silent", 2000, []server{{Name: "mute", URL: "http://" + silent.Addr().String() + "/mcp"}}, []string{"mute", "initialize"}, 4 * time.Second},
		{"http-500", 20000, []server{{Name: "broken", URL: broken.URL}}, []string{"broken", "500", "the database is down"}, 5 * time.Second},
		{"no-token", 20000, []server{{Name: "weather", URL: sse.url}}, []string{"weather", "401"}, 5 * time.Second},
		{"wrong-token", 20000, []server{{Name: "weather", URL: sse.url, Headers: map[string]string{"Authorization": "Bearer nope"}}}, []string{"401"}, 5 * time.Second},
		{"one-of-two", 20000, []server{sse.as("weather"), {Name: "gone", URL: closed}}, []string{"gone"}, 5 * time.Second},
		{"bad-url", 20000, []server{{Name: "odd", URL: "not a url"}}, []string{"odd"}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res := p.run(t, "What is the forecast for Oslo?", nil, tc.timeout, tc.srvs...)
			took := time.Since(start)
			if res.Outcome == nil || res.Outcome.Status != "errored" || res.Answer != "" {
				t.Fatalf("answer %q, outcome %+v; want errored", res.Answer, res.Outcome)
			}
			for _, w := range tc.detail {
				if !strings.Contains(res.Outcome.Detail, w) {
					t.Errorf("detail %q does not say %q", res.Outcome.Detail, w)
				}
			}
			if took > tc.within {
				t.Errorf("took %v, want within %v", took, tc.within)
			}
		})
	}
	if calls, _ := sse.taken(); len(calls) != 0 {
		t.Errorf("calls = %+v, want none: a trial that fails to reach a server calls no tool", calls)
	}
}

// TestFindPrograms starts the program the way mst does.
func TestFindPrograms(t *testing.T) {
	needPython(t)
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	found, _ := plugin.FindPrograms(dir)
	if len(found) != 1 || found[0].Namespace != "acmepy" {
		t.Fatalf("FindPrograms(%s) = %v, want the program of namespace acmepy (is mst-plugin-acmepy executable?)", dir, found)
	}
	prog := found[0]
	t.Cleanup(func() { prog.Close() })
	m, err := prog.Manifest(t.Context())
	if err != nil {
		t.Fatalf("starting %s: %v", prog.Path, err)
	}
	if m.Namespace != "acmepy" || m.Version != "1.0.0" {
		t.Errorf("manifest = %+v", m)
	}
}

// TestConformance runs clienttest, the suite every client passes, against
// the program's client as MST sees it: the definition the plugin package
// makes from the manifest, calling client/run.
func TestConformance(t *testing.T) {
	needPython(t)
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	found, _ := plugin.FindPrograms(dir)
	if len(found) != 1 {
		t.Fatalf("FindPrograms(%s) = %v, want one program", dir, found)
	}
	prog := found[0]
	t.Cleanup(func() { prog.Close() })
	p, err := prog.Plugin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Clients) != 1 {
		t.Fatalf("the plugin adds %d clients, want 1", len(p.Clients))
	}
	def := *p.Clients[0]
	def.Name = plugin.FullName(p.Namespace, plugin.KindClient, def.Name)
	clienttest.Run(t, clienttest.Config{
		Definition: &def,
		Model:      "offline",
		Cannot: map[clienttest.Case]string{
			clienttest.ProviderError: "first-tool has no model, so no provider to fail",
			clienttest.ProviderDown:  "first-tool has no model, so no provider to be down",
		},
	})
}
