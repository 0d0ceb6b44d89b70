package providertest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

// offlineTool is a tool as its MCP server offers it.
type offlineTool struct {
	name, description, schema string
}

// The weather tools of the quickstart, with short descriptions that do not
// say "weather" or "server", so that a prompt naming only the server
// matches a tool only when the CLI's prefix (which holds the server name)
// is wrongly read as part of the tool's name.
var offlineTools = []offlineTool{
	{"wx_alerts", "Active warnings for a region, such as storms.", `{"type":"object","properties":{"region":{"type":"string"}},"required":["region"]}`},
	{"wx_forecast", "Daily forecast for a city: rain, snow, temperatures over the next days.", `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`},
	{"wx_now", "Conditions in a city right now: temperature, humidity, wind.", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`},
	{"wx_convert", "Convert a temperature between units.", `{"type":"object","properties":{"value":{"type":"number"},"from":{"type":"string","enum":["celsius","fahrenheit","kelvin"]},"to":{"type":"string","enum":["celsius","fahrenheit","kelvin"]}},"required":["value","from","to"]}`},
}

// offlinePrompts cover a call with a string argument, a multi-word place,
// an optional number, enums, and a prompt that names only the server.
var offlinePrompts = []string{
	"Will it rain in Oslo over the next 3 days?",
	"Are there storm warnings for the North Sea?",
	"How humid is it in Cairo right now?",
	"Convert 30 celsius to fahrenheit",
	"What can the weather server do?",
}

// offlineWire is one wire format as a CLI speaks it: how the CLI names and
// offers the tools, and how it sends the conversation.
type offlineWire struct {
	name string
	path func(stream bool) string
	// body is a request with the tools, the prompt (after the CLI's own
	// context text) and, when call is set, the model's call and the tool's
	// result.
	body func(stream bool, prompt string, call *offlineCall) string
	// read decodes an answer, streamed or not.
	read func(t *testing.T, stream bool, body []byte) offlineTurn
	// errorFlag is whether the format marks a tool result as an error
	// (Responses and Chat Completions send only the result's text).
	errorFlag bool
}

// offlineCall is a tool call of the history and its result.
type offlineCall struct {
	tool, args, result string
	isError            bool
}

// offlineTurn is an answer as the test compares it.
type offlineTurn struct {
	Text      string
	Call      string // "namespace|name args", "" when none
	In, Out   int64
	callName  string
	callArgs  string
	namespace string
}

func (o *offlineTurn) setCall(namespace, name, args string) {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err == nil {
		b, _ := json.Marshal(v)
		args = string(b)
	}
	o.namespace, o.callName, o.callArgs = namespace, name, args
	o.Call = namespace + "|" + name + " " + args
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var offlineWires = []offlineWire{
	{
		name: "anthropic (Claude Code)",
		path: func(bool) string { return "/v1/messages?beta=true" },
		body: func(stream bool, prompt string, call *offlineCall) string {
			var tools []string
			tools = append(tools, `{"name":"Bash","description":"Executes a given bash command in a shell.","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}`)
			for _, t := range offlineTools {
				tools = append(tools, fmt.Sprintf(`{"name":"mcp__weather__%s","description":%s,"input_schema":%s}`, t.name, jsonString(t.description), t.schema))
			}
			msgs := []string{fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":%s,"cache_control":{"type":"ephemeral"}}]}`, jsonString(prompt))}
			if call != nil {
				msgs = append(msgs,
					fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_9","name":"mcp__weather__%s","input":%s}]}`, call.tool, call.args),
					fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","is_error":%t,"content":[{"type":"text","text":%s}]}]}`, call.isError, jsonString(call.result)))
			}
			return fmt.Sprintf(`{"model":"claude-test","max_tokens":1024,"stream":%t,"system":[{"type":"text","text":"You are Claude Code in Berlin."}],"tools":[%s],"messages":[%s]}`,
				stream, strings.Join(tools, ","), strings.Join(msgs, ","))
		},
		read:      readAnthropic,
		errorFlag: true,
	},
	{
		name: "responses (Codex)",
		path: func(bool) string { return "/v1/responses" },
		body: func(stream bool, prompt string, call *offlineCall) string {
			var inner []string
			for _, t := range offlineTools {
				inner = append(inner, fmt.Sprintf(`{"type":"function","name":%q,"description":%s,"strict":false,"parameters":%s}`, t.name, jsonString(t.description), t.schema))
			}
			tools := `{"type":"function","name":"shell","description":"Runs a shell command.","parameters":{"type":"object","properties":{"command":{"type":"string"}}}},` +
				`{"type":"namespace","name":"mcp__weather","description":"Tools in the mcp__weather namespace.","tools":[` + strings.Join(inner, ",") + `]}`
			input := []string{
				`{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex, in Paris."}]}`,
				`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context><cwd>/tmp/Work</cwd><current_date>2026-12-01</current_date></environment_context>"}]}`,
				fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":%s}]}`, jsonString(prompt)),
			}
			if call != nil {
				// A function_call_output has no error flag: an error is
				// sent as its text.
				output := jsonString(call.result)
				input = append(input,
					`{"type":"reasoning","summary":[]}`,
					fmt.Sprintf(`{"type":"function_call","name":%q,"namespace":"mcp__weather","arguments":%s,"call_id":"call_9"}`, call.tool, jsonString(call.args)),
					fmt.Sprintf(`{"type":"function_call_output","call_id":"call_9","output":%s}`, output))
			}
			return fmt.Sprintf(`{"model":"gpt-test","stream":%t,"tools":[%s],"input":[%s]}`, stream, tools, strings.Join(input, ","))
		},
		read: readResponses,
	},
	{
		name: "chat completions",
		path: func(bool) string { return "/v1/chat/completions" },
		body: func(stream bool, prompt string, call *offlineCall) string {
			var tools []string
			for _, t := range offlineTools {
				tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":%q,"description":%s,"parameters":%s}}`, t.name, jsonString(t.description), t.schema))
			}
			msgs := []string{`{"role":"system","content":"Answer from Rome."}`, fmt.Sprintf(`{"role":"user","content":%s}`, jsonString(prompt))}
			if call != nil {
				msgs = append(msgs,
					fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":%q,"arguments":%s}}]}`, call.tool, jsonString(call.args)),
					fmt.Sprintf(`{"role":"tool","tool_call_id":"call_9","content":%s}`, jsonString(call.result)))
			}
			return fmt.Sprintf(`{"model":"gpt-test","stream":%t,"stream_options":{"include_usage":true},"tools":[%s],"messages":[%s]}`,
				stream, strings.Join(tools, ","), strings.Join(msgs, ","))
		},
		read: readChat,
	},
	{
		name: "gemini (Gemini CLI)",
		path: func(stream bool) string {
			if stream {
				return "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
			}
			return "/v1beta/models/gemini-test:generateContent"
		},
		body: func(stream bool, prompt string, call *offlineCall) string {
			decls := []string{`{"name":"read_file","description":"Reads a file from the local filesystem.","parametersJsonSchema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}`}
			for _, t := range offlineTools {
				decls = append(decls, fmt.Sprintf(`{"name":"mcp_weather_%s","description":%s,"parametersJsonSchema":%s}`, t.name, jsonString(t.description), t.schema))
			}
			contents := []string{fmt.Sprintf(`{"role":"user","parts":[{"text":"<session_context>\nThis is the Gemini CLI. Today's date is Tuesday, December 1, 2026. My folder is Lisbon.\n</session_context>"},{"text":%s}]}`, jsonString(prompt))}
			if call != nil {
				key := "output"
				if call.isError {
					key = "error"
				}
				contents = append(contents,
					fmt.Sprintf(`{"role":"model","parts":[{"functionCall":{"id":"g9","name":"mcp_weather_%s","args":%s}}]}`, call.tool, call.args),
					fmt.Sprintf(`{"role":"user","parts":[{"functionResponse":{"id":"g9","name":"mcp_weather_%s","response":{%q:%s}}}]}`, call.tool, key, jsonString(call.result)))
			}
			return fmt.Sprintf(`{"contents":[%s],"systemInstruction":{"parts":[{"text":"You are the Gemini CLI in Madrid."}]},"tools":[{"functionDeclarations":[%s]}]}`,
				strings.Join(contents, ","), strings.Join(decls, ","))
		},
		read:      readGemini,
		errorFlag: true,
	},
}

// TestOfflineWire checks, for each wire format as a CLI speaks it, that
// the offline mode decides each turn as the offline model does with the
// server's own tool names: which tool it calls and with which arguments
// (named as the CLI offered it), then the answer from the tool's result or
// error, streamed and not, with the model's usage.
func TestOfflineWire(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Offline: true})
	model, err := offline.New("offline")
	if err != nil {
		t.Fatal(err)
	}
	var bare []provider.Tool
	for _, tl := range offlineTools {
		bare = append(bare, provider.Tool{Name: tl.name, Description: tl.description, InputSchema: json.RawMessage(tl.schema)})
	}
	for _, w := range offlineWires {
		for _, stream := range []bool{false, true} {
			for _, prompt := range offlinePrompts {
				name := fmt.Sprintf("%s, stream %t, %q", w.name, stream, prompt)
				// What the offline model decides on the server's own tools.
				want, err := model.Complete(t.Context(), provider.Request{
					Messages: []provider.Message{{Role: provider.User, Text: prompt}}, Tools: bare,
				})
				if err != nil {
					t.Fatal(err)
				}
				got := postOffline(t, srv, w, stream, prompt, nil)
				if len(want.ToolCalls) == 0 {
					if got.Call != "" || got.Text != want.Text {
						t.Errorf("%s: answer %+v, want the text %q and no call", name, got, want.Text)
					}
					continue
				}
				wc := want.ToolCalls[0]
				var canon offlineTurn
				canon.setCall("", wc.Name, string(wc.Arguments))
				wc.Arguments = json.RawMessage(canon.callArgs)
				if got.callName != offeredName(w, wc.Name) || got.callArgs != string(wc.Arguments) || got.namespace != offeredNamespace(w) {
					t.Errorf("%s: call %q (namespace %q), want %s %s as %s offers it", name, got.callName+" "+got.callArgs, got.namespace, wc.Name, wc.Arguments, w.name)
				}
				if got.In <= 0 || got.Out <= 0 {
					t.Errorf("%s: usage %d in, %d out, want the offline model's counts", name, got.In, got.Out)
				}
				// Second turn: the answer comes from the tool's result.
				for _, isError := range []bool{false, true} {
					result := "Oslo: rain, 9°C"
					answer := postOffline(t, srv, w, stream, prompt, &offlineCall{tool: wc.Name, args: string(wc.Arguments), result: result, isError: isError})
					wantText := result
					if isError && w.errorFlag {
						wantText = offline.ErrorAnswerPrefix + result
					}
					if answer.Call != "" || answer.Text != wantText || answer.In <= got.In || answer.Out <= 0 {
						t.Errorf("%s, result (error %t): answer %+v, want the text %q and more input tokens than the first turn's %d",
							name, isError, answer, wantText, got.In)
					}
				}
			}
		}
	}
}

// TestOfflineServerNameIsNotAToolWord checks that the CLI's prefix, which
// holds the server name, is not read as part of a tool's name: a prompt that
// names only the server matches no tool.
func TestOfflineServerNameIsNotAToolWord(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Offline: true})
	for _, w := range offlineWires {
		got := postOffline(t, srv, w, false, "What can the weather server do?", nil)
		if got.Call != "" || got.Text != offline.NoToolAnswer {
			t.Errorf("%s: answer %+v, want %q: the prefix mcp…weather… counted as the tools' words", w.name, got, offline.NoToolAnswer)
		}
	}
}

// TestOfflineBuiltinTool checks that a CLI's built-in tool is scored on its
// own name and description like any other tool, and called by its name.
func TestOfflineBuiltinTool(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Offline: true})
	for _, w := range offlineWires[:1] {
		got := postOffline(t, srv, w, false, "Execute the bash command 'ls -l' please", nil)
		if got.callName != "Bash" || got.callArgs != `{"command":"ls -l"}` {
			t.Errorf("%s: call %q %s, want Bash {\"command\":\"ls -l\"}", w.name, got.callName, got.callArgs)
		}
	}
}

func offeredName(w offlineWire, bare string) string {
	switch w.name {
	case "anthropic (Claude Code)":
		return "mcp__weather__" + bare
	case "gemini (Gemini CLI)":
		return "mcp_weather_" + bare
	}
	return bare
}

func offeredNamespace(w offlineWire) string {
	if w.name == "responses (Codex)" {
		return "mcp__weather"
	}
	return ""
}

func postOffline(t *testing.T, srv *providertest.Server, w offlineWire, stream bool, prompt string, call *offlineCall) offlineTurn {
	t.Helper()
	ans := post(t, srv.URL+w.path(stream), w.body(stream, prompt, call))
	if ans.status != http.StatusOK {
		t.Fatalf("%s: POST = %d %s", w.name, ans.status, ans.body)
	}
	return w.read(t, stream, ans.body)
}

// readAnthropic decodes a Messages answer.
func readAnthropic(t *testing.T, stream bool, body []byte) offlineTurn {
	t.Helper()
	var o offlineTurn
	type block struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	type usage struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	}
	if !stream {
		var m struct {
			Content []block `json:"content"`
			Usage   usage   `json:"usage"`
		}
		mustUnmarshal(t, body, &m)
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				o.Text += b.Text
			case "tool_use":
				o.setCall("", b.Name, string(b.Input))
			}
		}
		o.In, o.Out = m.Usage.InputTokens, m.Usage.OutputTokens
		return o
	}
	var name, args string
	for _, e := range events(t, body) {
		var ev struct {
			ContentBlock block `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
			Usage usage `json:"usage"`
		}
		mustUnmarshal(t, []byte(e.data), &ev)
		switch e.name {
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				name = ev.ContentBlock.Name
			}
		case "content_block_delta":
			o.Text += ev.Delta.Text
			args += ev.Delta.PartialJSON
		case "message_delta":
			o.In, o.Out = ev.Usage.InputTokens, ev.Usage.OutputTokens
		}
	}
	if name != "" {
		o.setCall("", name, args)
	}
	return o
}

// readResponses decodes a Responses answer; a stream is read from its
// response.completed event, which holds the whole response.
func readResponses(t *testing.T, stream bool, body []byte) offlineTurn {
	t.Helper()
	if stream {
		evs := events(t, body)
		last := evs[len(evs)-1]
		if last.name != "response.completed" {
			t.Fatalf("last event %s, want response.completed", last.name)
		}
		var ev struct {
			Response json.RawMessage `json:"response"`
		}
		mustUnmarshal(t, []byte(last.data), &ev)
		body = ev.Response
	}
	var r struct {
		Output []struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			Arguments string `json:"arguments"`
			Content   []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	mustUnmarshal(t, body, &r)
	var o offlineTurn
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				o.Text += c.Text
			}
		case "function_call":
			o.setCall(it.Namespace, it.Name, it.Arguments)
		}
	}
	o.In, o.Out = r.Usage.InputTokens, r.Usage.OutputTokens
	return o
}

// readChat decodes a Chat Completions answer.
func readChat(t *testing.T, stream bool, body []byte) offlineTurn {
	t.Helper()
	type call struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	type usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	}
	var o offlineTurn
	if !stream {
		var c struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []call  `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		mustUnmarshal(t, body, &c)
		m := c.Choices[0].Message
		if m.Content != nil {
			o.Text = *m.Content
		}
		for _, tc := range m.ToolCalls {
			o.setCall("", tc.Function.Name, tc.Function.Arguments)
		}
		o.In, o.Out = c.Usage.PromptTokens, c.Usage.CompletionTokens
		return o
	}
	var name, args string
	for _, e := range events(t, body) {
		if e.data == "[DONE]" {
			break
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []call  `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		mustUnmarshal(t, []byte(e.data), &ch)
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				o.Text += *c.Delta.Content
			}
			for _, tc := range c.Delta.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
		}
		if ch.Usage != nil {
			o.In, o.Out = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
		}
	}
	if name != "" {
		o.setCall("", name, args)
	}
	return o
}

// readGemini decodes a generateContent answer, or the chunks of a stream.
func readGemini(t *testing.T, stream bool, body []byte) offlineTurn {
	t.Helper()
	chunks := [][]byte{body}
	if stream {
		chunks = nil
		for _, e := range events(t, body) {
			chunks = append(chunks, []byte(e.data))
		}
	}
	var o offlineTurn
	for _, b := range chunks {
		var r struct {
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text         string `json:"text"`
						FunctionCall *struct {
							Name string          `json:"name"`
							Args json.RawMessage `json:"args"`
						} `json:"functionCall"`
					} `json:"parts"`
				} `json:"content"`
			} `json:"candidates"`
			UsageMetadata *struct {
				PromptTokenCount     int64 `json:"promptTokenCount"`
				CandidatesTokenCount int64 `json:"candidatesTokenCount"`
			} `json:"usageMetadata"`
		}
		mustUnmarshal(t, b, &r)
		for _, c := range r.Candidates {
			for _, p := range c.Content.Parts {
				o.Text += p.Text
				if p.FunctionCall != nil {
					o.setCall("", p.FunctionCall.Name, string(p.FunctionCall.Args))
				}
			}
		}
		if r.UsageMetadata != nil {
			o.In, o.Out = r.UsageMetadata.PromptTokenCount, r.UsageMetadata.CandidatesTokenCount
		}
	}
	return o
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
}
