package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/mst-eval/mst/internal/builtin/provider/wire"
	"github.com/mst-eval/mst/internal/provider"
)

// name is the provider name in errors.
const name = "anthropic"

// client is the Anthropic provider. Its fields are set once by New and only
// read afterwards, so Complete is safe for concurrent use.
type client struct {
	sdk     sdk.Client
	model   string
	retries int
	// backoff is the wait before a retry of a failed stream.
	backoff func(n int) time.Duration
}

// New returns a provider that asks model through the Anthropic Messages API.
//
// opts.APIKey is required; New never reads the environment (the caller takes
// the key from ANTHROPIC_API_KEY or the secrets file). opts.BaseURL replaces
// https://api.anthropic.com (the SDK appends v1/messages to it).
// opts.MaxRetries bounds the retries of one Complete; negative means 2.
// opts.API is ignored. A Request whose Model is set overrides model.
func New(model string, opts provider.Options) (provider.Provider, error) {
	if model == "" {
		return nil, errors.New("anthropic: no model name: name one, such as claude-sonnet-4-5")
	}
	if opts.APIKey == "" {
		return nil, errors.New("anthropic: no API key: set ANTHROPIC_API_KEY")
	}
	retries := wire.MaxRetries(opts.MaxRetries)
	ropts := []option.RequestOption{
		// The caller resolves credentials and the address; the SDK must not
		// add its own from ANTHROPIC_* variables or profile files.
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(opts.APIKey),
		option.WithMaxRetries(retries),
		// One pooled client for every request of the run (wire/http.go).
		option.WithHTTPClient(wire.HTTPClient()),
	}
	if opts.BaseURL != "" {
		if err := checkBaseURL(opts.BaseURL); err != nil {
			return nil, err
		}
		ropts = append(ropts, option.WithBaseURL(opts.BaseURL))
	}
	return &client{sdk: sdk.NewClient(ropts...), model: model, retries: retries, backoff: wire.Backoff}, nil
}

// checkBaseURL rejects a base URL the SDK could not send requests to.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("anthropic: base URL %q is not an absolute http or https URL (for example https://api.anthropic.com)", s)
	}
	if err := provider.CheckBaseURL("base URL", s, "the Anthropic SDK", appends...); err != nil {
		return fmt.Errorf("anthropic: %w", err)
	}
	return nil
}

// appends is the path the SDK adds to a base URL: the base is the API's
// address without /v1.
var appends = []string{"/v1/messages"}

// Complete asks the model for its next turn.
func (c *client) Complete(ctx context.Context, req provider.Request) (provider.Response, error) {
	params, err := newParams(c.model, req)
	if err != nil {
		return provider.Response{}, err
	}
	var msg *sdk.Message
	err = wire.Retry(ctx, c.retries, c.backoff, retryableStreamError, func(ctx context.Context) error {
		var err error
		msg, err = c.stream(ctx, params)
		return err
	})
	if err != nil {
		return provider.Response{}, toError(err)
	}
	return fromMessage(msg), nil
}

// errCutOff is a stream that ended before its message_stop event.
var errCutOff = errors.New("anthropic: the response stream ended before message_stop")

// stream sends one request and accumulates its event stream.
func (c *client) stream(ctx context.Context, params sdk.MessageNewParams) (*sdk.Message, error) {
	s := c.sdk.Messages.NewStreaming(ctx, params)
	defer s.Close()
	var msg sdk.Message
	stopped := false
	for s.Next() {
		ev := s.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, fmt.Errorf("anthropic: reading the response stream: %w", err)
		}
		if ev.Type == "message_stop" {
			stopped = true
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if !stopped {
		return nil, errCutOff
	}
	return &msg, nil
}

// retryableStreamError reports whether err is a failure that happened after
// the API accepted the request (an error event in the stream, or a cut-off
// stream) and is worth another attempt. HTTP errors are not: the SDK has
// already retried them.
func retryableStreamError(err error) bool {
	if errors.Is(err, errCutOff) || wire.CutOff(err) {
		return true
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode < 400 {
		return wire.Retryable(status(apiErr))
	}
	return false
}

// toError turns an error the SDK returned into a *provider.Error when the
// API answered, and adds the provider name to the others.
func toError(err error) error {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		if strings.HasPrefix(err.Error(), name+":") {
			return err
		}
		return fmt.Errorf("anthropic: %w", err)
	}
	msg := apiErr.Message
	if msg == "" {
		msg = strings.TrimSpace(apiErr.RawJSON())
	}
	st := status(apiErr)
	if msg == "" {
		msg = http.StatusText(st)
	}
	if t := string(apiErr.Type()); t != "" && !strings.Contains(msg, t) {
		msg = t + ": " + msg
	}
	return &provider.Error{Provider: name, Status: st, Message: msg}
}

// status returns the HTTP status of an API error. An error event inside a
// stream arrives with the stream's 200, so its status is inferred from the
// error type.
func status(e *sdk.Error) int {
	if e.StatusCode >= 400 {
		return e.StatusCode
	}
	switch e.Type() {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "conflict_error":
		return http.StatusConflict
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529 // Anthropic's status for an overloaded API
	default:
		return http.StatusInternalServerError
	}
}

// newParams maps a provider request to the Messages API parameters. model is
// used when req.Model is empty.
func newParams(model string, req provider.Request) (sdk.MessageNewParams, error) {
	if req.Model != "" {
		model = req.Model
	}
	p := sdk.MessageNewParams{
		Model:     sdk.Model(model),
		MaxTokens: wire.MaxTokens(req.MaxTokens),
	}
	if req.ReasoningEffort != "" {
		budget, err := thinkingBudget(model, req.ReasoningEffort)
		if err != nil {
			return sdk.MessageNewParams{}, err
		}
		// Thinking tokens count against max_tokens, which must exceed the
		// budget: the budget comes on top, so MaxTokens stays the room
		// for the answer.
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(budget)
		p.MaxTokens += budget
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		schema, err := wire.Schema(t.Name, t.InputSchema)
		if err != nil {
			return sdk.MessageNewParams{}, fmt.Errorf("anthropic: %w", err)
		}
		tp := &sdk.ToolParam{
			Name: t.Name,
			// The schema goes out byte for byte, not through the SDK's
			// partial model of a schema.
			InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
		}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	for i, m := range req.Messages {
		mp, err := message(m)
		if err != nil {
			return sdk.MessageNewParams{}, fmt.Errorf("anthropic: message %d: %w", i, err)
		}
		p.Messages = append(p.Messages, mp)
	}
	return p, nil
}

// ThinkingBudgets are the extended-thinking budgets, in tokens, that
// Request.ReasoningEffort selects. 1024 is the least the API takes.
var ThinkingBudgets = map[string]int64{
	"minimal": 1024,
	"low":     2048,
	"medium":  8192,
	"high":    24576,
}

// thinkingBudget is the thinking budget of effort for model, or an error
// when effort is not a level or the model has no extended thinking.
func thinkingBudget(model, effort string) (int64, error) {
	budget, ok := ThinkingBudgets[effort]
	if !ok {
		return 0, fmt.Errorf("anthropic: reasoning effort %q is not one of minimal, low, medium, high", effort)
	}
	if !SupportsThinking(model) {
		return 0, fmt.Errorf("anthropic: model %s has no extended thinking, so reasoningEffort cannot apply: remove reasoningEffort, or pick a model that thinks (claude-3-7-sonnet or any Claude 4 model)", model)
	}
	return budget, nil
}

// SupportsThinking reports whether model takes extended thinking: every
// Claude model from claude-3-7-sonnet on. Names it does not know (a
// gateway's alias, a test model) are taken to support it, and the API has
// the last word.
func SupportsThinking(model string) bool {
	for _, old := range []string{"claude-2", "claude-instant", "claude-3-opus", "claude-3-sonnet", "claude-3-haiku", "claude-3-5-"} {
		if strings.HasPrefix(model, old) {
			return false
		}
	}
	return true
}

// reasoningBlock is one block of Response.Reasoning: a thinking block (its
// text and signature) or a redacted one (its data), as the API sent it.
type reasoningBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// reasoning turns Message.Reasoning back into the thinking blocks that
// start the assistant message.
func reasoning(raw json.RawMessage) ([]sdk.ContentBlockParamUnion, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var blocks []reasoningBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("the reasoning is not this provider's (a list of thinking blocks): %w", err)
	}
	out := make([]sdk.ContentBlockParamUnion, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case "thinking":
			out = append(out, sdk.NewThinkingBlock(b.Signature, b.Thinking))
		case "redacted_thinking":
			out = append(out, sdk.NewRedactedThinkingBlock(b.Data))
		default:
			return nil, fmt.Errorf("the reasoning holds a %q block; only thinking and redacted_thinking belong there", b.Type)
		}
	}
	return out, nil
}

// message maps one message of the conversation.
func message(m provider.Message) (sdk.MessageParam, error) {
	var blocks []sdk.ContentBlockParamUnion
	switch m.Role {
	case provider.User:
		if len(m.ToolCalls) > 0 {
			return sdk.MessageParam{}, errors.New("a user message cannot carry tool calls")
		}
		// Tool results come first: the API wants them at the start of the
		// message that answers the calls.
		for _, r := range m.ToolResults {
			blocks = append(blocks, toolResult(r))
		}
		if m.Text != "" {
			blocks = append(blocks, sdk.NewTextBlock(m.Text))
		}
	case provider.Assistant:
		if len(m.ToolResults) > 0 {
			return sdk.MessageParam{}, errors.New("an assistant message cannot carry tool results")
		}
		// The model's thinking comes back first, as it was sent: the API
		// needs it to go on after a tool call with thinking on.
		th, err := reasoning(m.Reasoning)
		if err != nil {
			return sdk.MessageParam{}, err
		}
		blocks = append(blocks, th...)
		if m.Text != "" {
			blocks = append(blocks, sdk.NewTextBlock(m.Text))
		}
		for _, c := range m.ToolCalls {
			blocks = append(blocks, sdk.NewToolUseBlock(c.ID, wire.Arguments(c.Arguments), c.Name))
		}
	default:
		return sdk.MessageParam{}, fmt.Errorf("unknown role %q (known: assistant, user)", m.Role)
	}
	if len(blocks) == 0 {
		return sdk.MessageParam{}, fmt.Errorf("the %s message is empty: it has no text, tool calls or tool results", m.Role)
	}
	if m.Role == provider.User {
		return sdk.NewUserMessage(blocks...), nil
	}
	return sdk.NewAssistantMessage(blocks...), nil
}

// toolResult maps a tool result. An empty result is sent without content:
// the API rejects empty text blocks.
func toolResult(r provider.ToolResult) sdk.ContentBlockParamUnion {
	b := &sdk.ToolResultBlockParam{ToolUseID: r.CallID}
	if r.Content != "" {
		b.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: r.Content}}}
	}
	if r.IsError {
		b.IsError = param.NewOpt(true)
	}
	return sdk.ContentBlockParamUnion{OfToolResult: b}
}

// fromMessage maps the final message of a stream to a provider response.
func fromMessage(m *sdk.Message) provider.Response {
	var r provider.Response
	var text strings.Builder
	var thinking []reasoningBlock
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			r.ToolCalls = append(r.ToolCalls, provider.ToolCall{ID: b.ID, Name: b.Name, Arguments: wire.Arguments(b.Input)})
		case "thinking":
			thinking = append(thinking, reasoningBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			thinking = append(thinking, reasoningBlock{Type: b.Type, Data: b.Data})
		}
	}
	r.Text = text.String()
	if len(thinking) > 0 {
		// Marshalling strings and a fixed struct cannot fail.
		r.Reasoning, _ = json.Marshal(thinking)
	}
	u := m.Usage
	r.Usage = provider.Usage{
		InputTokens:  u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		OutputTokens: u.OutputTokens,
		CachedTokens: u.CacheReadInputTokens,
	}
	r.StopReason = string(m.StopReason)
	return r
}

// Definition is the Anthropic provider's registry entry: models written
// anthropic/MODEL, with the key in ANTHROPIC_API_KEY.
func Definition() *provider.Definition {
	return &provider.Definition{
		Name:        name,
		Description: "Anthropic's Claude models through the Messages API.",
		KeyVar:      "ANTHROPIC_API_KEY",
		Appends:     appends,
		New:         New,
	}
}
