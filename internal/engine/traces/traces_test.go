package traces_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/mst-eval/mst/internal/engine/traces"
	"github.com/mst-eval/mst/internal/engine/traces/tracestest"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// Canaries: secret values planted in every free-text field of the
// transcripts below, as they are before the store redacts them.
const (
	canary    = "canary-trace-9c41e7"
	canaryRaw = "canary-raw-\xe9\xff-trace"
)

func secretSet(t *testing.T) *secrets.Set {
	t.Helper()
	set := secrets.New()
	for name, v := range map[string]string{"CANARY": canary, "RAW": canaryRaw} {
		if err := set.Add(name, v); err != nil {
			t.Fatal(err)
		}
	}
	return set
}

var redactedName = regexp.MustCompile(`\[redacted:([A-Za-z0-9_]+)\]`)

// leaked reports which secrets of set b holds, in any form the redactor
// knows; markers already in b do not count.
func leaked(set *secrets.Set, b []byte) []string {
	count := func(b []byte) map[string]int {
		n := map[string]int{}
		for _, m := range redactedName.FindAllSubmatch(b, -1) {
			n[string(m[1])]++
		}
		return n
	}
	before, after := count(b), count(secrets.NewRedactor(set).Bytes(b))
	var names []string
	for name, n := range after {
		if n > before[name] {
			names = append(names, name)
		}
	}
	return names
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// answered is a trial of two model turns and three tool calls: an MCP call
// that worked, one whose tool answered with an error, and a built-in one,
// with a secret in the prompt, the arguments, the results and the answer.
func answered() *transcript.Transcript {
	secret := canary + " " + canaryRaw
	return &transcript.Transcript{
		Kind: "mst.transcript", Version: transcript.Version, Run: "run-1",
		Key:    transcript.Key{Case: "case-" + canary, Variant: "v1", Trial: 2},
		Client: transcript.ClientInfo{Name: "api"}, Model: "anthropic/claude-test",
		Servers: []transcript.ServerInfo{{Name: "test", Transport: "stdio", ProtocolVersion: "2025-06-18"}},
		Prompt:  "say " + secret,
		Messages: []transcript.Message{
			{Role: "user", Text: "say " + secret},
			{Role: "assistant", ToolCalls: []string{"c1", "c2"}},
			{Role: "tool", ToolCall: "c1"}, {Role: "tool", ToolCall: "c2"},
			{Role: "assistant", ToolCalls: []string{"c3"}},
			{Role: "tool", ToolCall: "c3"},
			{Role: "assistant", Text: "done " + secret},
		},
		ToolCalls: []transcript.ToolCall{
			{ID: "c1", Server: "test", Tool: "echo", OfferedAs: "say", Arguments: json.RawMessage(`{"text":"` + canary + `"}`), Result: secret, Started: at(100), DurationMs: 50, Evidence: transcript.EvidenceServer},
			{ID: "c2", Server: "test", Tool: "fail", Arguments: json.RawMessage(`{}`), Result: "failed: " + secret + " not UTF-8: \xff\xfe", IsError: true, Started: at(110), DurationMs: 20, Evidence: transcript.EvidenceServer},
			{ID: "c3", Server: "builtin", Tool: "Read", Arguments: json.RawMessage(`{}`), Error: "lost " + secret, Started: at(300), DurationMs: 10, Evidence: transcript.EvidenceClient},
		},
		Answer:  "done " + secret,
		Usage:   transcript.Usage{InputTokens: 120, OutputTokens: 30, ModelCalls: 3},
		Timing:  transcript.Timing{Started: t0, Ended: at(500), DurationMs: 500, SetupMs: 40},
		Outcome: transcript.Outcome{Status: transcript.Answered},
	}
}

// errored is a trial the provider ended after one model call.
func errored() *transcript.Transcript {
	return &transcript.Transcript{
		Kind: "mst.transcript", Version: transcript.Version, Run: "run-1",
		Key:    transcript.Key{Case: "b", Variant: "v1", Trial: 1},
		Client: transcript.ClientInfo{Name: "api"}, Model: "anthropic/claude-test",
		Prompt:   "hello",
		Messages: []transcript.Message{{Role: "user", Text: "hello"}},
		Usage:    transcript.Usage{InputTokens: 7, ModelCalls: 1},
		Timing:   transcript.Timing{Started: t0, Ended: at(80), DurationMs: 80},
		Outcome:  transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseProvider, Detail: "HTTP 401: invalid key " + canary},
	}
}

// TestExport sends two trials over each protocol to a real OTLP receiver
// and checks the tree of spans, their names, GenAI attributes, times and
// statuses, the resource and headers from the standard variables, and
// that no byte received holds a secret.
func TestExport(t *testing.T) {
	for _, proto := range []string{"", traces.ProtocolHTTP, traces.ProtocolGRPC} {
		t.Run("protocol="+proto, func(t *testing.T) {
			r := tracestest.Start(t)
			endpoint := r.HTTP
			if proto == traces.ProtocolGRPC {
				endpoint = r.GRPC
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-mst-test=yes")
			t.Setenv("OTEL_SERVICE_NAME", "mst-under-test")
			set := secretSet(t)
			var log bytes.Buffer
			e := traces.Start(t.Context(), traces.Config{Redact: secrets.NewRedactor(set), Logger: slog.New(slog.NewTextHandler(&log, nil)), Version: "1.2.3"})
			if e == nil {
				t.Fatalf("Start = nil with an endpoint set; log:\n%s", log.String())
			}
			e.Trial(answered())
			e.Trial(errored())
			e.Shutdown()
			spans := r.Spans()
			if log.Len() > 0 {
				t.Errorf("log:\n%s", log.String())
			}
			for i, b := range r.Raw() {
				if names := leaked(set, b); len(names) > 0 {
					t.Errorf("request %d holds the secrets %v", i, names)
				}
			}
			if proto != traces.ProtocolGRPC {
				for _, h := range r.Headers() {
					if h.Get("x-mst-test") != "yes" {
						t.Errorf("request headers %v lack OTEL_EXPORTER_OTLP_HEADERS", h)
					}
				}
			}
			checkTree(t, spans)
		})
	}
}

// node is a span with its children, by name.
type node struct {
	tracestest.Span
	kids []tracestest.Span
}

func checkTree(t *testing.T, spans []tracestest.Span) {
	t.Helper()
	byID := map[string]*node{}
	var roots []*node
	for _, s := range spans {
		if s.ParentID == "" {
			n := &node{Span: s}
			byID[s.SpanID] = n
			roots = append(roots, n)
		}
	}
	for _, s := range spans {
		if s.ParentID == "" {
			continue
		}
		p, ok := byID[s.ParentID]
		if !ok {
			t.Fatalf("span %q has parent %s, not a trial's span", s.Name, s.ParentID)
		}
		if s.TraceID != p.TraceID {
			t.Errorf("span %q is in trace %s, its trial in %s", s.Name, s.TraceID, p.TraceID)
		}
		p.kids = append(p.kids, s)
	}
	if len(roots) != 2 || len(spans) != 2+3+3+1 {
		t.Fatalf("got %d spans, %d roots; want 9 spans under 2 trials:\n%+v", len(spans), len(roots), spans)
	}
	if roots[0].TraceID == roots[1].TraceID {
		t.Errorf("two trials share trace %s", roots[0].TraceID)
	}
	byCase := map[string]*node{}
	for _, r := range roots {
		byCase[r.Attrs["mst.variant"].(string)+"/"+r.Attrs["mst.case"].(string)] = r
		if r.Resource["service.name"] != "mst-under-test" || r.Resource["service.version"] != "1.2.3" {
			t.Errorf("resource = %v; want OTEL_SERVICE_NAME and the version", r.Resource)
		}
	}
	a, b := byCase["v1/case-[redacted:CANARY]"], byCase["v1/b"]
	if a == nil || b == nil {
		t.Fatalf("trials by case = %v", byCase)
	}

	want := map[string]any{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "api",
		"gen_ai.provider.name": "anthropic", "gen_ai.system": "anthropic", "gen_ai.request.model": "claude-test",
		"gen_ai.usage.input_tokens": int64(120), "gen_ai.usage.output_tokens": int64(30),
		"mst.run.id": "run-1", "mst.trial": int64(2), "mst.client": "api", "mst.model": "anthropic/claude-test",
		"mst.outcome": "answered", "mst.duration_ms": 500.0, "mst.setup_ms": 40.0, "mst.model_calls": int64(3),
	}
	attrsHave(t, a.Name, a.Attrs, want)
	if a.Name != "invoke_agent api" || a.StatusCode != tracepb.Status_STATUS_CODE_UNSET || !a.Start.Equal(t0) || !a.End.Equal(at(500)) {
		t.Errorf("trial span %q status %v, %s..%s", a.Name, a.StatusCode, a.Start, a.End)
	}
	kids := map[string][]tracestest.Span{}
	for _, k := range a.kids {
		kids[k.Name] = append(kids[k.Name], k)
	}
	if len(kids["chat claude-test"]) != 3 {
		t.Fatalf("children of the answered trial: %v", names(a.kids))
	}
	// The model calls lie between the tool calls.
	chats := kids["chat claude-test"]
	wantChat := [][2]time.Time{{t0, at(100)}, {at(150), at(300)}, {at(310), at(500)}}
	for i, c := range chats {
		attrsHave(t, c.Name, c.Attrs, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-test", "mst.timing_inferred": true})
		if !c.Start.Equal(wantChat[i][0]) || !c.End.Equal(wantChat[i][1]) || c.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("chat %d: %s..%s kind %v; want %s..%s", i, c.Start, c.End, c.Kind, wantChat[i][0], wantChat[i][1])
		}
		if _, ok := c.Attrs["gen_ai.usage.input_tokens"]; ok {
			t.Errorf("chat %d of a trial of 3 model calls has per-call usage: %v", i, c.Attrs)
		}
	}
	say, fail, read := one(t, kids, "execute_tool say"), one(t, kids, "execute_tool fail"), one(t, kids, "execute_tool Read")
	attrsHave(t, say.Name, say.Attrs, map[string]any{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "say", "gen_ai.tool.call.id": "c1", "gen_ai.tool.type": "extension",
		"mcp.method.name": "tools/call", "mcp.server.name": "test", "mcp.protocol.version": "2025-06-18", "network.transport": "pipe",
		"mst.tool.server_name": "echo", "gen_ai.tool.call.arguments": `{"text":"[redacted:CANARY]"}`,
	})
	if !say.Start.Equal(at(100)) || !say.End.Equal(at(150)) || say.StatusCode != tracepb.Status_STATUS_CODE_UNSET {
		t.Errorf("say: %s..%s status %v", say.Start, say.End, say.StatusCode)
	}
	attrsHave(t, fail.Name, fail.Attrs, map[string]any{"gen_ai.tool.call.id": "c2", "error.type": "tool_error"})
	if fail.StatusCode != tracepb.Status_STATUS_CODE_ERROR || !strings.HasPrefix(fail.StatusMessage, "failed: [redacted:") {
		t.Errorf("fail: status %v %q", fail.StatusCode, fail.StatusMessage)
	}
	attrsHave(t, read.Name, read.Attrs, map[string]any{"gen_ai.tool.type": "function", "mst.tool.builtin": true, "error.type": "call_failed"})
	if _, ok := read.Attrs["mcp.method.name"]; ok {
		t.Errorf("a built-in tool call has MCP attributes: %v", read.Attrs)
	}
	if read.StatusCode != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("Read: status %v", read.StatusCode)
	}

	// The errored trial: error status on the trial and on the model call
	// that failed.
	attrsHave(t, b.Name, b.Attrs, map[string]any{"mst.outcome": "errored", "mst.outcome.cause": "provider", "error.type": "provider", "mst.outcome.detail": "HTTP 401: invalid key [redacted:CANARY]"})
	if b.StatusCode != tracepb.Status_STATUS_CODE_ERROR || b.StatusMessage != "provider: HTTP 401: invalid key [redacted:CANARY]" {
		t.Errorf("errored trial: status %v %q", b.StatusCode, b.StatusMessage)
	}
	if len(b.kids) != 1 || b.kids[0].StatusCode != tracepb.Status_STATUS_CODE_ERROR || !b.kids[0].Start.Equal(t0) || !b.kids[0].End.Equal(at(80)) {
		t.Fatalf("children of the errored trial: %+v", b.kids)
	}
}

func one(t *testing.T, kids map[string][]tracestest.Span, name string) tracestest.Span {
	t.Helper()
	if len(kids[name]) != 1 {
		t.Fatalf("%d spans named %q; have %v", len(kids[name]), name, kids)
	}
	return kids[name][0]
}

func names(spans []tracestest.Span) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return n
}

func attrsHave(t *testing.T, span string, got, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %#v, want %#v", span, k, got[k], v)
		}
	}
}

// TestOff: with no endpoint, or with one and the SDK disabled or the
// traces exporter "none", there is no exporter, and using it costs no
// allocation (so no goroutine either).
func TestOff(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"no endpoint":   {},
		"sdk disabled":  {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		"exporter none": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces", "OTEL_TRACES_EXPORTER": "none"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"} {
				t.Setenv(k, env[k])
			}
			tr := answered()
			ctx := t.Context()
			allocs := testing.AllocsPerRun(100, func() {
				e := traces.Start(ctx, traces.Config{})
				if e != nil {
					t.Fatal("Start returned an exporter")
				}
				e.Trial(tr)
				e.Shutdown()
			})
			if allocs != 0 {
				t.Errorf("%v allocations per trial with traces off", allocs)
			}
		})
	}
}

// TestUnreachable: a collector that refuses connections, one that accepts
// and never answers, and ones that answer with an error (to retry or not)
// each get one warning, and Shutdown returns (within its bound).
func TestUnreachable(t *testing.T) {
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + refused.Addr().String()
	refused.Close()

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Error(w, "bad", http.StatusBadRequest)
	}))
	t.Cleanup(refusing.Close)

	for name, env := range map[string][2]string{
		"503 http":     {failing.URL, traces.ProtocolHTTP},
		"400 http":     {refusing.URL, traces.ProtocolHTTP},
		"refused http": {refusedURL, traces.ProtocolHTTP},
		"refused grpc": {refusedURL, traces.ProtocolGRPC},
		"silent http":  {"http://" + silent.Addr().String(), traces.ProtocolHTTP},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", env[0])
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", env[1])
			var log syncBuffer
			e := traces.Start(t.Context(), traces.Config{Logger: slog.New(slog.NewTextHandler(&log, nil)), FlushTimeout: 300 * time.Millisecond})
			for range 3 {
				e.Trial(answered())
			}
			e.Shutdown()
			if n := strings.Count(log.String(), "level=WARN"); n != 1 {
				t.Errorf("%d warnings, want 1:\n%s", n, log.String())
			}
		})
	}
}

// TestBadProtocol: a protocol MST does not speak is warned about, names
// the variable and the values it takes, and turns traces off.
func TestBadProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	var log syncBuffer
	if e := traces.Start(context.Background(), traces.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}); e != nil {
		t.Fatal("Start made an exporter for http/json")
	}
	for _, want := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "http/protobuf", "grpc"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("warning lacks %q:\n%s", want, log.String())
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BenchmarkTrialOff is the cost a run pays per trial with traces off.
func BenchmarkTrialOff(b *testing.B) {
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	b.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	e := traces.Start(b.Context(), traces.Config{})
	tr := answered()
	b.ReportAllocs()
	for b.Loop() {
		e.Trial(tr)
	}
}

// BenchmarkTrialOn is the cost of building and queueing one trial's
// spans (the export happens in the background).
func BenchmarkTrialOn(b *testing.B) {
	r := tracestest.Start(b)
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.HTTP)
	b.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	e := traces.Start(b.Context(), traces.Config{Redact: secrets.NewRedactor(secrets.New())})
	defer e.Shutdown()
	tr := answered()
	b.ReportAllocs()
	for b.Loop() {
		e.Trial(tr)
	}
}
