package codexcli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/servers"
)

func TestConfigTOML(t *testing.T) {
	got := configTOML(config{
		model: "gpt-5", baseURL: "http://127.0.0.1:1/v1", keyEnv: "CODEX_API_KEY",
		requestMaxRetries: 2, streamMaxRetries: 0, reasoningEffort: "low",
	})
	for _, want := range []string{
		`model = "gpt-5"`,
		`model_provider = "mst"`,
		`model_reasoning_effort = "low"`,
		`approval_policy = "never"`,
		`sandbox_mode = "read-only"`,
		`web_search = "disabled"`,
		"check_for_update_on_startup = false",
		"[analytics]\nenabled = false",
		"[shell_environment_policy]\ninherit = \"core\"",
		"[agents]\nenabled = false",
		"[features]\nshell_tool = false\nunified_exec = false\nview_image = false\n",
		"[model_providers.mst]",
		`base_url = "http://127.0.0.1:1/v1"`,
		`wire_api = "responses"`,
		`env_key = "CODEX_API_KEY"`,
		"request_max_retries = 2",
		"stream_max_retries = 0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config.toml lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "mcp_servers") {
		t.Errorf("config.toml names servers; each trial's layer does:\n%s", got)
	}
}

// Each builtinTools name turns on its own switches and only those; the
// writing tools make the trial's folder (alone) writable.
func TestConfigBuiltinTools(t *testing.T) {
	for _, tc := range []struct {
		on        []string
		want, not []string
	}{
		{nil, []string{`sandbox_mode = "read-only"`, `web_search = "disabled"`, "shell_tool = false", "unified_exec = false", "view_image = false"}, []string{"shell_tool = true", "unified_exec = true", "view_image = true", "workspace-write", `"live"`}},
		{[]string{"shell"}, []string{`sandbox_mode = "workspace-write"`, "shell_tool = true", "unified_exec = true", "view_image = false", `web_search = "disabled"`, "exclude_slash_tmp = true", "exclude_tmpdir_env_var = true", "network_access = false"}, nil},
		{[]string{"apply_patch"}, []string{`sandbox_mode = "workspace-write"`, "shell_tool = false"}, nil},
		{[]string{"web_search"}, []string{`web_search = "live"`, `sandbox_mode = "read-only"`, "shell_tool = false"}, nil},
		{[]string{"view_image"}, []string{"view_image = true", `sandbox_mode = "read-only"`, "shell_tool = false"}, nil},
	} {
		got := configTOML(config{model: "m", baseURL: "http://x/v1", keyEnv: "OPENAI_API_KEY", builtins: tc.on})
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("builtinTools %v: config.toml lacks %s:\n%s", tc.on, w, got)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(got, w) {
				t.Errorf("builtinTools %v: config.toml has %s:\n%s", tc.on, w, got)
			}
		}
		for _, f := range offFeatures {
			if !strings.Contains(got, "\n"+f+" = false\n") {
				t.Errorf("builtinTools %v: feature %s is not off", tc.on, f)
			}
		}
	}
	if _, err := decodeOptions(json.RawMessage(`{"builtinTools": ["shell", "browser"]}`)); err == nil || !strings.Contains(err.Error(), `"browser"`) || !strings.Contains(err.Error(), "builtinTools[1]") {
		t.Errorf("an unknown built-in tool: %v", err)
	}
}

func TestServersTOML(t *testing.T) {
	base := map[string]string{"PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "the-key"}
	got, env, err := serversTOML([]servers.Server{
		{Name: "my-server", Command: `C:\bin\srv "x"`, Args: []string{"a\nb", "tab\there"}, Env: map[string]string{"Z": "1", "A B": "é\x01", "PATH": "/srv/bin", "HOME": "/h"}, Dir: "/d", StartupTimeout: 1500 * time.Millisecond},
		{Name: "remote", URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t", "X-Other": "o"}},
		{Name: "second", Command: "srv2", Env: map[string]string{"Z": "1", "OPENAI_API_KEY": "the-key"}},
	}, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`[mcp_servers."my-server"]`,
		`command = "C:\\bin\\srv \"x\""`,
		`args = ["a\nb", "tab\there"]`,
		`env = { "PATH" = "/srv/bin" }`,
		`env_vars = ["A B", "HOME", "Z"]`,
		`cwd = "/d"`,
		"startup_timeout_sec = 2",
		`[mcp_servers."remote"]`,
		`url = "https://example.com/mcp"`,
		`env_http_headers = { "Authorization" = "MST_CODEX_HEADER_1_0", "X-Other" = "MST_CODEX_HEADER_1_1" }`,
		`[mcp_servers."second"]`,
		`env_vars = ["OPENAI_API_KEY", "Z"]`,
		"required = true",
		`default_tools_approval_mode = "approve"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("servers layer lacks %s:\n%s", want, got)
		}
	}
	for _, secret := range []string{"Bearer t", `"o"`, "é", "the-key"} {
		if strings.Contains(got, secret) {
			t.Errorf("servers layer holds the value %q:\n%s", secret, got)
		}
	}
	wantEnv := map[string]string{"A B": "é\x01", "Z": "1", "MST_CODEX_HEADER_1_0": "Bearer t", "MST_CODEX_HEADER_1_1": "o"}
	if len(env) != len(wantEnv) {
		t.Errorf("env = %q, want %q", env, wantEnv)
	}
	for k, v := range wantEnv {
		if env[k] != v {
			t.Errorf("env[%s] = %q, want %q", k, env[k], v)
		}
	}
}

// A variable that two servers, or a server and the CLI, need with
// different values cannot be forwarded by name: an error naming both.
func TestServersTOMLConflicts(t *testing.T) {
	base := map[string]string{"PATH": "/bin", "OPENAI_API_KEY": "the-key", "MST_TOKENS_DIR": "/t"}
	for _, tc := range []struct {
		srvs []servers.Server
		want []string
	}{
		{[]servers.Server{{Name: "a", Command: "x", Env: map[string]string{"TOKEN": "1"}}, {Name: "b", Command: "y", Env: map[string]string{"TOKEN": "2"}}}, []string{`"a"`, `"b"`, "TOKEN"}},
		{[]servers.Server{{Name: "a", Command: "x", Env: map[string]string{"OPENAI_API_KEY": "another"}}}, []string{`"a"`, "OPENAI_API_KEY"}},
		{[]servers.Server{{Name: "a", Command: "x", Env: map[string]string{"MST_TOKENS_DIR": "/elsewhere"}}}, []string{`"a"`, "MST_TOKENS_DIR"}},
	} {
		_, _, err := serversTOML(tc.srvs, base)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("servers %+v: error %v, want one naming %s", tc.srvs, err, w)
			}
		}
	}
}

func TestParserErrors(t *testing.T) {
	p := newParser("hi", 0)
	now := time.Now()
	for _, l := range []string{
		`{"type":"thread.started","thread_id":"t1"}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for ` + "`x`" + ` not found. Defaulting to fallback metadata"}}`,
		`{"type":"turn.started"}`,
		`{"type":"error","message":"unexpected status 500"}`,
		`{"type":"turn.failed","error":{"message":"unexpected status 500"}}`,
		`not json`,
	} {
		p.line([]byte(l), now)
	}
	res := p.result()
	if p.apiError != "unexpected status 500" || res.ClientTelemetry["threadId"] != "t1" || len(res.ClientTelemetry["warnings"].([]string)) != 1 || res.ClientTelemetry["unparsedLines"] != 1 {
		t.Errorf("apiError %q, telemetry %v", p.apiError, res.ClientTelemetry)
	}
}

// The CLI waits for an unreachable provider for ever, whatever its retry
// settings: past requestMaxRetries reports, the parser gives up, and the
// trial is the provider's failure.
func TestParserUnreachableProvider(t *testing.T) {
	for _, tc := range []struct {
		retries, reports int
		want             bool
	}{{0, 1, true}, {2, 2, false}, {2, 3, true}} {
		p := newParser("hi", 0)
		p.maxReconnects = tc.retries
		for range tc.reports {
			p.line([]byte(`{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`), time.Now())
		}
		if p.unreachable != tc.want || (tc.want && !strings.Contains(p.apiError, "cannot be reached")) || (!tc.want && p.apiError != "") {
			t.Errorf("%d reconnect reports with requestMaxRetries %d: unreachable %v, apiError %q; want unreachable %v", tc.reports, tc.retries, p.unreachable, p.apiError, tc.want)
		}
	}
}

func TestDefinition(t *testing.T) {
	d := Definition()
	if d.Open == nil || d.Available != nil || d.Version == nil || !d.Concurrent {
		t.Errorf("definition = %+v", d)
	}
	if got := d.Timeout; got != 300*time.Second {
		t.Errorf("default timeout = %v", got)
	}
	opts, err := client.DescribeOptions(d.Options)
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]any{}
	for _, o := range opts {
		defaults[o.Name] = o.Default
	}
	o, _ := decodeOptions(json.RawMessage(`{}`))
	if defaults["requestMaxRetries"] != float64(*o.RequestMaxRetries) || defaults["streamMaxRetries"] != float64(*o.StreamMaxRetries) {
		t.Errorf("schema defaults %v, decoded %+v", defaults, o)
	}
}
