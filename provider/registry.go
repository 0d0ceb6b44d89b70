package provider

import (
	"fmt"
	"slices"
	"strings"
)

// Definition describes a model provider: the name that starts a model
// reference ("anthropic" in "anthropic/claude-sonnet-4-5"), where its API key
// comes from, and how MST builds a Provider for it.
//
// A Definition is data. It is registered once, in internal/builtin, and
// read, never changed, afterwards.
type Definition struct {
	// Name is the provider's part of a model reference, lowercase and
	// without "/" ("anthropic", "offline").
	Name string
	// Description says in one line what the provider is.
	Description string
	// KeyVar names the environment variable (or secrets-file key) that holds
	// the provider's API key ("ANTHROPIC_API_KEY"); "" when MST reads no key
	// for it (offline needs none).
	KeyVar string
	// KeyOptionalWithBaseURL is true when a model at a custom Options.BaseURL
	// may run without a key: OpenAI-compatible servers such as Ollama or vLLM
	// often need none. At the provider's public address the key is always
	// required.
	KeyOptionalWithBaseURL bool
	// New builds a Provider for model, the model's name as the provider's
	// API knows it: the part of the reference after "Name/"
	// ("claude-sonnet-4-5"), or "" for a reference without a slash
	// ("offline"). o carries the key the caller resolved from KeyVar. New is
	// nil when MST has no API implementation of the provider (google: only
	// the Gemini CLI speaks to it), so only clients that bring their own can
	// run its models.
	New func(model string, o Options) (Provider, error)
}

// KeyRequired reports whether a model of the provider needs a key when
// reached at baseURL ("" for the provider's public address).
func (d *Definition) KeyRequired(baseURL string) bool {
	if d.KeyVar == "" {
		return false
	}
	return baseURL == "" || !d.KeyOptionalWithBaseURL
}

// Registry holds provider definitions by name. The built-in ones are
// registered in one place (internal/builtin); a custom build of mst may add
// its own. A Registry is safe for concurrent use once built.
type Registry struct {
	defs map[string]*Definition
}

// NewRegistry returns a registry holding defs. A duplicate name, an empty
// name or a name with a "/" panics: each is a programming error.
func NewRegistry(defs ...*Definition) *Registry {
	r := &Registry{defs: map[string]*Definition{}}
	for _, d := range defs {
		switch {
		case d.Name == "" || strings.Contains(d.Name, "/"):
			panic(fmt.Sprintf("provider name %q is empty or has a slash", d.Name))
		case r.defs[d.Name] != nil:
			panic(fmt.Sprintf("provider %q registered twice", d.Name))
		}
		r.defs[d.Name] = d
	}
	return r
}

// Lookup returns the definition named name, or an error that lists the
// known names: unknown provider "antrhopic" (known: anthropic, google,
// offline, openai).
func (r *Registry) Lookup(name string) (*Definition, error) {
	if d, ok := r.defs[name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("unknown provider %q (known: %s)", name, strings.Join(r.Names(), ", "))
}

// Names lists the registered providers in alphabetical order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.defs))
	for n := range r.defs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Buildable lists, in alphabetical order, the providers MST can build
// itself: those whose definition has New.
func (r *Registry) Buildable() []string {
	var names []string
	for _, n := range r.Names() {
		if r.defs[n].New != nil {
			names = append(names, n)
		}
	}
	return names
}

// KeyVars lists, in alphabetical order and without repeats, the key
// variables the providers read.
func (r *Registry) KeyVars() []string {
	var vars []string
	for _, n := range r.Names() {
		if v := r.defs[n].KeyVar; v != "" && !slices.Contains(vars, v) {
			vars = append(vars, v)
		}
	}
	slices.Sort(vars)
	return vars
}

// Split splits a model reference at its first "/" into the provider's name
// and the model's name as that provider knows it:
// "anthropic/claude-sonnet-4-5" gives "anthropic" and "claude-sonnet-4-5";
// "openai/org/model" gives "openai" and "org/model"; a reference without a
// slash ("offline") is all provider, with an empty model. It is the one
// place MST takes a model reference apart.
func Split(ref string) (provider, model string) {
	provider, model, _ = strings.Cut(ref, "/")
	return provider, model
}

// Of returns the provider part of a model reference: "anthropic" for
// "anthropic/claude-sonnet-4-5", "offline" for "offline", "" for "".
func Of(ref string) string {
	p, _ := Split(ref)
	return p
}
