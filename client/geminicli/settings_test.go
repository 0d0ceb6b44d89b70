package geminicli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

func TestSettingsJSON(t *testing.T) {
	b, err := settingsJSON([]servers.Server{
		{Name: "my-server", Command: "/bin/srv", Args: []string{"a b"}, Env: map[string]string{"K": "v"}, Dir: "/d"},
		{Name: "remote", URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t"}},
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"mcpServers": map[string]any{
			"my-server": map[string]any{"command": "/bin/srv", "args": []any{"a b"}, "env": map[string]any{"K": "v"}, "cwd": "/d", "trust": true},
			"remote":    map[string]any{"httpUrl": "https://example.com/mcp", "headers": map[string]any{"Authorization": "Bearer t"}, "trust": true},
		},
		"telemetry": map[string]any{"enabled": false},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"general":   map[string]any{"disableAutoUpdate": true, "maxAttempts": float64(2)},
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("settings.json =\n%s\nwant\n%s", gb, wb)
	}
}

func TestToolNamer(t *testing.T) {
	n := newToolNamer([]servers.Server{{Name: "my"}, {Name: "my_server"}, {Name: "we ird"}, {Name: "mcp_x"}})
	for cli, want := range map[string][2]string{
		"mcp_my_echo":             {"my", "echo"},
		"mcp_my_server_echo":      {"my_server", "echo"},
		"mcp_my_server_get-sum":   {"my_server", "get-sum"},
		"mcp_we_ird_greet":        {"we ird", "greet"},
		"mcp_x_tool":              {"mcp_x", "tool"},
		"read_file":               {"", "read_file"},
		"mcp_other_server_tool_a": {"", "mcp_other_server_tool_a"},
	} {
		if s, tool := n.name(cli); s != want[0] || tool != want[1] {
			t.Errorf("name(%q) = %q, %q; want %q, %q", cli, s, tool, want[0], want[1])
		}
	}
}

func TestModelName(t *testing.T) {
	for in, want := range map[string]string{"google/gemini-2.5-pro": "gemini-2.5-pro", "gemini/gemini-2.5-flash": "gemini-2.5-flash", "gemini-2.5-pro": "gemini-2.5-pro"} {
		if got := modelName(in); got != want {
			t.Errorf("modelName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParser(t *testing.T) {
	p := newParser("hi", 0, newToolNamer([]servers.Server{{Name: "everything"}}))
	now := time.Now()
	for _, l := range []string{
		`{"type":"init","session_id":"s1","model":"m"}`,
		`{"type":"message","role":"user","content":"hi"}`,
		`{"type":"message","role":"assistant","content":"Let me ","delta":true}`,
		`{"type":"message","role":"assistant","content":"look.","delta":true}`,
		`{"type":"tool_use","tool_name":"mcp_everything_get-sum","tool_id":"c1","parameters":{"a":1,"b":2}}`,
		`{"type":"tool_use","tool_name":"read_file","tool_id":"c2","parameters":{"path":"x"}}`,
		`{"type":"tool_result","tool_id":"c1","status":"success","output":"3"}`,
		`{"type":"tool_result","tool_id":"c2","status":"error","output":"nope","error":{"type":"file_not_found","message":"no such file"}}`,
		`{"type":"error","severity":"warning","message":"careful"}`,
		`{"type":"message","role":"assistant","content":"It is 3.","delta":true}`,
		`{"type":"result","status":"success","stats":{"input_tokens":20,"output_tokens":7,"cached":4,"duration_ms":12}}`,
		`not json`,
	} {
		p.line([]byte(l), now)
	}
	res := p.result()
	if res.Answer != "It is 3." || len(res.ToolCalls) != 2 || res.Usage != (transcript.Usage{InputTokens: 20, OutputTokens: 7, CachedTokens: 4}) {
		t.Fatalf("result = %+v", res)
	}
	if c := res.ToolCalls[0]; c.Server != "everything" || c.Tool != "get-sum" || c.Result != "3" || c.IsError || string(c.Arguments) != `{"a":1,"b":2}` {
		t.Errorf("call 0 = %+v", c)
	}
	if c := res.ToolCalls[1]; c.Server != "" || c.Tool != "read_file" || !c.IsError || c.Error != "no such file" {
		t.Errorf("call 1 = %+v", c)
	}
	if len(res.Messages) != 5 || res.Messages[1].Text != "Let me look." || len(res.Messages[1].ToolCalls) != 2 {
		t.Errorf("messages = %+v", res.Messages)
	}
	if res.ClientTelemetry["sessionId"] != "s1" || res.ClientTelemetry["unparsedLines"] != 1 || len(res.ClientTelemetry["warnings"].([]string)) != 1 {
		t.Errorf("telemetry = %v", res.ClientTelemetry)
	}

	// A failed result is the error.
	p = newParser("hi", 0, nil)
	p.line([]byte(`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: boom]"}}`), now)
	if p.resultError != "[API Error: boom]" || p.answer() != "" {
		t.Errorf("resultError %q, answer %q", p.resultError, p.answer())
	}
}

func TestMCPWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "debug.log")
	w := &mcpWatch{path: path}
	if got := w.check(); got != "" {
		t.Errorf("check without a log = %q", got)
	}
	os.WriteFile(path, []byte("[t] [LOG] starting\n[t] [LOG] [MCP error] Error during discovery for MCP server 'my srv': spawn /x ENOENT Error: spawn /x ENOENT\n    at onErrorNT\n"), 0o600)
	if got := w.check(); got != "my srv: spawn /x ENOENT" {
		t.Errorf("check = %q", got)
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
	var names []string
	for _, o := range opts {
		defaults[o.Name] = o.Default
		names = append(names, o.Name)
	}
	if strings.Contains(strings.Join(names, " "), "reasoningEffort") {
		t.Errorf("options %v take reasoningEffort, which the CLI cannot apply", names)
	}
	o, _ := decodeOptions(json.RawMessage(`{}`))
	if defaults["requestMaxAttempts"] != float64(o.RequestMaxAttempts) || defaults["command"] != o.Command {
		t.Errorf("schema defaults %v, decoded %+v", defaults, o)
	}
	if _, err := decodeOptions(json.RawMessage(`{"requestMaxAttempts": 11}`)); err == nil {
		t.Errorf("requestMaxAttempts 11 accepted")
	}
}
