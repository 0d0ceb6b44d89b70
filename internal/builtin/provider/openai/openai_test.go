package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

const testKey = "test-key"

// apis are the wire formats every test runs with, and what the fake server
// records for each.
var apis = []struct {
	api    string
	format string
	path   string
	stream bool
}{
	{api: "responses", format: "responses", path: "/v1/responses", stream: true},
	{api: "chat", format: "chat", path: "/v1/chat/completions", stream: false},
}

// newProvider returns a provider that talks to srv through api.
func newProvider(t *testing.T, srv *providertest.Server, api string, maxRetries int) provider.Provider {
	t.Helper()
	p, err := New("gpt-test", provider.Options{APIKey: testKey, BaseURL: srv.URL + "/v1", API: api, MaxRetries: maxRetries})
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
	for _, a := range apis {
		t.Run(a.api, func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
				Match: "Echo hi",
				Turns: []providertest.Turn{
					{Text: "Calling echo.", ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"s": "hi"}}}, InputTokens: 11, OutputTokens: 7},
					{Text: "It said hi.", InputTokens: 30, OutputTokens: 4},
				},
			}}})
			p := newProvider(t, srv, a.api, -1)

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
				Text:      "Calling echo.",
				ToolCalls: []provider.ToolCall{{ID: call.ID, Name: "echo", Arguments: json.RawMessage(`{"s":"hi"}`)}},
				Usage:     provider.Usage{InputTokens: 11, OutputTokens: 7},
			}
			if diff := cmp.Diff(wantFirst, first, cmpopts.IgnoreFields(provider.Response{}, "StopReason")); diff != "" {
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
			wantSecond := provider.Response{Text: "It said hi.", Usage: provider.Usage{InputTokens: 30, OutputTokens: 4}}
			if diff := cmp.Diff(wantSecond, second, cmpopts.IgnoreFields(provider.Response{}, "StopReason")); diff != "" {
				t.Errorf("Complete(turn 1) mismatch (-want +got):\n%s", diff)
			}

			got := srv.Requests()
			if len(got) != 2 {
				t.Fatalf("server got %d requests, want 2", len(got))
			}
			for i, r := range got {
				want := providertest.Request{Format: a.format, Path: a.path, Model: "gpt-test", Stream: a.stream, Tools: []string{"echo"}, FirstUserText: "Echo hi, please.", Turn: i, Status: http.StatusOK}
				if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(providertest.Request{}, "Header", "Body", "Query")); diff != "" {
					t.Errorf("request %d mismatch (-want +got):\n%s", i, diff)
				}
				if h := r.Header.Get("Authorization"); h != "Bearer "+testKey {
					t.Errorf("request %d Authorization = %q, want the key as a bearer token", i, h)
				}
			}
			checkSecondBody(t, a.api, got[1].Body, call.ID)
		})
	}
}

// checkSecondBody checks that the second request of TestToolRoundTrip
// offers the tool with its schema, replays the call and answers it by id.
func checkSecondBody(t *testing.T, api string, raw json.RawMessage, callID string) {
	t.Helper()
	var body struct {
		Instructions string `json:"instructions"`
		Store        *bool  `json:"store"`
		Tools        []struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
			Strict     *bool           `json:"strict"`
			Function   struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
				Strict     *bool           `json:"strict"`
			} `json:"function"`
		} `json:"tools"`
		Input []struct {
			Type      string `json:"type"`
			Role      string `json:"role"`
			CallID    string `json:"call_id"`
			Arguments string `json:"arguments"`
			Output    string `json:"output"`
		} `json:"input"`
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		PreviousResponseID *string `json:"previous_response_id"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("decoding request 1 body: %v", err)
	}
	if len(body.Tools) != 1 {
		t.Fatalf("request 1 offers %d tools, want 1", len(body.Tools))
	}
	tool := body.Tools[0]
	if api == "chat" {
		tool.Name, tool.Parameters, tool.Strict = tool.Function.Name, tool.Function.Parameters, tool.Function.Strict
	}
	var gotSchema, wantSchema any
	json.Unmarshal(tool.Parameters, &gotSchema)
	json.Unmarshal(echoTool.InputSchema, &wantSchema)
	if tool.Name != "echo" || tool.Strict == nil || *tool.Strict || !cmp.Equal(gotSchema, wantSchema) {
		t.Errorf("request 1 tool = %s %s strict %v, want echo %s strict false", tool.Name, tool.Parameters, tool.Strict, echoTool.InputSchema)
	}

	if api == "responses" {
		if body.PreviousResponseID != nil {
			t.Errorf("request 1 sets previous_response_id %q, want none (stateless)", *body.PreviousResponseID)
		}
		if body.Store == nil || *body.Store {
			t.Errorf("request 1 store = %v, want false", body.Store)
		}
		if body.Instructions != "Use the tools." {
			t.Errorf("request 1 instructions = %q, want the system prompt", body.Instructions)
		}
		var kinds []string
		for _, it := range body.Input {
			kinds = append(kinds, it.Type)
		}
		if diff := cmp.Diff([]string{"message", "message", "function_call", "function_call_output"}, kinds); diff != "" {
			t.Fatalf("request 1 input item types mismatch (-want +got):\n%s", diff)
		}
		if m := body.Input[1]; m.Role != "assistant" {
			t.Errorf("request 1 input item 1 = %+v, want the assistant's message", m)
		}
		if c := body.Input[2]; c.CallID != callID || c.Arguments != `{"s":"hi"}` {
			t.Errorf("request 1 function_call = %+v, want call_id %s with the arguments", c, callID)
		}
		if o := body.Input[3]; o.CallID != callID || o.Output != "hi" {
			t.Errorf("request 1 function_call_output = %+v, want call_id %s with output hi", o, callID)
		}
		return
	}

	var roles []string
	for _, m := range body.Messages {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]string{"system", "user", "assistant", "tool"}, roles); diff != "" {
		t.Fatalf("request 1 message roles mismatch (-want +got):\n%s", diff)
	}
	if m := body.Messages[0]; m.Content != "Use the tools." {
		t.Errorf("request 1 system message = %v, want the system prompt", m.Content)
	}
	if tc := body.Messages[2].ToolCalls; len(tc) != 1 || tc[0].ID != callID || tc[0].Function.Arguments != `{"s":"hi"}` {
		t.Errorf("request 1 assistant tool_calls = %+v, want %s with the arguments", tc, callID)
	}
	if m := body.Messages[2]; m.Content != "Calling echo." {
		t.Errorf("request 1 assistant content = %v, want the assistant's text", m.Content)
	}
	if m := body.Messages[3]; m.ToolCallID != callID || m.Content != "hi" {
		t.Errorf("request 1 tool message = %+v, want tool_call_id %s with content hi", m, callID)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	turns := []providertest.Conversation{{Turns: []providertest.Turn{{Text: "ok"}}}}
	for _, a := range apis {
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
				wantErr:    &provider.Error{Provider: "openai", Status: 500, Message: "boom"},
			},
			{
				name:       "401 is not retried",
				maxRetries: 2,
				faults:     []providertest.Fault{{Status: 401, Times: 1, Message: "bad key"}},
				wantStatus: []int{401},
				wantErr:    &provider.Error{Provider: "openai", Status: 401, Message: "invalid_api_key: bad key"},
			},
		} {
			t.Run(a.api+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				srv := providertest.New(t, providertest.Script{Conversations: turns, Faults: tc.faults})
				p := newProvider(t, srv, a.api, tc.maxRetries)
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
}

func TestCancel(t *testing.T) {
	t.Parallel()
	for _, a := range apis {
		t.Run(a.api, func(t *testing.T) {
			t.Parallel()
			// The answer would come after an age; cancelling must end the wait.
			srv := providertest.New(t, providertest.Script{Latency: 1 << 62})
			p := newProvider(t, srv, a.api, -1)
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
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	const n = 8
	var convs []providertest.Conversation
	for i := range n {
		convs = append(convs, providertest.Conversation{Match: fmt.Sprintf("case %d.", i), Turns: []providertest.Turn{{Text: fmt.Sprintf("answer %d", i)}}})
	}
	for _, a := range apis {
		t.Run(a.api, func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, providertest.Script{Conversations: convs})
			p := newProvider(t, srv, a.api, -1)
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
		})
	}
}

// scriptedServer answers the requests of one test in turn: answers[k]
// answers request k.
func scriptedServer(t *testing.T, answers ...http.HandlerFunc) (*httptest.Server, func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		k := n
		n++
		mu.Unlock()
		if k >= len(answers) {
			http.Error(w, "no more answers", http.StatusTeapot)
			return
		}
		answers[k](w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// sse answers with an event stream.
func sse(stream string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, stream)
	}
}

// plain answers with a status and a body of the given content type, and
// lets a retry come at once.
func plain(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Retry-After-Ms", "0")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

const (
	okResponse = `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}`
	// okStream is a whole successful stream answering "ok".
	okStream = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":" + okResponse + "}\n\n"
	// itemsStream completes with the output left out, as some compatible
	// servers do; the items come in output_item.done events, out of order.
	itemsStream = "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":0,\"output_index\":1,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"echo\",\"arguments\":\"{}\",\"status\":\"completed\"}}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"ok\",\"annotations\":[]}]}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1,\"total_tokens\":4}}}\n\n"
	failedStream = "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The server had an error.\"},\"output\":[]}}\n\n"
	errorEvent   = "event: error\ndata: {\"type\":\"error\",\"sequence_number\":0,\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down.\"}\n\n"
	invalidEvent = "event: error\ndata: {\"type\":\"error\",\"sequence_number\":0,\"code\":\"invalid_prompt\",\"message\":\"No.\"}\n\n"
	errorObject  = "data: {\"error\":{\"message\":\"Backend died.\",\"code\":503}}\n\n"
	cutOff       = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
)

func TestResponsesStreamFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		answers   []http.HandlerFunc
		wantCalls int
		want      provider.Response
		wantErr   *provider.Error
	}{
		{
			name:      "output from items",
			answers:   []http.HandlerFunc{sse(itemsStream)},
			wantCalls: 1,
			want: provider.Response{
				Text:       "ok",
				ToolCalls:  []provider.ToolCall{{ID: "call_1", Name: "echo", Arguments: json.RawMessage(`{}`)}},
				Usage:      provider.Usage{InputTokens: 3, OutputTokens: 1},
				StopReason: "completed",
			},
		},
		{
			name:      "failed then ok",
			answers:   []http.HandlerFunc{sse(failedStream), sse(okStream)},
			wantCalls: 2,
			want:      provider.Response{Text: "ok", Usage: provider.Usage{InputTokens: 3, OutputTokens: 1}, StopReason: "completed"},
		},
		{
			name:      "error event then ok",
			answers:   []http.HandlerFunc{sse(errorEvent), sse(okStream)},
			wantCalls: 2,
			want:      provider.Response{Text: "ok", Usage: provider.Usage{InputTokens: 3, OutputTokens: 1}, StopReason: "completed"},
		},
		{
			name:      "cut off then ok",
			answers:   []http.HandlerFunc{sse(cutOff), sse(okStream)},
			wantCalls: 2,
			want:      provider.Response{Text: "ok", Usage: provider.Usage{InputTokens: 3, OutputTokens: 1}, StopReason: "completed"},
		},
		{
			name:      "failed beyond the retries",
			answers:   []http.HandlerFunc{sse(failedStream), sse(failedStream), sse(okStream)},
			wantCalls: 2,
			wantErr:   &provider.Error{Provider: "openai", Status: 500, Message: "server_error: The server had an error."},
		},
		{
			name:      "invalid is not retried",
			answers:   []http.HandlerFunc{sse(invalidEvent), sse(okStream)},
			wantCalls: 1,
			wantErr:   &provider.Error{Provider: "openai", Status: 400, Message: "invalid_prompt: No."},
		},
		{
			name:      "error object",
			answers:   []http.HandlerFunc{sse(errorObject), sse(errorObject)},
			wantCalls: 2,
			wantErr:   &provider.Error{Provider: "openai", Status: 500, Message: "503: Backend died."},
		},
		{
			name:      "plain-text error body",
			answers:   []http.HandlerFunc{plain(http.StatusBadGateway, "text/plain", "upstream down"), plain(http.StatusBadGateway, "text/plain", "upstream down")},
			wantCalls: 2,
			wantErr:   &provider.Error{Provider: "openai", Status: http.StatusBadGateway, Message: "upstream down"},
		},
		{
			name:      "error given as a string",
			answers:   []http.HandlerFunc{plain(http.StatusNotFound, "application/json", `{"error":"model \"x\" not found"}`)},
			wantCalls: 1,
			wantErr:   &provider.Error{Provider: "openai", Status: http.StatusNotFound, Message: `model "x" not found`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, calls := scriptedServer(t, tc.answers...)
			p, err := New("m", provider.Options{BaseURL: srv.URL + "/v1", MaxRetries: 1})
			if err != nil {
				t.Fatal(err)
			}
			p.(*client).backoff = func(int) time.Duration { return 0 }
			res, err := p.Complete(t.Context(), provider.Request{Messages: []provider.Message{{Role: provider.User, Text: "Hi."}}})
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Complete() error = %v", err)
				}
				if diff := cmp.Diff(tc.want, res); diff != "" {
					t.Errorf("Complete() mismatch (-want +got):\n%s", diff)
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

func TestErrorBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body string
		want string // the body the SDK gets
	}{
		{name: "openai shape", body: `{"error":{"message":"m","code":"c"}}`, want: `{"error":{"message":"m","code":"c"}}`},
		{name: "error string", body: `{"error":"model not found"}`, want: `{"error":{"message":"model not found"}}`},
		{name: "top-level message", body: `{"object":"error","message":"too long","type":"BadRequestError","code":400}`, want: `{"error":{"message":"too long"}}`},
		{name: "plain text", body: "  Service Unavailable\n", want: `{"error":{"message":"Service Unavailable"}}`},
		{name: "empty", body: "", want: `{"error":{"message":""}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, _ := errorBody([]byte(tc.body))
			if diff := cmp.Diff(decode(t, tc.want), decode(t, string(got))); diff != "" {
				t.Errorf("errorBody(%q) mismatch (-want +got):\n%s", tc.body, diff)
			}
		})
	}
}
