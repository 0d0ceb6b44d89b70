package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// send posts body to the server and returns the status and body of the
// answer. It may be called from any goroutine.
func send(ctx context.Context, method, url, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

const (
	anthropicBody = `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`
	responsesBody = `{"model":"m","input":"hi"}`
	chatBody      = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
)

func TestResolveTool(t *testing.T) {
	t.Parallel()
	plain := func(names ...string) []offeredTool {
		var out []offeredTool
		for _, n := range names {
			out = append(out, offeredTool{recorded: n, name: n})
		}
		return out
	}
	echoNS := offeredTool{recorded: "mcp__everything.echo", name: "echo", namespace: "mcp__everything"}
	tests := []struct {
		tool          string
		offered       []offeredTool
		wantName      string
		wantNamespace string
	}{
		{"echo", plain("echo"), "echo", ""},
		{"echo", plain("mcp__a__echo", "echo"), "echo", ""},
		{"echo", plain("mcp__everything__echo"), "mcp__everything__echo", ""},
		{"echo", plain("mcp_everything_echo"), "mcp_everything_echo", ""},
		{"echo", plain("say_echo", "mcp__x__echo"), "mcp__x__echo", ""},
		{"echo", plain("recho"), "echo", ""},
		{"greet (structured)", plain("greet_structured"), "greet_structured", ""},
		{"greet (structured)", plain("mcp__go__greet_structured"), "mcp__go__greet_structured", ""},
		{"Get-Weather", plain("get_weather"), "get_weather", ""},
		{"echo", []offeredTool{echoNS}, "echo", "mcp__everything"},
		{"mcp__everything__echo", []offeredTool{echoNS}, "echo", "mcp__everything"},
		{"mcp__everything.echo", []offeredTool{echoNS}, "echo", "mcp__everything"},
		{"web_search", []offeredTool{{recorded: "web_search"}}, "web_search", ""},
		{"missing", plain("echo"), "missing", ""},
		{"!!", plain("echo"), "!!", ""},
	}
	for _, tt := range tests {
		name, ns := resolveTool(tt.tool, tt.offered)
		if name != tt.wantName || ns != tt.wantNamespace {
			t.Errorf("resolveTool(%q, %v) = %q, %q, want %q, %q", tt.tool, tt.offered, name, ns, tt.wantName, tt.wantNamespace)
		}
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a", []string{"a"}},
		{"é", []string{"é"}},
		{"{}", []string{"{", "}"}},
		{"aé", []string{"a", "é"}},
		{"üa", []string{"ü", "a"}},
		{"aaü", []string{"aa", "ü"}},
		{`{"x":"ü"}`, []string{`{"x":`, `"ü"}`}},
	}
	for _, tt := range tests {
		got := split(tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("split(%q) (-want +got):\n%s", tt.in, diff)
		}
		for _, piece := range got {
			if !utf8.ValidString(piece) {
				t.Errorf("split(%q) cut a rune: %q", tt.in, got)
			}
		}
	}
}

func TestAnswerFor(t *testing.T) {
	t.Parallel()
	srv := New(t, Script{Conversations: []Conversation{
		{Match: "alpha", Turns: []Turn{{Text: "A", InputTokens: 3}}},
		{Match: "tools", Turns: []Turn{{ToolCalls: []Call{{Tool: "x", Arguments: json.RawMessage(`{"k":1}`)}}}}},
		{Turns: []Turn{{Text: "any0"}, {}}},
	}})
	tests := []struct {
		firstUserText string
		turn          int
		want          answer
	}{
		{"an alpha test", 0, answer{text: "A", input: 3, output: 5}},
		{"an alpha test", 4, answer{text: "A", input: 3, output: 5}},
		{"tools", 0, answer{calls: []answerCall{{name: "x", arguments: `{"k":1}`}}, input: 10, output: 5}},
		{"tools", 1, answer{text: "(script exhausted)", input: 10, output: 5}},
		{"other", 0, answer{text: "any0", input: 10, output: 5}},
		{"other", 1, answer{input: 10, output: 5}},
		{"other", 2, answer{text: "(script exhausted)", input: 10, output: 5}},
	}
	for _, tt := range tests {
		got := srv.answerFor(parsed{firstUserText: tt.firstUserText, turn: tt.turn})
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(answer{}, answerCall{})); diff != "" {
			t.Errorf("answerFor(%q, turn %d) (-want +got):\n%s", tt.firstUserText, tt.turn, diff)
		}
	}
	if got := New(t, Script{}).answerFor(parsed{}); got.text != exhausted {
		t.Errorf("empty script answers %q, want %q", got.text, exhausted)
	}
}

// fatalTB records a fatal failure and ends the goroutine that reported it.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper()        {}
func (f *fatalTB) Cleanup(func()) {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestNewRejectsBadArguments(t *testing.T) {
	t.Parallel()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		New(tb, Script{Conversations: []Conversation{{Match: "m", Turns: []Turn{
			{ToolCalls: []Call{{Tool: "t", Arguments: json.RawMessage(`{oops`)}}},
		}}}})
	}()
	<-done
	if !strings.Contains(tb.msg, `conversation 0 (match "m"): turn 0, call 0 (t)`) {
		t.Errorf("New failed with %q, want the conversation, turn and call named", tb.msg)
	}
}

func TestFaultsAcrossFormats(t *testing.T) {
	t.Parallel()
	srv := New(t, Script{Faults: []Fault{
		{Status: 429, Times: 1},
		{Status: 500, Times: 0},
		{Status: 503, Times: 2, Message: "down"},
	}})
	steps := []struct {
		path, body string
		wantStatus int
		wantBody   string // a substring
	}{
		{"/v1/messages", anthropicBody, 429, `{"error":{"message":"providertest: scripted fault 1 (HTTP 429)","type":"rate_limit_error"},"type":"error"}`},
		{"/v1/chat/completions", chatBody, 503, `{"error":{"code":null,"message":"down","param":null,"type":"server_error"}}`},
		{"/v1/responses", responsesBody, 503, `"message":"down"`},
		{"/v1/messages", anthropicBody, 200, `"text":"(script exhausted)"`},
	}
	for i, st := range steps {
		status, body, err := send(t.Context(), http.MethodPost, srv.URL+st.path, st.body)
		if err != nil {
			t.Fatal(err)
		}
		if status != st.wantStatus || !strings.Contains(string(body), st.wantBody) {
			t.Errorf("request %d to %s = %d %s, want %d with %s", i, st.path, status, body, st.wantStatus, st.wantBody)
		}
	}
	var got []string
	for _, r := range srv.Requests() {
		got = append(got, fmt.Sprintf("%s %d", r.Format, r.Status))
	}
	want := []string{"anthropic 429", "chat 503", "responses 503", "anthropic 200"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Requests() (-want +got):\n%s", diff)
	}
}

func TestUnservedRequests(t *testing.T) {
	t.Parallel()
	srv := New(t, Script{})
	tests := []struct {
		method, path string
		wantStatus   int
		wantFormat   string
	}{
		{http.MethodGet, "/v1/models", 404, ""},
		{http.MethodPost, "/v1beta/models/m:countTokens", 404, ""},
		{http.MethodHead, "/api/hello", 404, ""},
		{http.MethodGet, "/v1/messages", 405, "anthropic"},
	}
	for _, tt := range tests {
		status, body, err := send(t.Context(), tt.method, srv.URL+tt.path, "")
		if err != nil {
			t.Fatal(err)
		}
		if status != tt.wantStatus {
			t.Errorf("%s %s = %d %s, want %d", tt.method, tt.path, status, body, tt.wantStatus)
		}
		if tt.method != http.MethodHead && !json.Valid(body) {
			t.Errorf("%s %s answered %q, want a JSON error", tt.method, tt.path, body)
		}
	}
	var got []string
	for _, r := range srv.Requests() {
		got = append(got, fmt.Sprintf("%s %s %d", r.Format, r.Path, r.Status))
	}
	want := []string{
		" /v1/models 404", " /v1beta/models/m:countTokens 404", " /api/hello 404", "anthropic /v1/messages 405",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Requests() (-want +got):\n%s", diff)
	}
	if n := srv.MaxInFlight(); n != 0 {
		t.Errorf("MaxInFlight() = %d after no model requests, want 0", n)
	}
}

func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	const n = 4
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	srv := newServer(t, Script{Latency: time.Millisecond}, func(ctx context.Context) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	bodies := []struct{ path, body string }{
		{"/v1/messages", anthropicBody},
		{"/v1/responses", responsesBody},
		{"/v1/chat/completions", chatBody},
		{"/v1/messages", anthropicBody},
	}
	var wg sync.WaitGroup
	for _, b := range bodies {
		wg.Go(func() {
			status, body, err := send(t.Context(), http.MethodPost, srv.URL+b.path, b.body)
			if err != nil || status != http.StatusOK {
				t.Errorf("POST %s = %d %s, %v", b.path, status, body, err)
			}
		})
	}
	for range n {
		<-arrived
	}
	close(release)
	wg.Wait()
	if got := srv.MaxInFlight(); got != n {
		t.Errorf("MaxInFlight() = %d, want %d", got, n)
	}
	if _, _, err := send(t.Context(), http.MethodPost, srv.URL+"/v1/messages", anthropicBody); err != nil {
		t.Fatal(err)
	}
	<-arrived
	if got := srv.MaxInFlight(); got != n {
		t.Errorf("MaxInFlight() after a lone request = %d, want still %d", got, n)
	}
}

// TestLatencyEndsWithClient checks that a client that goes away ends the
// wait, so that the server stops at the end of the test.
func TestLatencyEndsWithClient(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	srv := newServer(t, Script{Latency: time.Hour}, func(context.Context) { arrived <- struct{}{} })
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, _, err := send(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", chatBody)
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("request error = %v, want context.Canceled", err)
	}
}

func TestRequestsIsACopy(t *testing.T) {
	t.Parallel()
	srv := New(t, Script{})
	if _, _, err := send(t.Context(), http.MethodPost, srv.URL+"/v1/responses",
		`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}]}`); err != nil {
		t.Fatal(err)
	}
	first := srv.Requests()
	first[0].Tools[0] = "changed"
	first[0].Body[0] = 'X'
	first[0].Header.Set("X-Changed", "1")
	again := srv.Requests()[0]
	if again.Tools[0] != "f" || again.Body[0] != '{' || again.Header.Get("X-Changed") != "" {
		t.Errorf("changing the result of Requests() changed the server's record: %+v", again)
	}
}
