package providertest_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/provider/providertest"
)

// weatherScript calls a weather tool, then answers from its result.
func weatherScript() providertest.Script {
	return providertest.Script{Conversations: []providertest.Conversation{
		{Match: "unrelated", Turns: []providertest.Turn{{Text: "wrong conversation"}}},
		{Match: "weather", Turns: []providertest.Turn{
			{
				Text:         "Let me check.",
				ToolCalls:    []providertest.Call{{Tool: "get_weather", Arguments: map[string]any{"city": "Paris"}}},
				InputTokens:  100,
				OutputTokens: 20,
			},
			{Text: "It is sunny in Paris."},
		}},
	}}
}

// anthropicTurn is what a test checks of an Anthropic answer.
type anthropicTurn struct {
	Text       string
	Calls      []string // name + " " + input
	StopReason string
	Usage      [2]int64
}

func summarizeAnthropic(m *anthropic.Message) anthropicTurn {
	var s anthropicTurn
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			s.Text += b.Text
		case "tool_use":
			s.Calls = append(s.Calls, b.Name+" "+string(b.Input))
		}
	}
	s.StopReason = string(m.StopReason)
	s.Usage = [2]int64{m.Usage.InputTokens, m.Usage.OutputTokens}
	return s
}

func TestAnthropicSDK(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, weatherScript())
			client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("dummy"))
			complete := func(params anthropic.MessageNewParams) *anthropic.Message {
				t.Helper()
				if !stream {
					m, err := client.Messages.New(t.Context(), params)
					if err != nil {
						t.Fatalf("Messages.New: %v", err)
					}
					return m
				}
				s := client.Messages.NewStreaming(t.Context(), params)
				defer s.Close()
				var m anthropic.Message
				for s.Next() {
					if err := m.Accumulate(s.Current()); err != nil {
						t.Fatalf("Accumulate: %v", err)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("Messages.NewStreaming: %v", err)
				}
				return &m
			}

			prompt := "What is the weather in Paris?"
			params := anthropic.MessageNewParams{
				Model:     "claude-test",
				MaxTokens: 1024,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
				Tools: []anthropic.ToolUnionParam{
					{OfTool: &anthropic.ToolParam{Name: "mcp__clock__now"}},
					{OfTool: &anthropic.ToolParam{
						Name:        "mcp__wx__get_weather",
						InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
					}},
				},
			}
			first := complete(params)
			want := anthropicTurn{
				Text:       "Let me check.",
				Calls:      []string{`mcp__wx__get_weather {"city":"Paris"}`},
				StopReason: "tool_use",
				Usage:      [2]int64{100, 20},
			}
			if diff := cmp.Diff(want, summarizeAnthropic(first)); diff != "" {
				t.Errorf("first turn (-want +got):\n%s", diff)
			}
			var useID string
			for _, b := range first.Content {
				if b.Type == "tool_use" {
					useID = b.ID
				}
			}
			if !strings.HasPrefix(useID, "toolu_") {
				t.Errorf("tool_use id = %q, want toolu_…", useID)
			}

			params.Messages = append(params.Messages,
				first.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(useID, "sunny", false)),
			)
			second := complete(params)
			want = anthropicTurn{Text: "It is sunny in Paris.", StopReason: "end_turn", Usage: [2]int64{10, 5}}
			if diff := cmp.Diff(want, summarizeAnthropic(second)); diff != "" {
				t.Errorf("second turn (-want +got):\n%s", diff)
			}

			var got []providertest.Request
			for _, r := range srv.Requests() {
				r.Header, r.Body = nil, nil
				got = append(got, r)
			}
			base := providertest.Request{
				Format: "anthropic", Path: "/v1/messages", Model: "claude-test", Stream: stream,
				Tools:         []string{"mcp__clock__now", "mcp__wx__get_weather"},
				FirstUserText: prompt, Status: http.StatusOK,
			}
			second0 := base
			second0.Turn = 1
			if diff := cmp.Diff([]providertest.Request{base, second0}, got); diff != "" {
				t.Errorf("Requests() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnthropicFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		faults     []providertest.Fault
		retries    int
		wantStatus int // 0: the call succeeds
		wantType   string
		wantLog    []int
	}{
		{
			name:       "rate limit without retries",
			faults:     []providertest.Fault{{Status: 429, Times: 1, Message: "slow down"}},
			wantStatus: 429, wantType: "rate_limit_error", wantLog: []int{429},
		},
		{
			name:       "overloaded",
			faults:     []providertest.Fault{{Status: 529, Times: 1}},
			wantStatus: 529, wantType: "overloaded_error", wantLog: []int{529},
		},
		{
			name:    "retried until the script answers",
			faults:  []providertest.Fault{{Status: 429, Times: 1}, {Status: 500, Times: 1}},
			retries: 2, wantLog: []int{429, 500, 200},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, providertest.Script{Faults: tt.faults})
			client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("dummy"),
				option.WithMaxRetries(tt.retries))
			m, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{
				Model: "claude-test", MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			})
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("Messages.New: %v", err)
				}
				if got := summarizeAnthropic(m).Text; got != "(script exhausted)" {
					t.Errorf("text = %q, want (script exhausted)", got)
				}
			} else {
				var apiErr *anthropic.Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("Messages.New error = %v, want *anthropic.Error", err)
				}
				if apiErr.StatusCode != tt.wantStatus || string(apiErr.Type()) != tt.wantType {
					t.Errorf("error = HTTP %d %s, want HTTP %d %s", apiErr.StatusCode, apiErr.Type(), tt.wantStatus, tt.wantType)
				}
				if tt.faults[0].Message != "" && apiErr.Message != tt.faults[0].Message {
					t.Errorf("error message = %q, want %q", apiErr.Message, tt.faults[0].Message)
				}
			}
			var log []int
			for _, r := range srv.Requests() {
				log = append(log, r.Status)
			}
			if diff := cmp.Diff(tt.wantLog, log); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnthropicRawStream checks the event stream as Claude Code reads it.
func TestAnthropicRawStream(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{
		ToolCalls: []providertest.Call{
			{Tool: "echo", Arguments: map[string]any{"message": "héllo wörld"}},
			{Tool: "greet (structured)"},
		},
	}}}}})
	body := `{"model":"m","max_tokens":5,"stream":true,
		"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"say hello"}]}],
		"tools":[{"name":"mcp__everything__echo"},{"name":"mcp__go__greet_structured"}]}`
	ans := post(t, srv.URL+"/v1/messages?beta=true", body)
	if ans.status != http.StatusOK || !strings.HasPrefix(ans.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("POST = %d %s, want 200 text/event-stream: %s", ans.status, ans.header.Get("Content-Type"), ans.body)
	}
	evs := events(t, ans.body)
	wantNames := []string{
		"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop",
	}
	if diff := cmp.Diff(wantNames, names(evs)); diff != "" {
		t.Fatalf("event names (-want +got):\n%s", diff)
	}
	for _, e := range evs {
		if got := decode(t, e.data)["type"]; got != e.name {
			t.Errorf("event %s carries type %v", e.name, got)
		}
	}
	start := decode(t, evs[2].data)["content_block"].(map[string]any)
	if diff := cmp.Diff(map[string]any{
		"type": "tool_use", "id": start["id"], "name": "mcp__everything__echo", "input": map[string]any{},
	}, start); diff != "" {
		t.Errorf("first content_block_start (-want +got):\n%s", diff)
	}
	var args string
	for _, e := range evs[3:5] {
		args += decode(t, e.data)["delta"].(map[string]any)["partial_json"].(string)
	}
	if args != `{"message":"héllo wörld"}` {
		t.Errorf("reassembled partial_json = %q", args)
	}
	if name := decode(t, evs[6].data)["content_block"].(map[string]any)["name"]; name != "mcp__go__greet_structured" {
		t.Errorf("second tool name = %v, want mcp__go__greet_structured", name)
	}
	delta := decode(t, evs[10].data)
	if got := delta["delta"].(map[string]any)["stop_reason"]; got != "tool_use" {
		t.Errorf("message_delta stop_reason = %v, want tool_use", got)
	}
	if got := delta["usage"].(map[string]any)["output_tokens"]; got != float64(5) {
		t.Errorf("message_delta output_tokens = %v, want 5", got)
	}

	rec := srv.Requests()[0]
	if rec.Query != "beta=true" || rec.FirstUserText != "<system-reminder>x</system-reminder>\nsay hello" {
		t.Errorf("recorded query %q, first user text %q", rec.Query, rec.FirstUserText)
	}
}

func TestAnthropicInvalidRequest(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{})
	tests := []struct {
		body, wantMessage string
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens: Field required"},
		{`{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, "model: Field required"},
		{`{"model":"m","max_tokens":1,"messages":[]}`, "messages: at least one message is required"},
		{`not json`, "providertest: request body is not a Messages request"},
	}
	for _, tt := range tests {
		ans := post(t, srv.URL+"/v1/messages", tt.body)
		got := decode(t, string(ans.body))
		e, _ := got["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if ans.status != http.StatusBadRequest || got["type"] != "error" || e["type"] != "invalid_request_error" ||
			!strings.HasPrefix(msg, tt.wantMessage) {
			t.Errorf("POST %s = %d %s, want 400 invalid_request_error %q", tt.body, ans.status, ans.body, tt.wantMessage)
		}
	}
}
