package providertest_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/mst-eval/mst/internal/provider/providertest"
)

// openaiTurn is what a test checks of an OpenAI answer.
type openaiTurn struct {
	Text   string
	Calls  []string // name + " " + arguments, with " namespace=" + namespace if any
	Finish string   // Chat Completions only
	Usage  [2]int64
}

func summarizeResponse(r *responses.Response) (openaiTurn, []string) {
	s := openaiTurn{Text: r.OutputText(), Usage: [2]int64{r.Usage.InputTokens, r.Usage.OutputTokens}}
	var callIDs []string
	for _, item := range r.Output {
		if item.Type != "function_call" {
			continue
		}
		fc := item.AsFunctionCall()
		call := fc.Name + " " + fc.Arguments
		if fc.Namespace != "" {
			call += " namespace=" + fc.Namespace
		}
		s.Calls = append(s.Calls, call)
		callIDs = append(callIDs, fc.CallID)
	}
	return s, callIDs
}

func TestResponsesSDK(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, weatherScript())
			client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("dummy"))
			complete := func(params responses.ResponseNewParams) *responses.Response {
				t.Helper()
				if !stream {
					r, err := client.Responses.New(t.Context(), params)
					if err != nil {
						t.Fatalf("Responses.New: %v", err)
					}
					return r
				}
				s := client.Responses.NewStreaming(t.Context(), params)
				defer s.Close()
				var text string
				var final *responses.Response
				for s.Next() {
					ev := s.Current()
					switch ev.Type {
					case "response.output_text.delta":
						text += ev.Delta
					case "response.completed":
						r := ev.AsResponseCompleted().Response
						final = &r
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("Responses.NewStreaming: %v", err)
				}
				if final == nil {
					t.Fatal("Responses.NewStreaming: no response.completed event")
				}
				if text != final.OutputText() {
					t.Errorf("text deltas = %q, completed response text = %q", text, final.OutputText())
				}
				return final
			}

			prompt := "What is the weather in Paris?"
			params := responses.ResponseNewParams{
				Model: "gpt-test",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
				Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
					Name:       "get_weather",
					Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
				}}},
			}
			first := complete(params)
			got, callIDs := summarizeResponse(first)
			want := openaiTurn{Text: "Let me check.", Calls: []string{`get_weather {"city":"Paris"}`}, Usage: [2]int64{100, 20}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("first turn (-want +got):\n%s", diff)
			}
			if len(callIDs) != 1 || callIDs[0] == "" {
				t.Fatalf("call ids = %q, want one", callIDs)
			}

			fc := first.Output[1].AsFunctionCall().ToParam()
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage(prompt, responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfMessage("Let me check.", responses.EasyInputMessageRoleAssistant),
				{OfFunctionCall: &fc},
				{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: openai.String(callIDs[0]),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("sunny")},
				}},
			}}
			second := complete(params)
			got, _ = summarizeResponse(second)
			want = openaiTurn{Text: "It is sunny in Paris.", Usage: [2]int64{10, 5}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("second turn (-want +got):\n%s", diff)
			}

			var recs []providertest.Request
			for _, r := range srv.Requests() {
				r.Header, r.Body = nil, nil
				recs = append(recs, r)
			}
			base := providertest.Request{
				Format: "responses", Path: "/v1/responses", Model: "gpt-test", Stream: stream,
				Tools: []string{"get_weather"}, FirstUserText: prompt, Status: http.StatusOK,
			}
			next := base
			next.Turn = 1
			if diff := cmp.Diff([]providertest.Request{base, next}, recs); diff != "" {
				t.Errorf("Requests() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResponsesCodex sends a request shaped like the Codex CLI's: namespace
// tools, several user messages, reasoning items, and streaming.
func TestResponsesCodex(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Match: "echo hi",
		Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "hi"}}}},
			{ToolCalls: []providertest.Call{{Tool: "mcp__everything__add", Arguments: map[string]any{"a": 1, "b": 2}}}},
			{Text: "done", InputTokens: 7, OutputTokens: 3},
		},
	}}})
	const tools = `"tools":[{"type":"function","name":"shell"},
		{"type":"namespace","name":"mcp__everything","description":"","tools":[
			{"type":"function","name":"echo"},{"type":"function","name":"add"}]},
		{"type":"web_search"}]`
	const user = `{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"please echo hi"}]}`
	const turn1 = `{"type":"reasoning","summary":[]},
		{"type":"function_call","name":"echo","namespace":"mcp__everything","arguments":"{}","call_id":"c1"},
		{"type":"function_call_output","call_id":"c1","output":"hi"}`
	tests := []struct {
		name, input string
		wantTurn    int
		want        openaiTurn
	}{
		{"first", user, 0, openaiTurn{
			Calls: []string{`echo {"message":"hi"} namespace=mcp__everything`}, Usage: [2]int64{10, 5},
		}},
		{"second", user + "," + turn1, 1, openaiTurn{
			Calls: []string{`add {"a":1,"b":2} namespace=mcp__everything`}, Usage: [2]int64{10, 5},
		}},
		{"third", user + "," + turn1 + "," + turn1 + `,{"role":"user","content":"more"}`, 2, openaiTurn{
			Text: "done", Usage: [2]int64{7, 3},
		}},
	}
	for _, tt := range tests {
		ans := post(t, srv.URL+"/v1/responses", `{"model":"gpt-test","stream":true,`+tools+`,"input":[`+tt.input+`]}`)
		if ans.status != http.StatusOK {
			t.Fatalf("%s: POST = %d %s", tt.name, ans.status, ans.body)
		}
		evs := events(t, ans.body)
		var text string
		var doneItems []map[string]any
		var completed map[string]any
		for i, e := range evs {
			data := decode(t, e.data)
			if data["type"] != e.name || data["sequence_number"] != float64(i) {
				t.Errorf("%s: event %d %s carries type %v, sequence_number %v", tt.name, i, e.name, data["type"], data["sequence_number"])
			}
			switch e.name {
			case "response.output_text.delta":
				text += data["delta"].(string)
			case "response.output_item.done":
				doneItems = append(doneItems, data["item"].(map[string]any))
			case "response.completed":
				completed = data["response"].(map[string]any)
			}
		}
		if evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" {
			t.Errorf("%s: events = %q, want response.created … response.completed", tt.name, names(evs))
		}
		got := openaiTurn{Text: text}
		for _, item := range doneItems {
			if item["type"] == "function_call" {
				got.Calls = append(got.Calls, item["name"].(string)+" "+item["arguments"].(string)+" namespace="+item["namespace"].(string))
			}
		}
		usage := completed["usage"].(map[string]any)
		got.Usage = [2]int64{int64(usage["input_tokens"].(float64)), int64(usage["output_tokens"].(float64))}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: answer (-want +got):\n%s", tt.name, diff)
		}
		if n := len(completed["output"].([]any)); n != len(doneItems) {
			t.Errorf("%s: completed response has %d output items, the stream finished %d", tt.name, n, len(doneItems))
		}
	}

	var gotTurns []int
	for _, r := range srv.Requests() {
		gotTurns = append(gotTurns, r.Turn)
		if r.FirstUserText != "<environment_context/>\nplease echo hi" {
			t.Errorf("FirstUserText = %q", r.FirstUserText)
		}
		if diff := cmp.Diff([]string{"shell", "mcp__everything.echo", "mcp__everything.add", "web_search"}, r.Tools); diff != "" {
			t.Errorf("Tools (-want +got):\n%s", diff)
		}
	}
	if diff := cmp.Diff([]int{0, 1, 2}, gotTurns); diff != "" {
		t.Errorf("recorded turns (-want +got):\n%s", diff)
	}
}

func TestResponsesFault(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Faults: []providertest.Fault{{Status: 500, Times: 2, Message: "boom"}}})
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("dummy"), option.WithMaxRetries(1))
	_, err := client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("Responses.New error = %v, want *openai.Error", err)
	}
	if apiErr.StatusCode != 500 || apiErr.Message != "boom" || apiErr.Type != "server_error" {
		t.Errorf("error = HTTP %d %s %q, want HTTP 500 server_error \"boom\"", apiErr.StatusCode, apiErr.Type, apiErr.Message)
	}
	r, err := client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil {
		t.Fatalf("Responses.New after the faults: %v", err)
	}
	if got := r.OutputText(); got != "(script exhausted)" {
		t.Errorf("text = %q, want (script exhausted)", got)
	}
	var statuses []int
	for _, r := range srv.Requests() {
		statuses = append(statuses, r.Status)
	}
	if diff := cmp.Diff([]int{500, 500, 200}, statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	ans := post(t, srv.URL+"/v1/responses", `{"input":"hi"}`)
	if ans.status != http.StatusBadRequest || !strings.Contains(string(ans.body), "'model'") {
		t.Errorf("POST without model = %d %s, want 400 naming model", ans.status, ans.body)
	}
}
