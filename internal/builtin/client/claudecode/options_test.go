package claudecode

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBaseURLDoubledPath: a baseURL whose path already ends in what the
// CLI appends (/v1/messages) is refused by the options check that runs at
// load (preflight) and at Open, naming the option, the path and the fix;
// addresses without it pass.
func TestBaseURLDoubledPath(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"http://127.0.0.1:8080/v1":                   "http://127.0.0.1:8080",
		"http://127.0.0.1:8080/v1/":                  "http://127.0.0.1:8080",
		"https://api.anthropic.com/v1/messages":      "https://api.anthropic.com",
		"https://gw.example.com/anthropic/v1":        "https://gw.example.com/anthropic",
		"https://gw.example.com/anthropic/messages/": "https://gw.example.com/anthropic",
	}
	for raw, fixed := range bad {
		err := CheckBaseURL(raw)
		if err == nil {
			t.Errorf("CheckBaseURL(%q) = nil, want the doubled path refused", raw)
			continue
		}
		for _, want := range []string{"clientOptions.baseURL", raw, "/v1/messages", `"` + fixed + `"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("CheckBaseURL(%q) = %q, want it to mention %s", raw, err, want)
			}
		}
		opts, _ := json.Marshal(map[string]any{"baseURL": raw, "command": "/nonexistent/claude"})
		if err := program.Preflight(opts); err == nil || !strings.Contains(err.Error(), "baseURL") {
			t.Errorf("preflight with baseURL %q = %v, want the baseURL refused before the CLI is looked for", raw, err)
		}
	}
	for _, good := range []string{"", "http://127.0.0.1:8080", "http://127.0.0.1:8080/", "https://gw.example.com/anthropic", "https://gw.example.com/v1beta", "https://gw.example.com/api/v10"} {
		if err := CheckBaseURL(good); err != nil {
			t.Errorf("CheckBaseURL(%q) = %v, want nil", good, err)
		}
	}
	for _, notURL := range []string{"127.0.0.1:8080", "ftp://host", "/v1"} {
		if err := CheckBaseURL(notURL); err == nil || !strings.Contains(err.Error(), "absolute http or https URL") {
			t.Errorf("CheckBaseURL(%q) = %v, want it refused as not an http URL", notURL, err)
		}
	}
}

// TestBuiltinToolsArgs: every built-in tool builtinTools does not name is
// off in the CLI's command line (offered with --tools, denied with
// --disallowedTools), and the named ones are offered and allowed.
func TestBuiltinToolsArgs(t *testing.T) {
	t.Parallel()
	for _, on := range [][]string{nil, {"Bash"}, {"Read", "Grep"}, builtinToolNames()} {
		raw, _ := json.Marshal(map[string]any{"builtinTools": on})
		opts, err := decodeOptions(raw)
		if err != nil {
			t.Fatal(err)
		}
		s := &session{opts: opts, model: "m"}
		args := s.args("cfg.json", nil)
		flag := func(name string) (string, bool) {
			for i, a := range args {
				if a == name && i+1 < len(args) {
					return args[i+1], true
				}
			}
			return "", false
		}
		tools, ok := flag("--tools")
		if !ok || tools != strings.Join(on, ",") {
			t.Errorf("builtinTools %v: --tools %q (given %v), want %q", on, tools, ok, strings.Join(on, ","))
		}
		if m, _ := flag("--permission-mode"); m != "dontAsk" {
			t.Errorf("builtinTools %v: --permission-mode %q, want dontAsk", on, m)
		}
		allowed, _ := flag("--allowedTools")
		denied, _ := flag("--disallowedTools")
		for _, n := range builtinToolNames() {
			isOn := strings.Contains(","+strings.Join(on, ",")+",", ","+n+",")
			if isOn != strings.Contains(","+allowed+",", ","+n+",") || isOn == strings.Contains(","+denied+",", ","+n+",") {
				t.Errorf("builtinTools %v: %s is on=%v but --allowedTools %q, --disallowedTools %q", on, n, isOn, allowed, denied)
			}
		}
	}
	if _, err := decodeOptions(json.RawMessage(`{"builtinTools":["Shell"]}`)); err == nil || !strings.Contains(err.Error(), "Bash") {
		t.Errorf("an unknown built-in tool: err %v, want it refused with the known names", err)
	}
}
