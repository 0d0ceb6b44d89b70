package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

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

func TestNewParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		model string
		req   provider.Request
		want  string
	}{
		{
			name:  "first turn",
			model: "claude-test",
			req: provider.Request{
				System:   "Be brief.",
				Messages: []provider.Message{{Role: provider.User, Text: "Echo hi."}},
				Tools: []provider.Tool{
					{Name: "echo", Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}},"required":["s"],"additionalProperties":false}`)},
					{Name: "now"},
				},
			},
			want: `{
				"model": "claude-test",
				"max_tokens": 4096,
				"system": [{"type": "text", "text": "Be brief."}],
				"messages": [{"role": "user", "content": [{"type": "text", "text": "Echo hi."}]}],
				"tools": [
					{"name": "echo", "description": "Echoes.", "input_schema": {"type":"object","properties":{"s":{"type":"string"}},"required":["s"],"additionalProperties":false}},
					{"name": "now", "input_schema": {"type": "object", "properties": {}}}
				]
			}`,
		},
		{
			name:  "tool round trip",
			model: "claude-test",
			req: provider.Request{
				Model:           "claude-other",
				MaxTokens:       100,
				ReasoningEffort: "high",
				Messages: []provider.Message{
					{Role: provider.User, Text: "Echo hi."},
					{Role: provider.Assistant, Text: "Calling.", Reasoning: json.RawMessage(`[{"type":"thinking","thinking":"Echo it.","signature":"sig1"},{"type":"redacted_thinking","data":"opaque"}]`), ToolCalls: []provider.ToolCall{
						{ID: "toolu_1", Name: "echo", Arguments: json.RawMessage(`{"s":"hi"}`)},
						{ID: "toolu_2", Name: "now"},
					}},
					{Role: provider.User, Text: "Go on.", ToolResults: []provider.ToolResult{
						{CallID: "toolu_1", Name: "echo", Content: "hi"},
						{CallID: "toolu_2", Name: "now", Content: "", IsError: true},
					}},
				},
			},
			want: `{
				"model": "claude-other",
				"max_tokens": 24676,
				"thinking": {"type": "enabled", "budget_tokens": 24576},
				"messages": [
					{"role": "user", "content": [{"type": "text", "text": "Echo hi."}]},
					{"role": "assistant", "content": [
						{"type": "thinking", "thinking": "Echo it.", "signature": "sig1"},
						{"type": "redacted_thinking", "data": "opaque"},
						{"type": "text", "text": "Calling."},
						{"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"s": "hi"}},
						{"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}}
					]},
					{"role": "user", "content": [
						{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "hi"}]},
						{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true},
						{"type": "text", "text": "Go on."}
					]}
				]
			}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := newParams(tc.model, tc.req)
			if err != nil {
				t.Fatalf("newParams() error = %v", err)
			}
			if diff := cmp.Diff(decode(t, tc.want), asJSON(t, p)); diff != "" {
				t.Errorf("newParams() body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewParamsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  provider.Request
		want string
	}{
		{
			name: "bad schema",
			req:  provider.Request{Tools: []provider.Tool{{Name: "x", InputSchema: json.RawMessage(`[]`)}}},
			want: `anthropic: tool "x": input schema is not a JSON object`,
		},
		{
			name: "unknown role",
			req:  provider.Request{Messages: []provider.Message{{Role: "tool", Text: "x"}}},
			want: `anthropic: message 0: unknown role "tool" (known: assistant, user)`,
		},
		{
			name: "empty message",
			req:  provider.Request{Messages: []provider.Message{{Role: provider.User, Text: "x"}, {Role: provider.Assistant}}},
			want: "anthropic: message 1: the assistant message is empty",
		},
		{
			name: "effort not a level",
			req:  provider.Request{ReasoningEffort: "extreme", Messages: []provider.Message{{Role: provider.User, Text: "x"}}},
			want: `anthropic: reasoning effort "extreme" is not one of minimal, low, medium, high`,
		},
		{
			name: "effort on a model without thinking",
			req:  provider.Request{Model: "claude-3-5-haiku-20241022", ReasoningEffort: "low", Messages: []provider.Message{{Role: provider.User, Text: "x"}}},
			want: "anthropic: model claude-3-5-haiku-20241022 has no extended thinking",
		},
		{
			name: "foreign reasoning",
			req: provider.Request{Messages: []provider.Message{{Role: provider.User, Text: "x"},
				{Role: provider.Assistant, Text: "y", Reasoning: json.RawMessage(`{"encrypted_content":"z"}`)}}},
			want: "anthropic: message 1: the reasoning is not this provider's",
		},
		{
			name: "user tool call",
			req:  provider.Request{Messages: []provider.Message{{Role: provider.User, ToolCalls: []provider.ToolCall{{ID: "a"}}}}},
			want: "anthropic: message 0: a user message cannot carry tool calls",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := newParams("m", tc.req)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("newParams() error = %v, want one starting with %q", err, tc.want)
			}
		})
	}
}

func TestFromMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		msg  string // a Messages API response body
		want provider.Response
	}{
		{
			name: "text",
			msg: `{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"end_turn",
				"content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"Hello, "},{"type":"text","text":"world."}],
				"usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":100,"cache_creation_input_tokens":20}}`,
			want: provider.Response{
				Text:       "Hello, world.",
				StopReason: "end_turn",
				Usage:      provider.Usage{InputTokens: 123, OutputTokens: 4, CachedTokens: 100},
				Reasoning:  json.RawMessage(`[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"redacted_thinking","data":"d"}]`),
			},
		},
		{
			name: "tool calls",
			msg: `{"id":"msg_2","type":"message","role":"assistant","model":"m","stop_reason":"tool_use",
				"content":[{"type":"text","text":"Let me look."},
					{"type":"tool_use","id":"toolu_1","name":"echo","input":{"s":"hi"}},
					{"type":"tool_use","id":"toolu_2","name":"now","input":{}}],
				"usage":{"input_tokens":10,"output_tokens":5}}`,
			want: provider.Response{
				Text: "Let me look.",
				ToolCalls: []provider.ToolCall{
					{ID: "toolu_1", Name: "echo", Arguments: json.RawMessage(`{"s":"hi"}`)},
					{ID: "toolu_2", Name: "now", Arguments: json.RawMessage(`{}`)},
				},
				StopReason: "tool_use",
				Usage:      provider.Usage{InputTokens: 10, OutputTokens: 5},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var m sdk.Message
			if err := json.Unmarshal([]byte(tc.msg), &m); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, fromMessage(&m)); diff != "" {
				t.Errorf("fromMessage() mismatch (-want +got):\n%s", diff)
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
		wantErr string
	}{
		{name: "ok", model: "m", opts: provider.Options{APIKey: "k", MaxRetries: -1}},
		{name: "base URL", model: "m", opts: provider.Options{APIKey: "k", BaseURL: "http://127.0.0.1:1"}},
		{name: "no key", model: "m", wantErr: "anthropic: no API key: set ANTHROPIC_API_KEY"},
		{name: "no model", opts: provider.Options{APIKey: "k"}, wantErr: "anthropic: no model name: name one, such as claude-sonnet-4-5"},
		{name: "base URL with /v1", model: "m", opts: provider.Options{APIKey: "k", BaseURL: "http://127.0.0.1:1/v1"}, wantErr: `anthropic: base URL: the path of "http://127.0.0.1:1/v1" ends in /v1, but the Anthropic SDK appends /v1/messages to the base URL itself, so its requests would go to /v1/v1/messages; drop /v1: write "http://127.0.0.1:1"`},
		{name: "bad base URL", model: "m", opts: provider.Options{APIKey: "k", BaseURL: "localhost:8080"}, wantErr: `anthropic: base URL "localhost:8080" is not an absolute http or https URL (for example https://api.anthropic.com)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tc.model, tc.opts)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("New(%q, %+v) error = %q, want %q", tc.model, tc.opts, got, tc.wantErr)
			}
			if (p == nil) == (tc.wantErr == "") {
				t.Errorf("New(%q, %+v) = %v, want a provider exactly when there is no error", tc.model, tc.opts, p)
			}
		})
	}
}
