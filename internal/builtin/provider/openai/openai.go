package openai

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/mst-eval/mst/internal/builtin/provider/wire"
	"github.com/mst-eval/mst/internal/provider"
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
	// backoff is the wait before a retry of a failed Responses stream.
	backoff func(n int) time.Duration
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
		option.WithMiddleware(normalizeErrorBody),
		// One pooled client for every request of the run (wire/http.go).
		option.WithHTTPClient(wire.HTTPClient()),
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
	c := &client{api: api, model: model, retries: retries, backoff: wire.Backoff}
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

// Definition is the OpenAI provider's registry entry: models written
// openai/MODEL, with the key in OPENAI_API_KEY. An OpenAI-compatible server
// at a custom base URL (Ollama, vLLM) may need no key.
func Definition() *provider.Definition {
	return &provider.Definition{
		Name:                   name,
		Description:            "OpenAI's models, or any OpenAI-compatible server, through the Responses or Chat Completions API.",
		KeyVar:                 "OPENAI_API_KEY",
		KeyOptionalWithBaseURL: true,
		Appends:                []string{"/responses", "/chat/completions"},
		New:                    New,
	}
}
