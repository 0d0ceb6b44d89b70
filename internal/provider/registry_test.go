package provider_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/provider"
)

type nop struct{}

func (nop) Complete(context.Context, provider.Request) (provider.Response, error) {
	return provider.Response{}, nil
}

func build(string, provider.Options) (provider.Provider, error) { return nop{}, nil }

func testRegistry() *provider.Registry {
	return provider.NewRegistry(
		&provider.Definition{Name: "openai", KeyVar: "OPENAI_API_KEY", KeyOptionalWithBaseURL: true, New: build},
		&provider.Definition{Name: "offline", New: build},
		&provider.Definition{Name: "google", KeyVar: "GEMINI_API_KEY"},
		&provider.Definition{Name: "anthropic", KeyVar: "ANTHROPIC_API_KEY", New: build},
		&provider.Definition{Name: "anthropic-gateway", KeyVar: "ANTHROPIC_API_KEY", New: build},
	)
}

func TestRegistryLookup(t *testing.T) {
	t.Parallel()
	r := testRegistry()
	d, err := r.Lookup("anthropic")
	if err != nil || d.Name != "anthropic" || d.KeyVar != "ANTHROPIC_API_KEY" {
		t.Errorf("Lookup(anthropic) = %+v, %v; want the anthropic definition", d, err)
	}
	for _, name := range []string{"antrhopic", "", "Anthropic", "anthropic/claude"} {
		_, err := r.Lookup(name)
		want := `unknown provider "` + name + `" (known: anthropic, anthropic-gateway, google, offline, openai)`
		if err == nil || err.Error() != want {
			t.Errorf("Lookup(%q) = %v, want %s", name, err, want)
		}
	}
}

func TestRegistryLists(t *testing.T) {
	t.Parallel()
	r := testRegistry()
	for _, tt := range []struct {
		what      string
		got, want []string
	}{
		{"Names()", r.Names(), []string{"anthropic", "anthropic-gateway", "google", "offline", "openai"}},
		{"Buildable()", provider.Buildable(r), []string{"anthropic", "anthropic-gateway", "offline", "openai"}},
		{"KeyVars()", provider.KeyVars(r), []string{"ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"}},
		{"empty Names()", provider.NewRegistry().Names(), []string{}},
	} {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.what, diff)
		}
	}
}

func TestNewRegistryPanics(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		defs []*provider.Definition
		want string
	}{
		{"duplicate", []*provider.Definition{{Name: "openai"}, {Name: "anthropic"}, {Name: "openai"}}, `provider "openai" registered twice`},
		{"empty name", []*provider.Definition{{Name: ""}}, `a provider without a name`},
		{"slash", []*provider.Definition{{Name: "openai/azure"}}, `provider "openai/azure": a provider's name has no slash`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if got := recover(); got != tt.want {
					t.Errorf("NewRegistry(%s) panicked with %v, want %q", tt.name, got, tt.want)
				}
			}()
			provider.NewRegistry(tt.defs...)
		})
	}
}

func TestKeyRequired(t *testing.T) {
	t.Parallel()
	r := testRegistry()
	for _, tt := range []struct {
		name, baseURL string
		want          bool
	}{
		{"anthropic", "", true},
		{"anthropic", "http://localhost:8080", true},
		{"openai", "", true},
		{"openai", "http://localhost:11434/v1", false},
		{"offline", "", false},
		{"offline", "http://localhost:1", false},
	} {
		d, _ := r.Lookup(tt.name)
		if got := d.KeyRequired(tt.baseURL); got != tt.want {
			t.Errorf("%s.KeyRequired(%q) = %v, want %v", tt.name, tt.baseURL, got, tt.want)
		}
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ref, provider, model string
	}{
		{"anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"},
		{"offline", "offline", ""},
		{"offline/demo", "offline", "demo"},
		{"", "", ""},
		{"/", "", ""},
		{"/claude", "", "claude"},
		{"anthropic/", "anthropic", ""},
		{"openai/org/team/gpt-5", "openai", "org/team/gpt-5"},
		{"openai//gpt-5", "openai", "/gpt-5"},
		{"modèle/été-1", "modèle", "été-1"},
		{"模型/千问", "模型", "千问"},
		{"Anthropic/claude", "Anthropic", "claude"},
		{" anthropic /claude", " anthropic ", "claude"},
	} {
		p, m := provider.Split(tt.ref)
		if p != tt.provider || m != tt.model {
			t.Errorf("Split(%q) = %q, %q; want %q, %q", tt.ref, p, m, tt.provider, tt.model)
		}
		if got := provider.Of(tt.ref); got != tt.provider {
			t.Errorf("Of(%q) = %q, want %q", tt.ref, got, tt.provider)
		}
	}
}
