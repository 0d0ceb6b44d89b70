package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// responsesFormat serves the OpenAI Responses API, POST /v1/responses.
func responsesFormat() *format {
	return &format{
		name:   FormatResponses,
		parse:  parseResponses,
		answer: answerResponses,
		fail:   failOpenAI,
	}
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Tools       []responsesTool `json:"tools"` // a namespace's own tools
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type responsesRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"`
	Tools  []responsesTool `json:"tools"`
}

type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// modelItemTypes are the input item types the model itself produced; a run
// of them (with assistant messages) is one model turn.
var modelItemTypes = map[string]bool{
	"function_call":         true,
	"custom_tool_call":      true,
	"reasoning":             true,
	"local_shell_call":      true,
	"shell_call":            true,
	"apply_patch_call":      true,
	"web_search_call":       true,
	"file_search_call":      true,
	"computer_call":         true,
	"code_interpreter_call": true,
	"image_generation_call": true,
	"mcp_call":              true,
	"tool_search_call":      true,
}

func (it responsesItem) fromModel() bool {
	if it.Type == "" || it.Type == "message" {
		return it.Role == "assistant"
	}
	return modelItemTypes[it.Type]
}

func parseResponses(body []byte) (parsed, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, fmt.Errorf("providertest: request body is not a Responses request: %w", err)
	}
	p := parsed{model: req.Model, stream: req.Stream}
	for _, t := range req.Tools {
		switch {
		case t.Type == "namespace":
			for _, inner := range t.Tools {
				p.tools = append(p.tools, offeredTool{
					recorded: t.Name + "." + inner.Name, name: inner.Name, namespace: t.Name,
					description: inner.Description, schema: inner.Parameters,
				})
			}
		case t.Name == "":
			p.tools = append(p.tools, offeredTool{recorded: t.Type})
		default:
			p.tools = append(p.tools, offeredTool{recorded: t.Name, name: t.Name, description: t.Description, schema: t.Parameters})
		}
	}
	p.history = responsesHistory(req.Input)
	var inputErr error
	var text string
	switch {
	case len(req.Input) == 0 || string(req.Input) == "null":
	case json.Unmarshal(req.Input, &text) == nil:
		p.firstUserText = text
	default:
		var items []responsesItem
		if err := json.Unmarshal(req.Input, &items); err != nil {
			inputErr = fmt.Errorf("input: want a string or a list of items: %w", err)
			break
		}
		var texts []string
		inRun := false
		for _, it := range items {
			model := it.fromModel()
			if model && !inRun {
				p.turn++
			}
			inRun = model
			if p.turn == 0 && (it.Type == "" || it.Type == "message") && it.Role == "user" {
				texts = append(texts, contentText(it.Content, "input_text", "text"))
			}
		}
		p.firstUserText = joinTexts(texts)
	}
	switch {
	case req.Model == "":
		return p, errors.New("missing required parameter: 'model'")
	case inputErr != nil:
		return p, inputErr
	}
	return p, nil
}

type responsesUsage struct {
	InputTokens         int64          `json:"input_tokens"`
	InputTokensDetails  map[string]any `json:"input_tokens_details"`
	OutputTokens        int64          `json:"output_tokens"`
	OutputTokensDetails map[string]any `json:"output_tokens_details"`
	TotalTokens         int64          `json:"total_tokens"`
}

type responsesResponse struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	CreatedAt         int64             `json:"created_at"`
	Status            string            `json:"status"`
	Error             any               `json:"error"`
	IncompleteDetails any               `json:"incomplete_details"`
	Instructions      any               `json:"instructions"`
	Model             string            `json:"model"`
	Output            []any             `json:"output"`
	ParallelToolCalls bool              `json:"parallel_tool_calls"`
	Temperature       float64           `json:"temperature"`
	ToolChoice        string            `json:"tool_choice"`
	Tools             []any             `json:"tools"`
	TopP              float64           `json:"top_p"`
	Metadata          map[string]string `json:"metadata"`
	Usage             *responsesUsage   `json:"usage"`
}

type responsesOutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

// responsesRefusal is the content part of a declined turn.
type responsesRefusal struct {
	Type    string `json:"type"` // "refusal"
	Refusal string `json:"refusal"`
}

type responsesMessage struct {
	ID      string                `json:"id"`
	Type    string                `json:"type"`
	Status  string                `json:"status"`
	Role    string                `json:"role"`
	Content []responsesOutputText `json:"content"`
}

type responsesFunctionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Arguments string `json:"arguments"`
}

func answerResponses(w http.ResponseWriter, p parsed, a answer, ids idSource) {
	w.Header().Set("x-request-id", ids("req_"))
	resp := responsesResponse{
		ID:                ids("resp_"),
		Object:            "response",
		CreatedAt:         time.Now().Unix(),
		Status:            "completed",
		Model:             p.model,
		Output:            []any{},
		ParallelToolCalls: true,
		Temperature:       1,
		ToolChoice:        "auto",
		Tools:             []any{},
		TopP:              1,
		Metadata:          map[string]string{},
		Usage: &responsesUsage{
			InputTokens:         a.input,
			InputTokensDetails:  map[string]any{"cached_tokens": 0},
			OutputTokens:        a.output,
			OutputTokensDetails: map[string]any{"reasoning_tokens": 0},
			TotalTokens:         a.input + a.output,
		},
	}
	if a.refusal != "" {
		answerResponsesRefusal(w, p, a, ids, resp)
		return
	}
	var message *responsesMessage
	if a.text != "" {
		message = &responsesMessage{
			ID: ids("msg_"), Type: "message", Status: "completed", Role: "assistant",
			Content: []responsesOutputText{{Type: "output_text", Text: a.text, Annotations: []any{}, Logprobs: []any{}}},
		}
		resp.Output = append(resp.Output, message)
	}
	var calls []responsesFunctionCall
	for _, c := range a.calls {
		fc := responsesFunctionCall{
			ID: ids("fc_"), Type: "function_call", Status: "completed", CallID: ids("call_"),
			Name: c.name, Namespace: c.namespace, Arguments: c.arguments,
		}
		calls = append(calls, fc)
		resp.Output = append(resp.Output, fc)
	}
	if !p.stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}

	ev := newSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		ev.send(typ, fields)
	}
	pending := resp
	pending.Status = "in_progress"
	pending.Output = []any{}
	pending.Usage = nil
	send("response.created", map[string]any{"response": pending})
	send("response.in_progress", map[string]any{"response": pending})
	index := 0
	if message != nil {
		added := *message
		added.Status = "in_progress"
		added.Content = []responsesOutputText{}
		empty := responsesOutputText{Type: "output_text", Text: "", Annotations: []any{}, Logprobs: []any{}}
		send("response.output_item.added", map[string]any{"output_index": index, "item": added})
		send("response.content_part.added", map[string]any{
			"item_id": message.ID, "output_index": index, "content_index": 0, "part": empty,
		})
		for _, piece := range split(a.text) {
			send("response.output_text.delta", map[string]any{
				"item_id": message.ID, "output_index": index, "content_index": 0,
				"delta": piece, "logprobs": []any{},
			})
		}
		send("response.output_text.done", map[string]any{
			"item_id": message.ID, "output_index": index, "content_index": 0,
			"text": a.text, "logprobs": []any{},
		})
		send("response.content_part.done", map[string]any{
			"item_id": message.ID, "output_index": index, "content_index": 0, "part": message.Content[0],
		})
		send("response.output_item.done", map[string]any{"output_index": index, "item": message})
		index++
	}
	for _, fc := range calls {
		added := fc
		added.Status = "in_progress"
		added.Arguments = ""
		send("response.output_item.added", map[string]any{"output_index": index, "item": added})
		for _, piece := range split(fc.Arguments) {
			send("response.function_call_arguments.delta", map[string]any{
				"item_id": fc.ID, "output_index": index, "delta": piece,
			})
		}
		send("response.function_call_arguments.done", map[string]any{
			"item_id": fc.ID, "output_index": index, "name": fc.Name, "arguments": fc.Arguments,
		})
		send("response.output_item.done", map[string]any{"output_index": index, "item": fc})
		index++
	}
	send("response.completed", map[string]any{"response": resp})
}

// answerResponsesRefusal answers a refusal: one message whose content is
// a refusal part, streamed as its output item's added and done events.
func answerResponsesRefusal(w http.ResponseWriter, p parsed, a answer, ids idSource, resp responsesResponse) {
	message := map[string]any{
		"id": ids("msg_"), "type": "message", "status": "completed", "role": "assistant",
		"content": []any{responsesRefusal{Type: "refusal", Refusal: a.refusal}},
	}
	resp.Output = []any{message}
	if !p.stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	ev := newSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		ev.send(typ, fields)
	}
	pending := resp
	pending.Status, pending.Output, pending.Usage = "in_progress", []any{}, nil
	send("response.created", map[string]any{"response": pending})
	send("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
		"id": message["id"], "type": "message", "status": "in_progress", "role": "assistant", "content": []any{},
	}})
	send("response.refusal.done", map[string]any{"item_id": message["id"], "output_index": 0, "content_index": 0, "refusal": a.refusal})
	send("response.output_item.done", map[string]any{"output_index": 0, "item": message})
	send("response.completed", map[string]any{"response": resp})
}

// failOpenAI writes an error in the OpenAI APIs' shape.
func failOpenAI(w http.ResponseWriter, status int, message string) {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusNotFound:
		code = "not_found"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": message, "type": typ, "param": nil, "code": code},
	})
}
