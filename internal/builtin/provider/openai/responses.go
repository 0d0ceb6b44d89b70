package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/mst-eval/mst/internal/builtin/provider/wire"
	"github.com/mst-eval/mst/internal/provider"
)

// completeResponses asks for one turn through the Responses API.
func (c *client) completeResponses(ctx context.Context, model string, req provider.Request) (provider.Response, error) {
	params, err := responsesParams(model, req)
	if err != nil {
		return provider.Response{}, err
	}
	var res *responses.Response
	err = wire.Retry(ctx, c.retries, c.backoff, retryableStreamError, func(ctx context.Context) error {
		var err error
		res, err = c.streamResponse(ctx, params)
		return err
	})
	if err != nil {
		return provider.Response{}, toError(err)
	}
	return fromResponse(res), nil
}

// streamResponse sends one request and returns the response of its terminal
// event. When that response leaves out its output, the output is rebuilt
// from the output_item.done events, in output order.
func (c *client) streamResponse(ctx context.Context, params responses.ResponseNewParams) (*responses.Response, error) {
	s := c.responses.NewStreaming(ctx, params)
	defer s.Close()
	var final *responses.Response
	done := map[int64]responses.ResponseOutputItemUnion{}
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.output_item.done":
			done[ev.OutputIndex] = ev.Item
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			final = &r
		case "error":
			return nil, &streamError{Code: ev.Code, Message: ev.Message}
		}
	}
	if err := s.Err(); err != nil {
		var se *ssestream.StreamError
		if errors.As(err, &se) {
			return nil, eventError(se.Event.Data)
		}
		return nil, err
	}
	if final == nil {
		return nil, errCutOff
	}
	if final.Status == responses.ResponseStatusFailed {
		return nil, &streamError{Code: string(final.Error.Code), Message: final.Error.Message}
	}
	if len(final.Output) == 0 {
		for _, i := range slices.Sorted(maps.Keys(done)) {
			final.Output = append(final.Output, done[i])
		}
	}
	return final, nil
}

// eventError reads the error object that a compatible server may put in a
// stream event in place of the event, as {"error": {...}} or
// {"error": "text"}.
func eventError(data []byte) *streamError {
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(data, &ev) // the SDK found an "error" key, so data is JSON
	var obj struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(ev.Error, &obj) == nil && obj.Message != "" {
		code := ""
		if obj.Code != nil {
			code = fmt.Sprint(obj.Code)
		}
		return &streamError{Code: code, Message: obj.Message}
	}
	var text string
	if json.Unmarshal(ev.Error, &text) == nil {
		return &streamError{Message: text}
	}
	return &streamError{Message: string(ev.Error)}
}

// responsesParams maps a provider request to the Responses API parameters.
func responsesParams(model string, req provider.Request) (responses.ResponseNewParams, error) {
	p := responses.ResponseNewParams{
		Model:           shared.ResponsesModel(model),
		MaxOutputTokens: param.NewOpt(wire.MaxTokens(req.MaxTokens)),
		// Stateless: the whole conversation goes with every request, and
		// nothing is kept on the server.
		Store: param.NewOpt(false),
	}
	if req.System != "" {
		p.Instructions = param.NewOpt(req.System)
	}
	if req.ReasoningEffort != "" {
		p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(req.ReasoningEffort)}
	}
	for _, t := range req.Tools {
		schema, err := wire.SchemaMap(t.Name, t.InputSchema)
		if err != nil {
			return responses.ResponseNewParams{}, fmt.Errorf("openai: %w", err)
		}
		ft := &responses.FunctionToolParam{
			Name:       t.Name,
			Parameters: schema,
			Strict:     param.NewOpt(false),
		}
		if t.Description != "" {
			ft.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: ft})
	}
	var input responses.ResponseInputParam
	for i, m := range req.Messages {
		items, err := inputItems(m)
		if err != nil {
			return responses.ResponseNewParams{}, fmt.Errorf("openai: message %d: %w", i, err)
		}
		input = append(input, items...)
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	return p, nil
}

// inputItems maps one message of the conversation to input items.
func inputItems(m provider.Message) ([]responses.ResponseInputItemUnionParam, error) {
	var items []responses.ResponseInputItemUnionParam
	switch m.Role {
	case provider.User:
		if len(m.ToolCalls) > 0 {
			return nil, errors.New("a user message cannot carry tool calls")
		}
		for _, r := range m.ToolResults {
			out := &responses.ResponseInputItemFunctionCallOutputParam{CallID: param.NewOpt(r.CallID)}
			out.Output.OfString = param.NewOpt(r.Content)
			items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: out})
		}
		if m.Text != "" {
			items = append(items, message(m.Text, responses.EasyInputMessageRoleUser))
		}
	case provider.Assistant:
		if len(m.ToolResults) > 0 {
			return nil, errors.New("an assistant message cannot carry tool results")
		}
		if m.Text != "" {
			items = append(items, message(m.Text, responses.EasyInputMessageRoleAssistant))
		}
		for _, tc := range m.ToolCalls {
			items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
				CallID:    tc.ID,
				Name:      tc.Name,
				Arguments: wire.ArgumentsText(tc.Arguments),
			}})
		}
	default:
		return nil, fmt.Errorf("unknown role %q (known: assistant, user)", m.Role)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("the %s message is empty: it has no text, tool calls or tool results", m.Role)
	}
	return items, nil
}

// message is a message input item with plain text content. An assistant's
// earlier answer goes back this way: the API takes it as the model's own
// output, and it needs no output item id, which a stateless client does not
// keep.
func message(text string, role responses.EasyInputMessageRole) responses.ResponseInputItemUnionParam {
	m := &responses.EasyInputMessageParam{Role: role, Type: responses.EasyInputMessageTypeMessage}
	m.Content.OfString = param.NewOpt(text)
	return responses.ResponseInputItemUnionParam{OfMessage: m}
}

// fromResponse maps a terminal response to a provider response.
func fromResponse(res *responses.Response) provider.Response {
	var r provider.Response
	var text strings.Builder
	for _, item := range res.Output {
		switch item.Type {
		case "message":
			for _, part := range item.Content {
				switch part.Type {
				case "output_text":
					text.WriteString(part.Text)
				case "refusal":
					text.WriteString(part.Refusal)
				}
			}
		case "function_call":
			r.ToolCalls = append(r.ToolCalls, provider.ToolCall{
				ID:        item.CallID,
				Name:      item.Name,
				Arguments: wire.ArgumentsFromText(item.Arguments.OfString),
			})
		}
	}
	r.Text = text.String()
	r.Usage = provider.Usage{
		InputTokens:  res.Usage.InputTokens,
		OutputTokens: res.Usage.OutputTokens,
		CachedTokens: res.Usage.InputTokensDetails.CachedTokens,
	}
	r.StopReason = string(res.Status)
	if res.Status == responses.ResponseStatusIncomplete && res.IncompleteDetails.Reason != "" {
		r.StopReason = res.IncompleteDetails.Reason
	}
	return r
}
