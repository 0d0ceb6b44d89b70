package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/api"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// TestDefinitionFromRegistry: the client runs exactly the providers of the
// registry that have New, and states each one's key variable.
func TestDefinitionFromRegistry(t *testing.T) {
	t.Parallel()
	d := api.Definition(providers)
	if want := []string{"anthropic", "offline", "openai"}; !cmp.Equal(d.ModelProviders, want) {
		t.Errorf("Definition(built-in providers).ModelProviders = %v, want %v (google has no New)", d.ModelProviders, want)
	}
	want := []string{
		"ANTHROPIC_API_KEY for anthropic/ models",
		"none for offline",
		"OPENAI_API_KEY for openai/ models (none for a server at a baseURL that needs no key)",
	}
	if diff := cmp.Diff(want, d.Requirements.Credentials); diff != "" {
		t.Errorf("Definition(built-in providers).Requirements.Credentials (-want +got):\n%s", diff)
	}
	var schema struct {
		Properties map[string]struct {
			Default string `json:"x-defaultDescription"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(d.Options, &schema); err != nil {
		t.Fatalf("options schema: %v", err)
	}
	if got, want := schema.Properties["apiKeyEnv"].Default, "the model's provider's variable (ANTHROPIC_API_KEY for anthropic/, OPENAI_API_KEY for openai/)"; got != want {
		t.Errorf("apiKeyEnv default = %q, want %q", got, want)
	}
}

// TestOpenEachProvider builds every provider of the registry that MST
// implements through the api client, and runs one trial against the fake
// provider server (offline needs none).
func TestOpenEachProvider(t *testing.T) {
	t.Parallel()
	srv := peertest.GoEverything(t)
	for _, tt := range []struct {
		name    string
		model   string
		env     map[string]string
		keyEnv  string
		options func(url string) string
		format  string
		key     string // the Authorization header the key makes; "" means none
	}{
		{name: "anthropic", model: "anthropic/claude-test-1", env: map[string]string{"ANTHROPIC_API_KEY": "k-anthropic"},
			options: func(url string) string { return fmt.Sprintf(`{"baseURL": %q}`, url) },
			format:  providertest.FormatAnthropic, key: "Bearer k-anthropic"},
		{name: "openai-responses", model: "openai/gpt-test-1", env: map[string]string{"OPENAI_API_KEY": "k-openai"},
			options: func(url string) string { return fmt.Sprintf(`{"baseURL": %q, "api": "responses"}`, url+"/v1") },
			format:  providertest.FormatResponses, key: "Bearer k-openai"},
		{name: "openai-chat", model: "openai/gpt-test-1", env: map[string]string{"OPENAI_API_KEY": "k-openai"},
			options: func(url string) string { return fmt.Sprintf(`{"baseURL": %q, "api": "chat"}`, url+"/v1") },
			format:  providertest.FormatChat, key: "Bearer k-openai"},
		{name: "openai-compatible-without-key", model: "openai/llama-test", env: map[string]string{},
			options: func(url string) string { return fmt.Sprintf(`{"baseURL": %q, "api": "chat"}`, url+"/v1") },
			format:  providertest.FormatChat},
		{name: "anthropic-keyEnv", model: "anthropic/claude-test-1", keyEnv: "TEAM_ANTHROPIC_KEY",
			env:     map[string]string{"ANTHROPIC_API_KEY": "k-default", "TEAM_ANTHROPIC_KEY": "k-team"},
			options: func(url string) string { return fmt.Sprintf(`{"baseURL": %q}`, url) },
			format:  providertest.FormatAnthropic, key: "Bearer k-team"},
		{name: "offline", model: "offline", options: func(string) string { return `{}` }},
		{name: "offline-label", model: "offline/demo", options: func(string) string { return `{}` }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
				Turns: []providertest.Turn{{Text: "Hello from the fake."}},
			}}})
			s, err := api.Definition(providers).Open(t.Context(), client.OpenParams{
				Variant: "v", Model: tt.model, Options: json.RawMessage(tt.options(fake.URL)), KeyEnv: tt.keyEnv,
				Servers: []servers.Server{srv}, Env: tt.env, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatalf("Open(%s) = %v", tt.model, err)
			}
			t.Cleanup(func() { s.Close() })
			res := runTrial(t, s, "Say hello")
			if res.Outcome.Status != transcript.Answered {
				t.Fatalf("Run(%s) outcome = %+v, want answered", tt.model, res.Outcome)
			}
			reqs := fake.Requests()
			if tt.format == "" {
				if len(reqs) != 0 {
					t.Errorf("Run(%s) sent %d requests to the fake provider, want none", tt.model, len(reqs))
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("Run(%s) sent %d requests, want 1", tt.model, len(reqs))
			}
			r := reqs[0]
			if _, name := provider.Split(tt.model); r.Format != tt.format || r.Model != name {
				t.Errorf("Run(%s) request: format %s model %s, want %s and %s", tt.model, r.Format, r.Model, tt.format, name)
			}
			if got := r.Header.Get("Authorization"); got != tt.key {
				t.Errorf("Run(%s) request header Authorization = %q, want %q", tt.model, got, tt.key)
			}
		})
	}
}

// TestOpenProviderErrors: a model the api client cannot run, or a key that
// is missing, fails Open with a message that says what to write or set.
func TestOpenProviderErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		model   string
		options string
		keyEnv  string
		env     map[string]string
		want    string
	}{
		{name: "unknown provider", model: "antrhopic/claude-sonnet-4-5",
			want: `model "antrhopic/claude-sonnet-4-5": unknown provider "antrhopic" (known: anthropic, google, offline, openai): write offline or provider/model, such as anthropic/claude-sonnet-4-5`},
		{name: "empty model", model: "",
			want: `model "": unknown provider "" (known: anthropic, google, offline, openai): write offline or provider/model, such as anthropic/claude-sonnet-4-5`},
		{name: "provider without New", model: "google/gemini-2.5-pro", env: map[string]string{"GEMINI_API_KEY": "k"},
			want: "model google/gemini-2.5-pro: the api client runs models of anthropic, offline, openai, not google (MST has no API implementation of it): use a client that runs google models (mst clients)"},
		{name: "anthropic without key", model: "anthropic/claude-sonnet-4-5",
			want: "model anthropic/claude-sonnet-4-5 needs an API key in ANTHROPIC_API_KEY: set it in the environment or the secrets file, or name another variable with clientOptions.apiKeyEnv"},
		{name: "anthropic with baseURL without key", model: "anthropic/claude-sonnet-4-5", options: `{"baseURL": "http://127.0.0.1:1"}`,
			want: "model anthropic/claude-sonnet-4-5 needs an API key in ANTHROPIC_API_KEY: set it in the environment or the secrets file, or name another variable with clientOptions.apiKeyEnv"},
		{name: "openai without key", model: "openai/gpt-5",
			want: "model openai/gpt-5 needs an API key in OPENAI_API_KEY: set it in the environment or the secrets file, or name another variable with clientOptions.apiKeyEnv, or point clientOptions.baseURL at a server that needs no key"},
		{name: "keyEnv unset", model: "anthropic/claude-sonnet-4-5", keyEnv: "TEAM_KEY", env: map[string]string{"ANTHROPIC_API_KEY": "k"},
			want: "model anthropic/claude-sonnet-4-5 needs an API key in TEAM_KEY, the variable clientOptions.apiKeyEnv names: set it in the environment or the secrets file"},
		{name: "bare provider", model: "anthropic", env: map[string]string{"ANTHROPIC_API_KEY": "k"},
			want: "anthropic: no model name: name one, such as claude-sonnet-4-5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			options := tt.options
			if options == "" {
				options = "{}"
			}
			s, err := api.Definition(providers).Open(t.Context(), client.OpenParams{
				Variant: "v", Model: tt.model, Options: json.RawMessage(options), KeyEnv: tt.keyEnv, Env: tt.env,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if s != nil {
				s.Close()
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("Open(%q) = %v\nwant %s", tt.model, err, tt.want)
			}
		})
	}
}
