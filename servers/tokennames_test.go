package servers_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mst-eval/mst/servers"
)

// TestTokenNames: every connector server gets a distinct shell-variable
// name, readable where its name allows, with a hash suffix only where two
// names would meet (case, '-' against '_', letters outside ASCII).
func TestTokenNames(t *testing.T) {
	long := strings.Repeat("x", 300)
	names := []string{"notes", "notes-v2", "notes_v2", "Drive", "drive", "über", "éber", "日本", long}
	got := servers.TokenNames(names)
	shell := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	seen := map[string]string{}
	for _, n := range names {
		v := got[n]
		if !shell.MatchString(v) || !strings.HasPrefix(v, servers.TokenNamePrefix) {
			t.Errorf("%q: token name %q is not a shell variable name with the prefix", n, v)
		}
		if other, dup := seen[v]; dup {
			t.Errorf("%q and %q share the token name %q", n, other, v)
		}
		seen[v] = n
	}
	if got["notes"] != "MST_OAUTH_NOTES" {
		t.Errorf("notes: %q, want MST_OAUTH_NOTES", got["notes"])
	}
	if got["notes-v2"] == "MST_OAUTH_NOTES_V2" || !strings.HasPrefix(got["notes-v2"], "MST_OAUTH_NOTES_V2_") {
		t.Errorf("notes-v2 beside notes_v2: %q, want MST_OAUTH_NOTES_V2 with a suffix", got["notes-v2"])
	}
	if again := servers.TokenNames(names); again["Drive"] != got["Drive"] {
		t.Error("token names change from one call to the next")
	}
}
