package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/mst-eval/mst/internal/provider"
)

// asJSON marshals v and decodes it again, so that two bodies compare by
// content and not by key order or spacing.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshalling %T: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return out
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return out
}

// conversation is a tool round trip: a question, a call, its result.
var conversation = provider.Request{
	System:          "Be brief.",
	ReasoningEffort: "low",
	Tools: []provider.Tool{
		{Name: "echo", Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}}}`)},
		{Name: "now"},
	},
	Messages: []provider.Message{
		{Role: provider.User, Text: "Echo hi."},
		{Role: provider.Assistant, Text: "Calling.", ToolCalls: []provider.ToolCall{
			{ID: "call_1", Name: "echo", Arguments: json.RawMessage(`{"s":"hi"}`)},
			{ID: "call_2", Name: "now", Arguments: json.RawMessage(`"{broken"`)},
		}},
		{Role: provider.User, Text: "Go on.", ToolResults: []provider.ToolResult{
			{CallID: "call_1", Name: "echo", Content: "hi"},
			{CallID: "call_2", Name: "now", Content: "", IsError: true},
		}},
	},
}

func TestResponsesParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		model string
		req   provider.Request
		want  string
	}{
		{
			name:  "first turn",
			model: "gpt-other",
			req:   provider.Request{MaxTokens: 50, Messages: []provider.Message{{Role: provider.User, Text: "Hi."}}},
			want: `{
				"model": "gpt-other",
				"max_output_tokens": 50,
				"store": false,
				"input": [{"type": "message", "role": "user", "content": "Hi."}]
			}`,
		},
		{
			name:  "tool round trip",
			model: "gpt-test",
			req:   conversation,
			want: `{
				"model": "gpt-test",
				"max_output_tokens": 4096,
				"store": false,
				"instructions": "Be brief.",
				"reasoning": {"effort": "low"},
				"tools": [
					{"type": "function", "name": "echo", "description": "Echoes.", "strict": false, "parameters": {"type":"object","properties":{"s":{"type":"string"}}}},
					{"type": "function", "name": "now", "strict": false, "parameters": {"type":"object","properties":{}}}
				],
				"input": [
					{"type": "message", "role": "user", "content": "Echo hi."},
					{"type": "message", "role": "assistant", "content": "Calling."},
					{"type": "function_call", "call_id": "call_1", "name": "echo", "arguments": "{\"s\":\"hi\"}"},
					{"type": "function_call", "call_id": "call_2", "name": "now", "arguments": "{broken"},
					{"type": "function_call_output", "call_id": "call_1", "output": "hi"},
					{"type": "function_call_output", "call_id": "call_2", "output": ""},
					{"type": "message", "role": "user", "content": "Go on."}
				]
			}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := responsesParams(tc.model, tc.req)
			if err != nil {
				t.Fatalf("responsesParams() error = %v", err)
			}
			if diff := cmp.Diff(decode(t, tc.want), asJSON(t, p)); diff != "" {
				t.Errorf("responsesParams() body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChatParams(t *testing.T) {
	t.Parallel()
	p, err := chatParams("gpt-test", conversation)
	if err != nil {
		t.Fatalf("chatParams() error = %v", err)
	}
	want := `{
		"model": "gpt-test",
		"max_completion_tokens": 4096,
		"reasoning_effort": "low",
		"tools": [
			{"type": "function", "function": {"name": "echo", "description": "Echoes.", "strict": false, "parameters": {"type":"object","properties":{"s":{"type":"string"}}}}},
			{"type": "function", "function": {"name": "now", "strict": false, "parameters": {"type":"object","properties":{}}}}
		],
		"messages": [
			{"role": "system", "content": "Be brief."},
			{"role": "user", "content": "Echo hi."},
			{"role": "assistant", "content": "Calling.", "tool_calls": [
				{"type": "function", "id": "call_1", "function": {"name": "echo", "arguments": "{\"s\":\"hi\"}"}},
				{"type": "function", "id": "call_2", "function": {"name": "now", "arguments": "{broken"}}
			]},
			{"role": "tool", "tool_call_id": "call_1", "content": "hi"},
			{"role": "tool", "tool_call_id": "call_2", "content": ""},
			{"role": "user", "content": "Go on."}
		]
	}`
	if diff := cmp.Diff(decode(t, want), asJSON(t, p)); diff != "" {
		t.Errorf("chatParams() body mismatch (-want +got):\n%s", diff)
	}
}

func TestParamsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  provider.Request
		want string
	}{
		{
			name: "bad schema",
			req:  provider.Request{Tools: []provider.Tool{{Name: "x", InputSchema: json.RawMessage(`"object"`)}}},
			want: `openai: tool "x": input schema is not a JSON object`,
		},
		{
			name: "unknown role",
			req:  provider.Request{Messages: []provider.Message{{Role: "system", Text: "x"}}},
			want: `openai: message 0: unknown role "system" (known: assistant, user)`,
		},
		{
			name: "empty message",
			req:  provider.Request{Messages: []provider.Message{{Role: provider.User}}},
			want: "openai: message 0: the user message is empty",
		},
		{
			name: "assistant tool result",
			req:  provider.Request{Messages: []provider.Message{{Role: provider.Assistant, ToolResults: []provider.ToolResult{{CallID: "a"}}}}},
			want: "openai: message 0: an assistant message cannot carry tool results",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := responsesParams("m", tc.req); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("responsesParams() error = %v, want one starting with %q", err, tc.want)
			}
			if _, err := chatParams("m", tc.req); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("chatParams() error = %v, want one starting with %q", err, tc.want)
			}
		})
	}
}

func TestFromResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body string // a Responses API response
		want provider.Response
	}{
		{
			name: "text",
			body: `{"id":"resp_1","object":"response","status":"completed","output":[
				{"type":"reasoning","id":"rs_1","summary":[]},
				{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[
					{"type":"output_text","text":"Hello, ","annotations":[]},
					{"type":"output_text","text":"world.","annotations":[]}]}],
				"usage":{"input_tokens":30,"output_tokens":4,"total_tokens":34,"input_tokens_details":{"cached_tokens":20},"output_tokens_details":{"reasoning_tokens":0}}}`,
			want: provider.Response{
				Text:       "Hello, world.",
				StopReason: "completed",
				Usage:      provider.Usage{InputTokens: 30, OutputTokens: 4, CachedTokens: 20},
			},
		},
		{
			name: "tool calls",
			body: `{"id":"resp_2","object":"response","status":"completed","output":[
				{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{\"s\":\"hi\"}","status":"completed"},
				{"type":"function_call","id":"fc_2","call_id":"call_2","name":"now","arguments":"","status":"completed"},
				{"type":"function_call","id":"fc_3","call_id":"call_3","name":"bad","arguments":"{oops","status":"completed"}],
				"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}`,
			want: provider.Response{
				ToolCalls: []provider.ToolCall{
					{ID: "call_1", Name: "echo", Arguments: json.RawMessage(`{"s":"hi"}`)},
					{ID: "call_2", Name: "now", Arguments: json.RawMessage(`{}`)},
					{ID: "call_3", Name: "bad", Arguments: json.RawMessage(`"{oops"`)},
				},
				StopReason: "completed",
				Usage:      provider.Usage{InputTokens: 10, OutputTokens: 5},
			},
		},
		{
			name: "incomplete",
			body: `{"id":"resp_3","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[
				{"type":"message","id":"msg_1","role":"assistant","status":"incomplete","content":[{"type":"output_text","text":"Trunc","annotations":[]}]}],
				"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}`,
			want: provider.Response{
				Text:       "Trunc",
				StopReason: "max_output_tokens",
				Usage:      provider.Usage{InputTokens: 1, OutputTokens: 2},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var r responses.Response
			if err := json.Unmarshal([]byte(tc.body), &r); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, fromResponse(&r)); diff != "" {
				t.Errorf("fromResponse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromChat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		body    string // a Chat Completions response
		want    provider.Response
		wantErr string
	}{
		{
			name: "tool calls",
			body: `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
				"message":{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"s\":\"hi\"}"}},
					{"id":"call_2","type":"function","function":{"name":"now","arguments":""}}]}}],
				"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":8}}}`,
			want: provider.Response{
				ToolCalls: []provider.ToolCall{
					{ID: "call_1", Name: "echo", Arguments: json.RawMessage(`{"s":"hi"}`)},
					{ID: "call_2", Name: "now", Arguments: json.RawMessage(`{}`)},
				},
				StopReason: "tool_calls",
				Usage:      provider.Usage{InputTokens: 12, OutputTokens: 7, CachedTokens: 8},
			},
		},
		{
			name: "text",
			body: `{"id":"chatcmpl-2","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop",
				"message":{"role":"assistant","content":"Done."}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
			want: provider.Response{Text: "Done.", StopReason: "stop", Usage: provider.Usage{InputTokens: 1, OutputTokens: 1}},
		},
		{
			name:    "no choices",
			body:    `{"id":"chatcmpl-3","object":"chat.completion","model":"m","choices":[]}`,
			wantErr: "openai: the chat completion has no choices",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c sdk.ChatCompletion
			if err := json.Unmarshal([]byte(tc.body), &c); err != nil {
				t.Fatal(err)
			}
			got, err := fromChat(&c)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("fromChat() error = %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fromChat() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		model   string
		opts    provider.Options
		wantAPI string
		wantErr string
	}{
		{name: "default api", model: "m", opts: provider.Options{APIKey: "k", MaxRetries: -1}, wantAPI: "responses"},
		{name: "chat", model: "m", opts: provider.Options{APIKey: "k", API: "chat"}, wantAPI: "chat"},
		{name: "compatible server without key", model: "llama3", opts: provider.Options{BaseURL: "http://localhost:11434/v1"}, wantAPI: "responses"},
		{name: "unknown api", model: "m", opts: provider.Options{APIKey: "k", API: "foo"}, wantErr: `openai: unknown api "foo" (known: responses, chat)`},
		{name: "no key", model: "m", wantErr: "openai: no API key: set OPENAI_API_KEY"},
		{name: "no model", opts: provider.Options{APIKey: "k"}, wantErr: "openai: no model name: name one, such as gpt-5-mini"},
		{name: "bad base URL", model: "m", opts: provider.Options{BaseURL: "localhost:11434"}, wantErr: `openai: base URL "localhost:11434" is not an absolute http or https URL (for example http://localhost:11434/v1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tc.model, tc.opts)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("New(%q, %+v) error = %q, want %q", tc.model, tc.opts, gotErr, tc.wantErr)
			}
			if tc.wantErr != "" {
				return
			}
			if got := p.(*client).api; got != tc.wantAPI {
				t.Errorf("New(%q, %+v) uses api %q, want %q", tc.model, tc.opts, got, tc.wantAPI)
			}
		})
	}
}
