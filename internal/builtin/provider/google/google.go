// Package google names Google's Gemini models as a model provider. MST has
// no API implementation of it yet: google/ models run only through a client
// that brings its own (the Gemini CLI, internal/builtin/client/geminicli), which reads the key
// from GEMINI_API_KEY. The definition exists so that model references,
// limits.providers and the key variables know the provider by name.
package google

import "github.com/mst-eval/mst/internal/provider"

// Definition is Google's registry entry: models written google/MODEL, with
// the key in GEMINI_API_KEY, and no New.
func Definition() *provider.Definition {
	return &provider.Definition{
		Name:        "google",
		Description: "Google's Gemini models; only the gemini-cli client runs them (MST has no API implementation).",
		KeyVar:      "GEMINI_API_KEY",
	}
}
