package openai

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/mst-eval/mst/internal/builtin/provider/wire"
	"github.com/mst-eval/mst/internal/provider"
)

// completeChat asks for one turn through the Chat Completions API.
func (c *client) completeChat(ctx context.Context, model string, req provider.Request) (provider.Response, error) {
	params, err := chatParams(model, req)
	if err != nil {
		return provider.Response{}, err
	}
	// The SDK retries what failed before an answer came; a body cut off
	// while it was read is retried here (nothing of it was used).
	var res *sdk.ChatCompletion
	err = wire.Retry(ctx, c.retries, c.backoff, wire.CutOff, func(ctx context.Context) error {
		var err error
		res, err = c.chat.New(ctx, params)
		return err
	})
	if err != nil {
		return provider.Response{}, toError(err)
	}
	return fromChat(res)
}

// chatParams maps a provider request to the Chat Completions parameters.
func chatParams(model string, req provider.Request) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{
		Model:               shared.ChatModel(model),
		MaxCompletionTokens: param.NewOpt(wire.MaxTokens(req.MaxTokens)),
	}
	if req.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	for _, t := range req.Tools {
		schema, err := wire.SchemaMap(t.Name, t.InputSchema)
		if err != nil {
			return sdk.ChatCompletionNewParams{}, fmt.Errorf("openai: %w", err)
		}
		fn := shared.FunctionDefinitionParam{
			Name:       t.Name,
			Parameters: shared.FunctionParameters(schema),
			Strict:     param.NewOpt(false),
		}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		ms, err := chatMessages(m)
		if err != nil {
			return sdk.ChatCompletionNewParams{}, fmt.Errorf("openai: message %d: %w", i, err)
		}
		p.Messages = append(p.Messages, ms...)
	}
	return p, nil
}

// chatMessages maps one message of the conversation. A user message with
// tool results becomes one tool message per result, then a user message for
// its text, if any.
func chatMessages(m provider.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var out []sdk.ChatCompletionMessageParamUnion
	switch m.Role {
	case provider.User:
		if len(m.ToolCalls) > 0 {
			return nil, errors.New("a user message cannot carry tool calls")
		}
		for _, r := range m.ToolResults {
			out = append(out, sdk.ToolMessage(r.Content, r.CallID))
		}
		if m.Text != "" {
			out = append(out, sdk.UserMessage(m.Text))
		}
	case provider.Assistant:
		if len(m.ToolResults) > 0 {
			return nil, errors.New("an assistant message cannot carry tool results")
		}
		if m.Text == "" && len(m.ToolCalls) == 0 {
			break
		}
		a := &sdk.ChatCompletionAssistantMessageParam{}
		if m.Text != "" {
			a.Content.OfString = param.NewOpt(m.Text)
		}
		for _, tc := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      tc.Name,
						Arguments: wire.ArgumentsText(tc.Arguments),
					},
				},
			})
		}
		out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: a})
	default:
		return nil, fmt.Errorf("unknown role %q (known: assistant, user)", m.Role)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the %s message is empty: it has no text, tool calls or tool results", m.Role)
	}
	return out, nil
}

// fromChat maps a chat completion to a provider response. Only the first
// choice counts: the request asks for one.
func fromChat(res *sdk.ChatCompletion) (provider.Response, error) {
	if len(res.Choices) == 0 {
		return provider.Response{}, errors.New("openai: the chat completion has no choices")
	}
	ch := res.Choices[0]
	r := provider.Response{
		Text:       ch.Message.Content,
		StopReason: ch.FinishReason,
		Usage: provider.Usage{
			InputTokens:  res.Usage.PromptTokens,
			OutputTokens: res.Usage.CompletionTokens,
			CachedTokens: res.Usage.PromptTokensDetails.CachedTokens,
		},
	}
	if r.Text == "" {
		r.Text = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		r.ToolCalls = append(r.ToolCalls, provider.ToolCall{
			ID:        tc.ID,
			Name:      tc.Function.Name,
			Arguments: wire.ArgumentsFromText(tc.Function.Arguments),
		})
	}
	return r, nil
}
