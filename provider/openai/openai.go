// Package openai is the provider for OpenAI's APIs and the servers that copy
// them (Ollama, vLLM, gateways), built on the official SDK
// (github.com/openai/openai-go/v3). It speaks one of two wire formats,
// chosen by provider.Options.API:
//
//   - "responses" (the default): the Responses API, used statelessly. Each
//     Complete sends the whole conversation as input items (user and
//     assistant messages, function_call items with their call_id,
//     function_call_output items answering them), never previous_response_id,
//     and asks the API not to store the response. The answer is streamed and
//     the response of the terminal event (response.completed or
//     response.incomplete) is taken.
//   - "chat": the Chat Completions API, not streamed, so that the usage is
//     always reported, whatever the server. Assistant messages carry
//     tool_calls; tool results are tool messages with their tool_call_id.
//
// New builds the SDK client once; Complete may then be called from any number
// of goroutines.
//
// Mapping, in both formats:
//   - Tools are function tools whose parameters are the tool's JSON Schema,
//     not strict (strict mode would reject most MCP schemas).
//   - Request.System becomes the instructions (Responses) or a system
//     message (Chat Completions).
//   - Request.MaxTokens (4096 when 0) becomes max_output_tokens (Responses)
//     or max_completion_tokens (Chat Completions).
//   - Request.ReasoningEffort, when set, becomes reasoning.effort
//     (Responses) or reasoning_effort (Chat Completions).
//   - A tool result's IsError has no place in either format and is dropped;
//     the content goes as it is.
//   - Arguments the model sent that are not valid JSON are kept as a JSON
//     string (see ArgumentsFromText in provider/internal/wire) and sent back
//     as the original text.
//   - Usage.CachedTokens is the part of the input tokens read from the
//     prompt cache. StopReason is the Responses status ("completed", or the
//     incomplete reason such as "max_output_tokens"), or the Chat Completions
//     finish_reason ("stop", "tool_calls", "length", …).
//
// Errors: the SDK retries 408, 409, 429 and 5xx answers itself, honouring
// retry-after headers, Options.MaxRetries times. A failure reported inside a
// Responses stream (an error event, a failed response, or a stream cut off
// before its terminal event) is retried here on the same budget. What remains
// is returned as a *provider.Error when the API answered with an error, and
// as the network or context error otherwise.
package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/mst-eval/mst/provider"
	"github.com/mst-eval/mst/provider/internal/wire"
)

// name is the provider name in errors.
const name = "openai"

// The wire formats Options.API can name.
const (
	APIResponses = "responses"
	APIChat      = "chat"
)

// client is the OpenAI provider. Its fields are set once by New and only read
// afterwards, so Complete is safe for concurrent use.
type client struct {
	api       string
	model     string
	retries   int
	responses responses.ResponseService
	chat      sdk.ChatCompletionService
}

// New returns a provider that asks model through the API that opts.API names.
//
// opts.BaseURL replaces https://api.openai.com/v1 and must include the
// version path, e.g. http://localhost:11434/v1 for Ollama. opts.APIKey is
// required for the default address; a server at another address may not
// need one, and then no Authorization header is sent. New never reads the
// environment: the caller takes the key from OPENAI_API_KEY or the secrets
// file. opts.MaxRetries bounds the retries of one Complete; negative means 2.
// A Request whose Model is set overrides model.
func New(model string, opts provider.Options) (provider.Provider, error) {
	if model == "" {
		return nil, errors.New("openai: no model name: name one, such as gpt-5-mini")
	}
	api := opts.API
	switch api {
	case "":
		api = APIResponses
	case APIResponses, APIChat:
	default:
		return nil, fmt.Errorf("openai: unknown api %q (known: %s, %s)", opts.API, APIResponses, APIChat)
	}
	if opts.APIKey == "" && opts.BaseURL == "" {
		return nil, errors.New("openai: no API key: set OPENAI_API_KEY")
	}
	retries := wire.MaxRetries(opts.MaxRetries)
	// The services are built directly rather than through openai.NewClient,
	// which would add OPENAI_* settings from the environment.
	ropts := []option.RequestOption{
		option.WithEnvironmentProduction(),
		option.WithMaxRetries(retries),
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("openai: base URL %q is not an absolute http or https URL (for example http://localhost:11434/v1)", opts.BaseURL)
		}
		ropts = append(ropts, option.WithBaseURL(opts.BaseURL))
	}
	if opts.APIKey != "" {
		ropts = append(ropts, option.WithAPIKey(opts.APIKey))
	}
	c := &client{api: api, model: model, retries: retries}
	if api == APIChat {
		c.chat = sdk.NewChatCompletionService(ropts...)
	} else {
		c.responses = responses.NewResponseService(ropts...)
	}
	return c, nil
}

// Complete asks the model for its next turn.
func (c *client) Complete(ctx context.Context, req provider.Request) (provider.Response, error) {
	model := c.model
	if req.Model != "" {
		model = req.Model
	}
	if c.api == APIChat {
		return c.completeChat(ctx, model, req)
	}
	return c.completeResponses(ctx, model, req)
}

// streamError is a failure reported inside a successful HTTP response: an
// error event, a failed response, or an error object in a stream.
type streamError struct {
	Code    string
	Message string
}

func (e *streamError) Error() string {
	return fmt.Sprintf("openai: error in the response stream: %s: %s", e.Code, e.Message)
}

// status guesses the HTTP status that stands for a stream error's code.
func (e *streamError) status() int {
	c := strings.ToLower(e.Code)
	switch {
	case strings.Contains(c, "rate_limit"):
		return http.StatusTooManyRequests
	case strings.HasPrefix(c, "invalid"):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}

// errCutOff is a Responses stream that ended before its terminal event.
var errCutOff = errors.New("openai: the response stream ended before response.completed")

// retryableStreamError reports whether err is a failure that happened after
// the API accepted the request and is worth another attempt. HTTP errors are
// not: the SDK has already retried them.
func retryableStreamError(err error) bool {
	if errors.Is(err, errCutOff) {
		return true
	}
	var se *streamError
	return errors.As(err, &se) && wire.Retryable(se.status())
}

// toError turns an error from the SDK or from reading a stream into a
// *provider.Error when the API answered with one, and adds the provider name
// to the others.
func toError(err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.RawJSON())
		}
		if msg == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		if apiErr.Code != "" && !strings.Contains(msg, apiErr.Code) {
			msg = apiErr.Code + ": " + msg
		}
		return &provider.Error{Provider: name, Status: apiErr.StatusCode, Message: msg}
	}
	var se *streamError
	if errors.As(err, &se) {
		msg := se.Message
		if se.Code != "" {
			msg = se.Code + ": " + msg
		}
		return &provider.Error{Provider: name, Status: se.status(), Message: msg}
	}
	if strings.HasPrefix(err.Error(), name+":") {
		return err
	}
	return fmt.Errorf("openai: %w", err)
}
