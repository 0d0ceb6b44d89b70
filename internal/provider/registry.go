package provider

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/mst-eval/mst/internal/ground/registry"
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
	// Appends lists the paths the provider's API client adds to a custom
	// base URL (Options.BaseURL) to reach its endpoints: "/v1/messages"
	// for anthropic, "/responses" and "/chat/completions" for openai.
	// CheckBaseURL refuses a base URL that already ends in part of one.
	Appends []string
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

// CheckBaseURL checks a base URL given for the provider's models; option
// names where it was given ("clientOptions.baseURL"), for the error. See
// the function CheckBaseURL.
func (d *Definition) CheckBaseURL(option, baseURL string) error {
	return CheckBaseURL(option, baseURL, "MST's "+d.Name+" provider", d.Appends...)
}

// CheckBaseURL checks a base URL to which by (who sends the requests: "the
// Claude Code CLI") appends each of appends ("/v1/messages") for its
// requests. The URL must be absolute http or https, and its path must not
// already end in a leading part of an appended path ("/v1", which would
// give /v1/v1/messages) or a trailing part of one ("/messages", a full
// endpoint): the error names option, the value's path and the value to
// write instead. Empty is fine: the default address.
func CheckBaseURL(option, baseURL, by string, appends ...string) error {
	if baseURL == "" {
		return nil
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an absolute http or https URL; write the API's address with its scheme and host, such as http://127.0.0.1:8080", option, baseURL)
	}
	path := strings.TrimRight(u.Path, "/")
	for _, a := range appends {
		segs := strings.Split(strings.Trim(a, "/"), "/")
		var parts []string
		for i := len(segs); i >= 1; i-- {
			parts = append(parts, "/"+strings.Join(segs[:i], "/"))
			if i < len(segs) {
				parts = append(parts, "/"+strings.Join(segs[len(segs)-i:], "/"))
			}
		}
		for _, part := range parts {
			if !strings.HasSuffix(path, part) {
				continue
			}
			fixed := *u
			fixed.Path, fixed.RawPath = strings.TrimSuffix(path, part), ""
			return fmt.Errorf("%s: the path of %q ends in %s, but %s appends %s to the base URL itself, so its requests would go to %s%s; drop %s: write %q",
				option, baseURL, part, by, a, path, a, part, fixed.String())
		}
	}
	return nil
}

// Registry holds provider definitions by name (MST's one registry shape).
// The built-in ones are registered in one place (internal/builtin); a
// custom build of mst may add its own. A Registry is safe for concurrent
// use once built.
type Registry = registry.Registry[*Definition]

// NewRegistry returns a registry holding defs. A duplicate name, an empty
// name or a name with a "/" panics: each is a programming error.
func NewRegistry(defs ...*Definition) *Registry {
	return registry.New("provider", func(d *Definition) string { return d.Name }, defs, registry.Check(func(d *Definition) error {
		if strings.Contains(d.Name, "/") {
			return errors.New("a provider's name has no slash")
		}
		return nil
	}))
}

// Buildable lists, in alphabetical order, the providers MST can build
// itself: those whose definition has New.
func Buildable(r *Registry) []string {
	var names []string
	for _, d := range r.All() {
		if d.New != nil {
			names = append(names, d.Name)
		}
	}
	return names
}

// KeyVars lists, in alphabetical order and without repeats, the key
// variables the providers read.
func KeyVars(r *Registry) []string {
	var vars []string
	for _, d := range r.All() {
		if v := d.KeyVar; v != "" && !slices.Contains(vars, v) {
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
