package servers_test

import (
	"strings"
	"testing"

	"github.com/mst-eval/mst/servers"
)

// TestResolveSecretRefs: references anywhere inside env and headers
// values, several in one value, are replaced by their values; other text
// stays; the declaration given is not changed (it is the bundle's).
func TestResolveSecretRefs(t *testing.T) {
	t.Parallel()
	values := map[string]string{"GH": "gh-value-1", "B": "b-value-2"}
	lookup := func(n string) (string, bool) { v, ok := values[n]; return v, ok }
	s := servers.Server{Name: "srv",
		Env:     map[string]string{"GITHUB_TOKEN": "${secret:GH}", "BOTH": "a=${secret:GH};b=${secret:B}", "PLAIN": "$HOME ${other} $${secret:"},
		Headers: map[string]string{"Authorization": "Bearer ${secret:B}"}}
	_, err := s.SecretRefs()
	if err == nil {
		t.Fatalf("SecretRefs accepted a stray ${secret")
	}
	s.Env["PLAIN"] = "$HOME ${other} ${secretive}"
	refs, err := s.SecretRefs()
	if err != nil || len(refs) != 4 {
		t.Fatalf("SecretRefs = %v, %v; want 4 references", refs, err)
	}
	got, err := s.Resolve(lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"GITHUB_TOKEN": "gh-value-1", "BOTH": "a=gh-value-1;b=b-value-2", "PLAIN": "$HOME ${other} ${secretive}"}
	for k, v := range want {
		if got.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, got.Env[k], v)
		}
	}
	if got.Headers["Authorization"] != "Bearer b-value-2" {
		t.Errorf("header = %q", got.Headers["Authorization"])
	}
	if s.Env["GITHUB_TOKEN"] != "${secret:GH}" || s.Headers["Authorization"] != "Bearer ${secret:B}" {
		t.Errorf("Resolve changed the declaration it was given: %v %v", s.Env, s.Headers)
	}
}

// TestSecretRefErrors: a malformed reference, and a name the worker was
// not given, fail naming the place, and never with a value.
func TestSecretRefErrors(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"${secret:}", "${secret:A-B}", "${secret:X", "x ${secret: X}", "${secret:1X}"} {
		s := servers.Server{Name: "srv", Headers: map[string]string{"H": v}}
		if _, err := s.Resolve(func(string) (string, bool) { return "v", true }); err == nil || !strings.Contains(err.Error(), "servers.srv.headers.H") {
			t.Errorf("Resolve(%q) = %v, want an error naming servers.srv.headers.H", v, err)
		}
	}
	s := servers.Server{Name: "srv", Env: map[string]string{"A": "${secret:KNOWN}-${secret:MISSING}"}}
	_, err := s.Resolve(func(n string) (string, bool) { return "known-value", n == "KNOWN" })
	if err == nil || !strings.Contains(err.Error(), "servers.srv.env.A") || !strings.Contains(err.Error(), "MISSING") || strings.Contains(err.Error(), "known-value") {
		t.Errorf("Resolve with a missing name = %v, want the place and the name, no value", err)
	}
}
