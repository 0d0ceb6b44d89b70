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
		servers: []servers.Server{
			{Name: "my-server", Command: `C:\bin\srv "x"`, Args: []string{"a\nb", "tab\there"}, Env: map[string]string{"Z": "1", "A B": "é\x01"}, Dir: "/d", StartupTimeout: 1500 * time.Millisecond},
			{Name: "remote", URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t"}},
		},
	})
	for _, want := range []string{
		`model = "gpt-5"`,
		`model_provider = "mst"`,
		`model_reasoning_effort = "low"`,
		`approval_policy = "never"`,
		`sandbox_mode = "read-only"`,
		"check_for_update_on_startup = false",
		"[analytics]\nenabled = false",
		"[model_providers.mst]",
		`base_url = "http://127.0.0.1:1/v1"`,
		`wire_api = "responses"`,
		`env_key = "CODEX_API_KEY"`,
		"request_max_retries = 2",
		"stream_max_retries = 0",
		`[mcp_servers."my-server"]`,
		`command = "C:\\bin\\srv \"x\""`,
		`args = ["a\nb", "tab\there"]`,
		`env = { "A B" = "é\u0001", "Z" = "1" }`,
		`cwd = "/d"`,
		"startup_timeout_sec = 2",
		`[mcp_servers."remote"]`,
		`url = "https://example.com/mcp"`,
		`http_headers = { "Authorization" = "Bearer t" }`,
		"required = true",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config.toml lacks %s:\n%s", want, got)
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
