package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// chatFormat serves the OpenAI Chat Completions API, POST
// /v1/chat/completions.
func chatFormat() *format {
	return &format{
		name:   FormatChat,
		parse:  parseChat,
		answer: answerChat,
		fail:   failOpenAI,
	}
}

type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
		Custom struct {
			Name string `json:"name"`
		} `json:"custom"`
	} `json:"tools"`
}

func parseChat(body []byte) (parsed, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, fmt.Errorf("providertest: request body is not a Chat Completions request: %w", err)
	}
	p := parsed{model: req.Model, stream: req.Stream, includeUsage: req.StreamOptions.IncludeUsage}
	for _, t := range req.Tools {
		name := t.Function.Name
		if name == "" {
			name = t.Custom.Name
		}
		if name == "" {
			p.tools = append(p.tools, offeredTool{recorded: t.Type})
			continue
		}
		p.tools = append(p.tools, offeredTool{recorded: name, name: name, description: t.Function.Description, schema: t.Function.Parameters})
	}
	p.history = chatHistory(body)
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
		return p, errors.New("you must provide a model parameter")
	case len(req.Messages) == 0:
		return p, errors.New("[] is too short - 'messages'")
	}
	return p, nil
}

type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatToolCall struct {
	Index    *int         `json:"index,omitempty"` // chunks only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     any         `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   chatUsage    `json:"usage"`
}

type chatDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	Refusal   *string        `json:"refusal,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatChunkChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	Logprobs     any       `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type chatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when the client asked for
	// usage, and absent otherwise.
	Usage *chatUsage `json:"usage,omitempty"`
}

func answerChat(w http.ResponseWriter, p parsed, a answer, ids idSource) {
	w.Header().Set("x-request-id", ids("req_"))
	id := ids("chatcmpl-")
	created := time.Now().Unix()
	usage := chatUsage{PromptTokens: a.input, CompletionTokens: a.output, TotalTokens: a.input + a.output}
	finish := "stop"
	if len(a.calls) > 0 {
		finish = "tool_calls"
	}
	calls := make([]chatToolCall, len(a.calls))
	for i, c := range a.calls {
		calls[i] = chatToolCall{
			ID: ids("call_"), Type: "function",
			Function: chatFunction{Name: c.name, Arguments: c.arguments},
		}
	}
	if !p.stream {
		msg := chatMessage{Role: "assistant", ToolCalls: calls}
		switch {
		case a.refusal != "":
			msg.Refusal = &a.refusal
		case a.text != "" || len(calls) == 0:
			msg.Content = &a.text
		}
		writeJSON(w, http.StatusOK, chatCompletion{
			ID: id, Object: "chat.completion", Created: created, Model: p.model,
			Choices: []chatChoice{{Message: msg, FinishReason: finish}},
			Usage:   usage,
		})
		return
	}

	ev := newSSE(w)
	send := func(delta chatDelta, finish *string) {
		chunk := chatChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: p.model,
			Choices: []chatChunkChoice{{Delta: delta, FinishReason: finish}},
		}
		b, err := json.Marshal(chunk)
		if err != nil {
			panic(fmt.Sprintf("providertest: marshalling a chunk: %v", err))
		}
		if p.includeUsage {
			// The real API sends "usage": null on every chunk but the last.
			b = append(b[:len(b)-1], []byte(`,"usage":null}`)...)
		}
		ev.raw("", b)
	}
	empty := ""
	send(chatDelta{Role: "assistant", Content: &empty}, nil)
	if a.refusal != "" {
		send(chatDelta{Refusal: &a.refusal}, nil)
	}
	for _, piece := range split(a.text) {
		if piece != "" {
			send(chatDelta{Content: &piece}, nil)
		}
	}
	for i, c := range calls {
		index := i
		send(chatDelta{ToolCalls: []chatToolCall{{
			Index: &index, ID: c.ID, Type: "function", Function: chatFunction{Name: c.Function.Name},
		}}}, nil)
		for _, piece := range split(c.Function.Arguments) {
			send(chatDelta{ToolCalls: []chatToolCall{{
				Index: &index, Function: chatFunction{Arguments: piece},
			}}}, nil)
		}
	}
	send(chatDelta{}, &finish)
	if p.includeUsage {
		ev.send("", chatChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: p.model,
			Choices: []chatChunkChoice{}, Usage: &usage,
		})
	}
	ev.raw("", []byte("[DONE]"))
}
