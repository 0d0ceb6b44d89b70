package providersuite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

// sent is what the suite reads back from a request the fake server
// received, whatever its wire format: the Request the provider was asked
// to send, as far as the format carries it.
type sent struct {
	Format    string
	Model     string
	System    string
	MaxTokens int64 // 0 when the body names none
	Tools     []provider.Tool
	// Messages is the conversation, one provider.Message per turn: a
	// format that spreads a turn over several items or messages (tool
	// results as their own messages) is gathered back.
	Messages []provider.Message
	// ErrorFlag is true when the format marks a tool result as an error
	// (Anthropic's is_error); the others carry only the content.
	ErrorFlag bool
}

// read decodes the body of r by its format.
func read(r providertest.Request) (sent, error) {
	var s sent
	var err error
	switch r.Format {
	case providertest.FormatAnthropic:
		s, err = readAnthropic(r.Body)
	case providertest.FormatResponses:
		s, err = readResponses(r.Body)
	case providertest.FormatChat:
		s, err = readChat(r.Body)
	case "":
		return sent{}, fmt.Errorf("the request went to %s, which no wire format of the fake server serves; check the definition's Appends and Config.BaseURL", r.Path)
	default:
		// The fake also speaks Gemini, but no provider of MST does yet.
		return sent{}, fmt.Errorf("providersuite cannot read requests in the %s format yet: add it to internal/provider/providersuite/wire.go", r.Format)
	}
	if err != nil {
		return sent{}, fmt.Errorf("reading the %s request body: %w", r.Format, err)
	}
	s.Format = r.Format
	return s, nil
}

// texts reads content that is a string, null, or a list of parts, and joins
// the text of the parts.
func texts(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content %.80s is neither a string nor a list of parts", raw)
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		default:
			return "", fmt.Errorf("a content part of type %q where only text was sent", p.Type)
		}
	}
	return b.String(), nil
}

// arguments turns call arguments sent as a JSON string (the OpenAI formats)
// into provider.ToolCall.Arguments.
func arguments(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	q, _ := json.Marshal(s) // a string always marshals
	return q
}

// gather appends to msgs the parts of one turn that a format sends
// separately: a call joins the last assistant message, a tool result the
// last user message that has no text yet, and text a message of its role
// that has none yet and nothing after it.
type gather struct{ msgs []provider.Message }

func (g *gather) last(role provider.Role) *provider.Message {
	if n := len(g.msgs); n > 0 && g.msgs[n-1].Role == role {
		return &g.msgs[n-1]
	}
	return nil
}

func (g *gather) text(role provider.Role, text string) {
	if m := g.last(role); m != nil && m.Text == "" && len(m.ToolCalls) == 0 && role == provider.Assistant {
		m.Text = text
		return
	}
	if m := g.last(role); m != nil && m.Text == "" && role == provider.User {
		m.Text = text // text sent after the turn's tool results
		return
	}
	g.msgs = append(g.msgs, provider.Message{Role: role, Text: text})
}

func (g *gather) call(c provider.ToolCall) {
	if m := g.last(provider.Assistant); m != nil {
		m.ToolCalls = append(m.ToolCalls, c)
		return
	}
	g.msgs = append(g.msgs, provider.Message{Role: provider.Assistant, ToolCalls: []provider.ToolCall{c}})
}

func (g *gather) result(r provider.ToolResult) {
	if m := g.last(provider.User); m != nil && m.Text == "" {
		m.ToolResults = append(m.ToolResults, r)
		return
	}
	g.msgs = append(g.msgs, provider.Message{Role: provider.User, ToolResults: []provider.ToolResult{r}})
}

func readAnthropic(body []byte) (sent, error) {
	var b struct {
		Model     string          `json:"model"`
		MaxTokens int64           `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Tools     []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return sent{}, err
	}
	s := sent{Model: b.Model, MaxTokens: b.MaxTokens, ErrorFlag: true}
	var err error
	if s.System, err = texts(b.System); err != nil {
		return sent{}, fmt.Errorf("system: %w", err)
	}
	for _, t := range b.Tools {
		s.Tools = append(s.Tools, provider.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	for i, m := range b.Messages {
		msg := provider.Message{Role: provider.Role(m.Role)}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			if msg.Text, err = texts(m.Content); err != nil {
				return sent{}, fmt.Errorf("messages[%d]: %w", i, err)
			}
			s.Messages = append(s.Messages, msg)
			continue
		}
		for j, bl := range blocks {
			switch bl.Type {
			case "text":
				msg.Text += bl.Text
			case "tool_use":
				msg.ToolCalls = append(msg.ToolCalls, provider.ToolCall{ID: bl.ID, Name: bl.Name, Arguments: bl.Input})
			case "tool_result":
				content, err := texts(bl.Content)
				if err != nil {
					return sent{}, fmt.Errorf("messages[%d].content[%d]: %w", i, j, err)
				}
				msg.ToolResults = append(msg.ToolResults, provider.ToolResult{CallID: bl.ToolUseID, Content: content, IsError: bl.IsError})
			case "thinking", "redacted_thinking":
				// Reasoning passed back; the suite sends none.
			default:
				return sent{}, fmt.Errorf("messages[%d].content[%d] has type %q, which the suite never asked for", i, j, bl.Type)
			}
		}
		s.Messages = append(s.Messages, msg)
	}
	return s, nil
}

func readResponses(body []byte) (sent, error) {
	var b struct {
		Model           string          `json:"model"`
		Instructions    *string         `json:"instructions"`
		MaxOutputTokens int64           `json:"max_output_tokens"`
		Input           json.RawMessage `json:"input"`
		Tools           []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return sent{}, err
	}
	s := sent{Model: b.Model, MaxTokens: b.MaxOutputTokens}
	if b.Instructions != nil {
		s.System = *b.Instructions
	}
	for i, t := range b.Tools {
		if t.Type != "function" {
			return sent{}, fmt.Errorf("tools[%d] has type %q, not function", i, t.Type)
		}
		s.Tools = append(s.Tools, provider.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters})
	}
	var text string
	if json.Unmarshal(b.Input, &text) == nil {
		s.Messages = []provider.Message{{Role: provider.User, Text: text}}
		return s, nil
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
	if err := json.Unmarshal(b.Input, &items); err != nil {
		return sent{}, fmt.Errorf("input: %w", err)
	}
	var g gather
	for i, it := range items {
		switch {
		case it.Type == "" || it.Type == "message":
			t, err := texts(it.Content)
			if err != nil {
				return sent{}, fmt.Errorf("input[%d]: %w", i, err)
			}
			switch it.Role {
			case "system", "developer":
				s.System += t
			case "user", "assistant":
				g.text(provider.Role(it.Role), t)
			default:
				return sent{}, fmt.Errorf("input[%d] has role %q", i, it.Role)
			}
		case it.Type == "function_call":
			g.call(provider.ToolCall{ID: it.CallID, Name: it.Name, Arguments: arguments(it.Arguments)})
		case it.Type == "function_call_output":
			out, err := texts(it.Output)
			if err != nil {
				return sent{}, fmt.Errorf("input[%d].output: %w", i, err)
			}
			g.result(provider.ToolResult{CallID: it.CallID, Content: out})
		case it.Type == "reasoning":
		default:
			return sent{}, fmt.Errorf("input[%d] has type %q, which the suite never asked for", i, it.Type)
		}
	}
	s.Messages = g.msgs
	return s, nil
}

func readChat(body []byte) (sent, error) {
	var b struct {
		Model               string `json:"model"`
		MaxCompletionTokens int64  `json:"max_completion_tokens"`
		MaxTokens           int64  `json:"max_tokens"`
		Tools               []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return sent{}, err
	}
	s := sent{Model: b.Model, MaxTokens: b.MaxCompletionTokens}
	if s.MaxTokens == 0 {
		s.MaxTokens = b.MaxTokens
	}
	for i, t := range b.Tools {
		if t.Type != "function" {
			return sent{}, fmt.Errorf("tools[%d] has type %q, not function", i, t.Type)
		}
		s.Tools = append(s.Tools, provider.Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	var g gather
	for i, m := range b.Messages {
		t, err := texts(m.Content)
		if err != nil {
			return sent{}, fmt.Errorf("messages[%d]: %w", i, err)
		}
		switch m.Role {
		case "system", "developer":
			s.System += t
		case "user":
			g.text(provider.User, t)
		case "assistant":
			g.msgs = append(g.msgs, provider.Message{Role: provider.Assistant, Text: t})
			for _, c := range m.ToolCalls {
				g.call(provider.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: arguments(c.Function.Arguments)})
			}
		case "tool":
			g.result(provider.ToolResult{CallID: m.ToolCallID, Content: t})
		default:
			return sent{}, fmt.Errorf("messages[%d] has role %q", i, m.Role)
		}
	}
	s.Messages = g.msgs
	return s, nil
}

// canonical re-marshals a JSON value so that two values equal as JSON are
// equal as bytes; what is not JSON comes back as it is.
func canonical(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool { return canonical(a) == canonical(b) }

// comparable returns msgs as the wire of format s can carry them, for a
// comparison with what the server received: tool result names (which no
// format the suite reads carries), reasoning (which the suite sends none
// of), and IsError where the format has no flag are cleared, and call
// arguments are made canonical.
func comparable(msgs []provider.Message, errorFlag bool) []provider.Message {
	out := make([]provider.Message, len(msgs))
	for i, m := range msgs {
		m.Reasoning = nil
		calls := make([]provider.ToolCall, len(m.ToolCalls))
		for j, c := range m.ToolCalls {
			c.Arguments = json.RawMessage(canonical(c.Arguments))
			calls[j] = c
		}
		results := make([]provider.ToolResult, len(m.ToolResults))
		for j, r := range m.ToolResults {
			r.Name = ""
			if !errorFlag {
				r.IsError = false
			}
			results[j] = r
		}
		m.ToolCalls, m.ToolResults = nil, nil
		if len(calls) > 0 {
			m.ToolCalls = calls
		}
		if len(results) > 0 {
			m.ToolResults = results
		}
		out[i] = m
	}
	return out
}
