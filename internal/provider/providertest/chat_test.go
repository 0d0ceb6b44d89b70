package providertest_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/mst-eval/mst/internal/provider/providertest"
)

func summarizeChat(c *openai.ChatCompletion) (openaiTurn, []string) {
	var s openaiTurn
	var ids []string
	if len(c.Choices) > 0 {
		ch := c.Choices[0]
		s.Text, s.Finish = ch.Message.Content, ch.FinishReason
		for _, tc := range ch.Message.ToolCalls {
			s.Calls = append(s.Calls, tc.Function.Name+" "+tc.Function.Arguments)
			ids = append(ids, tc.ID)
		}
	}
	s.Usage = [2]int64{c.Usage.PromptTokens, c.Usage.CompletionTokens}
	return s, ids
}

func TestChatSDK(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, weatherScript())
			client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("dummy"))
			complete := func(params openai.ChatCompletionNewParams) *openai.ChatCompletion {
				t.Helper()
				if !stream {
					c, err := client.Chat.Completions.New(t.Context(), params)
					if err != nil {
						t.Fatalf("Chat.Completions.New: %v", err)
					}
					return c
				}
				params.StreamOptions.IncludeUsage = openai.Bool(true)
				s := client.Chat.Completions.NewStreaming(t.Context(), params)
				defer s.Close()
				var acc openai.ChatCompletionAccumulator
				for s.Next() {
					if !acc.AddChunk(s.Current()) {
						t.Fatalf("ChatCompletionAccumulator.AddChunk refused chunk %s", s.Current().RawJSON())
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("Chat.Completions.NewStreaming: %v", err)
				}
				return &acc.ChatCompletion
			}

			prompt := "What is the weather in Paris?"
			params := openai.ChatCompletionNewParams{
				Model: "gpt-test",
				Messages: []openai.ChatCompletionMessageParamUnion{
					openai.SystemMessage("be brief"),
					openai.UserMessage(prompt),
				},
				Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
					Name:       "weather_get_weather",
					Parameters: shared.FunctionParameters{"type": "object"},
				})},
			}
			first := complete(params)
			got, ids := summarizeChat(first)
			want := openaiTurn{
				Text: "Let me check.", Calls: []string{`weather_get_weather {"city":"Paris"}`},
				Finish: "tool_calls", Usage: [2]int64{100, 20},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("first turn (-want +got):\n%s", diff)
			}
			if len(ids) != 1 || ids[0] == "" {
				t.Fatalf("tool call ids = %q, want one", ids)
			}

			params.Messages = append(params.Messages,
				first.Choices[0].Message.ToParam(),
				openai.ToolMessage("sunny", ids[0]),
			)
			second := complete(params)
			got, _ = summarizeChat(second)
			want = openaiTurn{Text: "It is sunny in Paris.", Finish: "stop", Usage: [2]int64{10, 5}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("second turn (-want +got):\n%s", diff)
			}

			var recs []providertest.Request
			for _, r := range srv.Requests() {
				r.Header, r.Body = nil, nil
				recs = append(recs, r)
			}
			base := providertest.Request{
				Format: "chat", Path: "/v1/chat/completions", Model: "gpt-test", Stream: stream,
				Tools: []string{"weather_get_weather"}, FirstUserText: prompt, Status: http.StatusOK,
			}
			next := base
			next.Turn = 1
			if diff := cmp.Diff([]providertest.Request{base, next}, recs); diff != "" {
				t.Errorf("Requests() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChatRawStream checks the chunk sequence, the usage chunk and the
// terminator as a plain client reads them.
func TestChatRawStream(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{
		Text:      "ok",
		ToolCalls: []providertest.Call{{Tool: "a"}, {Tool: "b", Arguments: []int{1}}},
	}}}}})
	for _, includeUsage := range []bool{false, true} {
		opts := `"stream_options":{"include_usage":false}`
		if includeUsage {
			opts = `"stream_options":{"include_usage":true}`
		}
		ans := post(t, srv.URL+"/v1/chat/completions",
			`{"model":"m","stream":true,`+opts+`,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],
			"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]}`)
		evs := events(t, ans.body)
		if last := evs[len(evs)-1]; last.data != "[DONE]" || last.name != "" {
			t.Fatalf("include_usage %v: last event = %+v, want data: [DONE]", includeUsage, last)
		}
		var text, finish string
		args := map[float64]string{}
		names := map[float64]string{}
		var usageChunks int
		for _, e := range evs[:len(evs)-1] {
			chunk := decode(t, e.data)
			if chunk["object"] != "chat.completion.chunk" {
				t.Errorf("chunk object = %v", chunk["object"])
			}
			if u, ok := chunk["usage"]; ok != includeUsage {
				t.Errorf("include_usage %v: chunk has usage %v", includeUsage, ok)
			} else if u != nil {
				usageChunks++
				if got := u.(map[string]any)["total_tokens"]; got != float64(15) {
					t.Errorf("total_tokens = %v, want 15", got)
				}
				continue
			}
			choice := chunk["choices"].([]any)[0].(map[string]any)
			if f, ok := choice["finish_reason"].(string); ok {
				finish = f
			}
			delta := choice["delta"].(map[string]any)
			if c, ok := delta["content"].(string); ok {
				text += c
			}
			calls, _ := delta["tool_calls"].([]any)
			for _, tc := range calls {
				tc := tc.(map[string]any)
				fn := tc["function"].(map[string]any)
				i := tc["index"].(float64)
				if n, ok := fn["name"].(string); ok {
					names[i] += n
				}
				args[i] += fn["arguments"].(string)
			}
		}
		if text != "ok" || finish != "tool_calls" {
			t.Errorf("include_usage %v: text %q, finish %q", includeUsage, text, finish)
		}
		if diff := cmp.Diff(map[float64]string{0: "{}", 1: "[1]"}, args); diff != "" {
			t.Errorf("arguments (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[float64]string{0: "a", 1: "b"}, names); diff != "" {
			t.Errorf("names (-want +got):\n%s", diff)
		}
		if want := map[bool]int{false: 0, true: 1}[includeUsage]; usageChunks != want {
			t.Errorf("include_usage %v: %d usage chunks, want %d", includeUsage, usageChunks, want)
		}
	}
}

func TestChatFault(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Faults: []providertest.Fault{{Status: 429, Times: 1}}})
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("dummy"), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("Chat.Completions.New error = %v, want *openai.Error", err)
	}
	if apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
		t.Errorf("error = HTTP %d %s, want HTTP 429 rate_limit_exceeded", apiErr.StatusCode, apiErr.Code)
	}
	if got := apiErr.Response.Header.Get("retry-after-ms"); got != "1" {
		t.Errorf("retry-after-ms = %q, want 1", got)
	}
}
