package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

const testKey = "test-key"

// newProvider returns a provider that talks to srv.
func newProvider(t *testing.T, srv *providertest.Server, maxRetries int) provider.Provider {
	t.Helper()
	p, err := New("claude-test", provider.Options{APIKey: testKey, BaseURL: srv.URL, MaxRetries: maxRetries})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return p
}

var echoTool = provider.Tool{
	Name:        "echo",
	Description: "Echoes its input.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}},"required":["s"]}`),
}

func TestToolRoundTrip(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Match: "Echo hi",
		Turns: []providertest.Turn{
			{Text: "Calling echo.", ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"s": "hi"}}}, InputTokens: 11, OutputTokens: 7},
			{Text: "It said hi.", InputTokens: 30, OutputTokens: 4},
		},
	}}})
	p := newProvider(t, srv, -1)

	req := provider.Request{
		System:   "Use the tools.",
		Messages: []provider.Message{{Role: provider.User, Text: "Echo hi, please."}},
		Tools:    []provider.Tool{echoTool},
	}
	first, err := p.Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete(turn 0) error = %v", err)
	}
	if len(first.ToolCalls) != 1 || first.ToolCalls[0].ID == "" {
		t.Fatalf("Complete(turn 0) = %+v, want one tool call with an id", first)
	}
	call := first.ToolCalls[0]
	wantFirst := provider.Response{
		Text:       "Calling echo.",
		ToolCalls:  []provider.ToolCall{{ID: call.ID, Name: "echo", Arguments: json.RawMessage(`{"s":"hi"}`)}},
		Usage:      provider.Usage{InputTokens: 11, OutputTokens: 7},
		StopReason: "tool_use",
	}
	if diff := cmp.Diff(wantFirst, first); diff != "" {
		t.Errorf("Complete(turn 0) mismatch (-want +got):\n%s", diff)
	}

	req.Messages = append(req.Messages,
		provider.Message{Role: provider.Assistant, Text: first.Text, ToolCalls: first.ToolCalls},
		provider.Message{Role: provider.User, ToolResults: []provider.ToolResult{{CallID: call.ID, Name: "echo", Content: "hi"}}},
	)
	second, err := p.Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete(turn 1) error = %v", err)
	}
	wantSecond := provider.Response{
		Text:       "It said hi.",
		Usage:      provider.Usage{InputTokens: 30, OutputTokens: 4},
		StopReason: "end_turn",
	}
	if diff := cmp.Diff(wantSecond, second); diff != "" {
		t.Errorf("Complete(turn 1) mismatch (-want +got):\n%s", diff)
	}

	got := srv.Requests()
	if len(got) != 2 {
		t.Fatalf("server got %d requests, want 2", len(got))
	}
	for i, r := range got {
		want := providertest.Request{Format: "anthropic", Path: "/v1/messages", Model: "claude-test", Stream: true, Tools: []string{"echo"}, FirstUserText: "Echo hi, please.", Turn: i, Status: http.StatusOK}
		if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(providertest.Request{}, "Header", "Body", "Query")); diff != "" {
			t.Errorf("request %d mismatch (-want +got):\n%s", i, diff)
		}
		if r.Header.Get("X-Api-Key") != testKey && r.Header.Get("Authorization") != "Bearer "+testKey {
			t.Errorf("request %d carries neither X-Api-Key nor Authorization with the key; headers: %v", i, r.Header)
		}
	}

	// The second request answers the call by its id, and offers the tool
	// with its schema as given.
	var body struct {
		System []struct {
			Text string `json:"text"`
		} `json:"system"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				ID        string          `json:"id"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(got[1].Body, &body); err != nil {
		t.Fatalf("decoding request 1 body: %v", err)
	}
	if len(body.System) != 1 || body.System[0].Text != "Use the tools." {
		t.Errorf("request 1 system = %+v, want the system prompt", body.System)
	}
	if len(body.Tools) != 1 || string(body.Tools[0].InputSchema) != string(echoTool.InputSchema) {
		t.Errorf("request 1 tools = %+v, want echo with its schema as given", body.Tools)
	}
	if len(body.Messages) != 3 {
		t.Fatalf("request 1 has %d messages, want 3", len(body.Messages))
	}
	use := body.Messages[1].Content[len(body.Messages[1].Content)-1]
	if use.Type != "tool_use" || use.ID != call.ID || string(use.Input) != `{"s":"hi"}` {
		t.Errorf("request 1 assistant message ends with %+v, want the tool_use %s", use, call.ID)
	}
	result := body.Messages[2].Content[0]
	if result.Type != "tool_result" || result.ToolUseID != call.ID {
		t.Errorf("request 1 user message starts with %+v, want a tool_result for %s", result, call.ID)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	turns := []providertest.Conversation{{Turns: []providertest.Turn{{Text: "ok"}}}}
	for _, tc := range []struct {
		name       string
		maxRetries int
		faults     []providertest.Fault
		wantStatus []int // of the requests the server saw
		wantErr    *provider.Error
	}{
		{
			name:       "429 twice then success",
			maxRetries: -1,
			faults:     []providertest.Fault{{Status: 429, Times: 2}},
			wantStatus: []int{429, 429, 200},
		},
		{
			name:       "500 beyond the retries",
			maxRetries: 1,
			faults:     []providertest.Fault{{Status: 500, Times: 5, Message: "boom"}},
			wantStatus: []int{500, 500},
			wantErr:    &provider.Error{Provider: "anthropic", Status: 500, Message: "api_error: boom"},
		},
		{
			name:       "400 is not retried",
			maxRetries: 2,
			faults:     []providertest.Fault{{Status: 400, Times: 1, Message: "bad"}},
			wantStatus: []int{400},
			wantErr:    &provider.Error{Provider: "anthropic", Status: 400, Message: "invalid_request_error: bad"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, providertest.Script{Conversations: turns, Faults: tc.faults})
			p := newProvider(t, srv, tc.maxRetries)
			res, err := p.Complete(t.Context(), provider.Request{Messages: []provider.Message{{Role: provider.User, Text: "Hi."}}})
			if tc.wantErr == nil {
				if err != nil || res.Text != "ok" {
					t.Errorf("Complete() = %+v, %v, want the text ok", res, err)
				}
			} else {
				var pe *provider.Error
				if !errors.As(err, &pe) {
					t.Fatalf("Complete() error = %v (%T), want a *provider.Error", err, err)
				}
				if diff := cmp.Diff(tc.wantErr, pe); diff != "" {
					t.Errorf("Complete() error mismatch (-want +got):\n%s", diff)
				}
			}
			var statuses []int
			for _, r := range srv.Requests() {
				statuses = append(statuses, r.Status)
			}
			if diff := cmp.Diff(tc.wantStatus, statuses); diff != "" {
				t.Errorf("statuses the server answered mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	// The answer would come after an hour; cancelling must end the wait.
	srv := providertest.New(t, providertest.Script{Latency: 1 << 62})
	p := newProvider(t, srv, -1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := p.Complete(ctx, provider.Request{Messages: []provider.Message{{Role: provider.User, Text: "Hi."}}})
		done <- err
	}()
	for srv.MaxInFlight() == 0 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Complete() after cancel = %v, want context.Canceled", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	const n = 8
	var convs []providertest.Conversation
	for i := range n {
		convs = append(convs, providertest.Conversation{Match: fmt.Sprintf("case %d.", i), Turns: []providertest.Turn{{Text: fmt.Sprintf("answer %d", i)}}})
	}
	srv := providertest.New(t, providertest.Script{Conversations: convs})
	p := newProvider(t, srv, -1)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res, err := p.Complete(t.Context(), provider.Request{Messages: []provider.Message{{Role: provider.User, Text: fmt.Sprintf("case %d.", i)}}})
			if err == nil && res.Text != fmt.Sprintf("answer %d", i) {
				err = fmt.Errorf("text %q", res.Text)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Complete(case %d) error = %v", i, err)
		}
	}
}

// sseServer answers the requests of one test in turn: answers[k] writes the
// event stream of request k.
func sseServer(t *testing.T, answers ...string) (*httptest.Server, func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		k := n
		n++
		mu.Unlock()
		if k >= len(answers) {
			http.Error(w, `{"type":"error","error":{"type":"api_error","message":"no more answers"}}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, answers[k])
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// okStream is a whole successful stream answering "ok".
const okStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}

event: message_stop
data: {"type":"message_stop"}

`

func TestStreamFailures(t *testing.T) {
	t.Parallel()
	overloaded := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	invalid := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"nope\"}}\n\n"
	cutOff := okStream[:strings.Index(okStream, "event: message_delta")]
	for _, tc := range []struct {
		name      string
		answers   []string
		wantCalls int
		wantErr   *provider.Error
		wantText  string
	}{
		{name: "overloaded then ok", answers: []string{overloaded, okStream}, wantCalls: 2, wantText: "ok"},
		{name: "cut off then ok", answers: []string{cutOff, okStream}, wantCalls: 2, wantText: "ok"},
		{
			name:      "overloaded beyond the retries",
			answers:   []string{overloaded, overloaded, overloaded},
			wantCalls: 2,
			wantErr:   &provider.Error{Provider: "anthropic", Status: 529, Message: "overloaded_error: Overloaded"},
		},
		{
			name:      "invalid is not retried",
			answers:   []string{invalid, okStream},
			wantCalls: 1,
			wantErr:   &provider.Error{Provider: "anthropic", Status: 400, Message: "invalid_request_error: nope"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, calls := sseServer(t, tc.answers...)
			p, err := New("m", provider.Options{APIKey: testKey, BaseURL: srv.URL, MaxRetries: 1})
			if err != nil {
				t.Fatal(err)
			}
			p.(*client).backoff = func(int) time.Duration { return 0 }
			res, err := p.Complete(t.Context(), provider.Request{Messages: []provider.Message{{Role: provider.User, Text: "Hi."}}})
			if tc.wantErr == nil {
				if err != nil || res.Text != tc.wantText {
					t.Errorf("Complete() = %+v, %v, want the text %q", res, err, tc.wantText)
				}
			} else {
				var pe *provider.Error
				if !errors.As(err, &pe) {
					t.Fatalf("Complete() error = %v (%T), want a *provider.Error", err, err)
				}
				if diff := cmp.Diff(tc.wantErr, pe); diff != "" {
					t.Errorf("Complete() error mismatch (-want +got):\n%s", diff)
				}
			}
			if got := calls(); got != tc.wantCalls {
				t.Errorf("server got %d requests, want %d", got, tc.wantCalls)
			}
		})
	}
}
