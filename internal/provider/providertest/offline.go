package providertest

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/ground/msgblocks"
	"github.com/mst-eval/mst/internal/provider"
)

// The offline mode (Script.Offline) lets MST's offline model (package
// internal/builtin/provider/offline) take every turn. Each format's parser reads, besides
// what a script needs, the offered tools' descriptions and input schemas
// and the whole conversation as provider messages; offlineAnswer hands them
// to the offline model and turns its decision back into an answer.

// offlineModel is the model that answers in offline mode. It keeps no
// state, so one value serves every request.
var offlineModel = func() provider.Provider {
	m, err := offline.New("offline")
	if err != nil {
		panic("providertest: " + err.Error())
	}
	return m
}()

// offlineAnswer asks the offline model for the next turn of p's
// conversation. The tools are shown to it under their own names (see
// bareToolName), so its word matching reads the server's tool name and
// not the prefix a CLI adds; a call is answered with the name (and
// namespace) as offered.
func offlineAnswer(p parsed) answer {
	req := provider.Request{Model: p.model, Messages: make([]provider.Message, len(p.history))}
	var offered []offeredTool
	for _, t := range p.tools {
		if t.name == "" {
			continue // a provider's built-in tool (web search, say): nothing to call by name
		}
		offered = append(offered, t)
		req.Tools = append(req.Tools, provider.Tool{Name: bareToolName(t), Description: t.description, InputSchema: t.schema})
	}
	for i, m := range p.history {
		for j, c := range m.ToolCalls {
			if j == 0 {
				m.ToolCalls = append([]provider.ToolCall(nil), m.ToolCalls...)
			}
			m.ToolCalls[j].Name = bareToolName(offeredTool{name: c.Name, recorded: c.Name})
		}
		req.Messages[i] = m
	}
	resp, err := offlineModel.Complete(context.Background(), req)
	if err != nil {
		// The offline model fails only when its context is done, and this
		// one never is.
		panic("providertest: offline model: " + err.Error())
	}
	a := answer{text: resp.Text, input: resp.Usage.InputTokens, output: resp.Usage.OutputTokens}
	for _, c := range resp.ToolCalls {
		call := answerCall{name: c.Name, arguments: string(c.Arguments)}
		for i, t := range req.Tools {
			if t.Name == c.Name {
				call.name, call.namespace = offered[i].name, offered[i].namespace
				break
			}
		}
		a.calls = append(a.calls, call)
	}
	return a
}

// bareToolName is the name of an offered tool as its MCP server names it,
// with the prefix a CLI adds taken off:
//
//   - Claude Code offers mcp__<server>__<tool>: the part after the second
//     "__" is kept.
//   - The Codex CLI offers a Responses namespace mcp__<server> holding the
//     tool under its own name: the inner name is already bare.
//   - The Gemini CLI offers mcp_<server>_<tool>, where <server> holds no
//     "_" (the CLI itself reads its names back that way): the part after
//     the second "_" is kept.
//
// Any other name (a CLI's built-in tool such as Bash or read_file, or an
// api client's tool) is kept as it is.
func bareToolName(t offeredTool) string {
	name := t.name
	if t.namespace != "" {
		return name
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if _, tool, ok := strings.Cut(rest, "__"); ok && tool != "" {
			return tool
		}
		return name
	}
	if rest, ok := strings.CutPrefix(name, "mcp_"); ok {
		if server, tool, ok := strings.Cut(rest, "_"); ok && server != "" && tool != "" {
			return tool
		}
	}
	return name
}

// rawText reads content that is a JSON string or anything else: a string
// is returned as it is, anything else as its JSON text ("" for null or
// nothing).
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// partsText reads content that is a string or a list of parts and joins
// the text of the parts whose type is one of types; other content is kept
// as its JSON text.
func partsText(raw json.RawMessage, types ...string) string {
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if len(raw) > 0 && raw[0] == '[' && json.Unmarshal(raw, &parts) == nil {
		return contentText(raw, types...)
	}
	return rawText(raw)
}

// appendResult adds a tool result to the history: to the last message when
// it is a user message that already carries results, else as a new user
// message.
func appendResult(h []provider.Message, r provider.ToolResult) []provider.Message {
	if n := len(h); n > 0 && h[n-1].Role == provider.User && len(h[n-1].ToolResults) > 0 && h[n-1].Text == "" {
		h[n-1].ToolResults = append(h[n-1].ToolResults, r)
		return h
	}
	return append(h, provider.Message{Role: provider.User, ToolResults: []provider.ToolResult{r}})
}

// appendModel adds model output to the history: to the last message when
// it is an assistant message (one model turn may be several items), else
// as a new assistant message.
func appendModel(h []provider.Message, text string, calls ...provider.ToolCall) []provider.Message {
	n := len(h)
	if n == 0 || h[n-1].Role != provider.Assistant {
		h = append(h, provider.Message{Role: provider.Assistant})
		n++
	}
	h[n-1].Text = joinTexts([]string{h[n-1].Text, text})
	h[n-1].ToolCalls = append(h[n-1].ToolCalls, calls...)
	return h
}

// appendUserText adds user text to the history.
func appendUserText(h []provider.Message, text string) []provider.Message {
	return append(h, provider.Message{Role: provider.User, Text: text})
}

// anthropicBlock is one content block of a Messages request.
type anthropicBlock = msgblocks.Block

// anthropicHistory reads the messages of a Messages request.
func anthropicHistory(body []byte) []provider.Message {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var h []provider.Message
	for _, m := range req.Messages {
		var blocks []anthropicBlock
		if json.Unmarshal(m.Content, &blocks) != nil {
			blocks = nil
			if s := rawText(m.Content); s != "" {
				blocks = append(blocks, anthropicBlock{Type: "text", Text: s})
			}
		}
		if m.Role == "assistant" {
			h = appendModel(h, "")
		}
		var texts []string
		results := false
		for _, b := range blocks {
			switch {
			case m.Role == "assistant" && b.Type == "text":
				h = appendModel(h, b.Text)
			case m.Role == "assistant" && b.Type == "tool_use":
				h = appendModel(h, "", provider.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
			case m.Role == "user" && b.Type == "tool_result":
				h = appendResult(h, provider.ToolResult{CallID: b.ToolUseID, Content: partsText(b.Content, "text"), IsError: b.IsError})
				results = true
			case m.Role == "user" && b.Type == "text":
				texts = append(texts, b.Text)
			}
		}
		if text := joinTexts(texts); text != "" {
			if results {
				h[len(h)-1].Text = text // text sent along with tool results
			} else {
				h = appendUserText(h, text)
			}
		}
	}
	return h
}

// responsesHistory reads the input items of a Responses request.
func responsesHistory(input json.RawMessage) []provider.Message {
	var text string
	if json.Unmarshal(input, &text) == nil {
		return []provider.Message{{Role: provider.User, Text: text}}
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	if json.Unmarshal(input, &items) != nil {
		return nil
	}
	var h []provider.Message
	for _, it := range items {
		switch {
		case (it.Type == "" || it.Type == "message") && it.Role == "assistant":
			h = appendModel(h, partsText(it.Content, "output_text", "text"))
		case (it.Type == "" || it.Type == "message") && it.Role == "user":
			h = appendUserText(h, partsText(it.Content, "input_text", "text"))
		case it.Type == "function_call" || it.Type == "custom_tool_call":
			args := json.RawMessage(it.Arguments)
			if !json.Valid(args) {
				args = json.RawMessage("{}")
			}
			h = appendModel(h, "", provider.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			h = appendResult(h, provider.ToolResult{CallID: it.CallID, Content: partsText(it.Output, "input_text", "output_text", "text")})
		case modelItemTypes[it.Type]:
			h = appendModel(h, "") // reasoning or a built-in call: a model turn with nothing the offline model reads
		}
	}
	return h
}

// chatHistory reads the messages of a Chat Completions request.
func chatHistory(body []byte) []provider.Message {
	var req struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var h []provider.Message
	for _, m := range req.Messages {
		switch m.Role {
		case "assistant":
			h = append(h, provider.Message{Role: provider.Assistant, Text: partsText(m.Content, "text")})
			for _, c := range m.ToolCalls {
				args := json.RawMessage(c.Function.Arguments)
				if !json.Valid(args) {
					args = json.RawMessage("{}")
				}
				h = appendModel(h, "", provider.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
			}
		case "tool":
			h = appendResult(h, provider.ToolResult{CallID: m.ToolCallID, Content: partsText(m.Content, "text")})
		case "user":
			h = appendUserText(h, partsText(m.Content, "text"))
		}
	}
	return h
}

// geminiHistory reads the contents of a generateContent request. Each
// text part of a user content is a user message of its own. A function
// response counts as an error when its response object has an
// "error" field; its content is the response's "output" (or "error") when
// that is a string, else the response's JSON text.
func geminiHistory(contents []geminiContent) []provider.Message {
	var h []provider.Message
	for _, c := range contents {
		if c.Role == "model" {
			h = appendModel(h, "")
		}
		var texts []string
		results := false
		for _, part := range c.Parts {
			switch {
			case part.Thought:
			case c.Role == "model" && part.FunctionCall != nil:
				args := part.FunctionCall.Args
				if len(args) == 0 || string(args) == "null" {
					args = json.RawMessage("{}")
				}
				h = appendModel(h, "", provider.ToolCall{Name: part.FunctionCall.Name, Arguments: args})
			case c.Role == "model":
				h = appendModel(h, part.Text)
			case len(part.FunctionResponse) > 0:
				var fr struct {
					ID       string                     `json:"id"`
					Name     string                     `json:"name"`
					Response map[string]json.RawMessage `json:"response"`
				}
				json.Unmarshal(part.FunctionResponse, &fr)
				r := provider.ToolResult{CallID: fr.ID, Name: fr.Name}
				if e, ok := fr.Response["error"]; ok {
					r.IsError, r.Content = true, rawText(e)
				} else if out, ok := fr.Response["output"]; ok {
					r.Content = rawText(out)
				} else if fr.Response != nil {
					b, _ := json.Marshal(fr.Response)
					r.Content = string(b)
				}
				h = appendResult(h, r)
				results = true
			default:
				texts = append(texts, part.Text)
			}
		}
		if c.Role == "model" {
			continue
		}
		if results {
			h[len(h)-1].Text = joinTexts(texts) // text sent along with function responses
			continue
		}
		// The Gemini CLI sends its session context (date, folders) as a
		// text part before the prompt, in the same content: each part is a
		// message of its own, so that the prompt is the last one.
		for _, text := range texts {
			if text != "" {
				h = appendUserText(h, text)
			}
		}
	}
	return h
}
