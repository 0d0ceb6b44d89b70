package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// anthropicFormat serves the Anthropic Messages API, POST /v1/messages.
func anthropicFormat() *format {
	return &format{
		name:   FormatAnthropic,
		parse:  parseAnthropic,
		answer: answerAnthropic,
		fail:   failAnthropic,
	}
}

type anthropicRequest struct {
	Model     string `json:"model"`
	MaxTokens *int64 `json:"max_tokens"`
	Stream    bool   `json:"stream"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Type        string          `json:"type"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

func parseAnthropic(body []byte) (parsed, error) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, fmt.Errorf("providertest: request body is not a Messages request: %w", err)
	}
	p := parsed{model: req.Model, stream: req.Stream}
	for _, t := range req.Tools {
		if t.Name == "" {
			p.tools = append(p.tools, offeredTool{recorded: t.Type})
			continue
		}
		p.tools = append(p.tools, offeredTool{recorded: t.Name, name: t.Name, description: t.Description, schema: t.InputSchema})
	}
	p.history = anthropicHistory(body)
	var texts []string
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			p.turn++
			continue
		}
		if m.Role == "user" && p.turn == 0 {
			texts = append(texts, contentText(m.Content, "text"))
		}
	}
	p.firstUserText = joinTexts(texts)
	switch {
	case req.Model == "":
		return p, errors.New("model: Field required")
	case req.MaxTokens == nil:
		return p, errors.New("max_tokens: Field required")
	case len(req.Messages) == 0:
		return p, errors.New("messages: at least one message is required")
	}
	return p, nil
}

// contentText reads message content that is either a string or a list of
// parts, and joins the text of the parts of the given types.
func contentText(raw json.RawMessage, types ...string) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, part := range parts {
		for _, t := range types {
			if part.Type == t {
				texts = append(texts, part.Text)
			}
		}
	}
	return joinTexts(texts)
}

type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

type anthropicMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

type anthropicText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

func answerAnthropic(w http.ResponseWriter, p parsed, a answer, ids idSource) {
	w.Header().Set("request-id", ids("req_"))
	stop := "end_turn"
	if len(a.calls) > 0 {
		stop = "tool_use"
	}
	if a.refusal != "" {
		// The API ends a declined turn with stop_reason "refusal", after
		// whatever text it streamed.
		stop, a.text = "refusal", a.refusal
	}
	msg := anthropicMessage{
		ID:      ids("msg_"),
		Type:    "message",
		Role:    "assistant",
		Model:   p.model,
		Content: []any{},
		Usage:   anthropicUsage{InputTokens: a.input, OutputTokens: a.output},
	}
	useIDs := make([]string, len(a.calls))
	for i := range a.calls {
		useIDs[i] = ids("toolu_")
	}
	if !p.stream {
		if a.text != "" {
			msg.Content = append(msg.Content, anthropicText{Type: "text", Text: a.text})
		}
		for i, c := range a.calls {
			msg.Content = append(msg.Content, anthropicToolUse{
				Type: "tool_use", ID: useIDs[i], Name: c.name, Input: json.RawMessage(c.arguments),
			})
		}
		msg.StopReason = &stop
		writeJSON(w, http.StatusOK, msg)
		return
	}

	ev := newSSE(w)
	start := msg
	start.Usage.OutputTokens = 1
	ev.send("message_start", map[string]any{"type": "message_start", "message": start})
	ev.send("ping", map[string]any{"type": "ping"})
	index := 0
	if a.text != "" {
		ev.send("content_block_start", map[string]any{
			"type": "content_block_start", "index": index,
			"content_block": anthropicText{Type: "text", Text: ""},
		})
		for _, piece := range split(a.text) {
			ev.send("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": piece},
			})
		}
		ev.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for i, c := range a.calls {
		ev.send("content_block_start", map[string]any{
			"type": "content_block_start", "index": index,
			"content_block": anthropicToolUse{
				Type: "tool_use", ID: useIDs[i], Name: c.name, Input: json.RawMessage("{}"),
			},
		})
		for _, piece := range split(c.arguments) {
			ev.send("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": piece},
			})
		}
		ev.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	ev.send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": msg.Usage,
	})
	ev.send("message_stop", map[string]any{"type": "message_stop"})
}

// failAnthropic writes an error in the Messages API's shape.
func failAnthropic(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": anthropicErrorType(status), "message": message},
	})
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "timeout_error"
	case http.StatusConflict:
		return "conflict_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}
