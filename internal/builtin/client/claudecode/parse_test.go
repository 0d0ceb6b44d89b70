package claudecode

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

func lines(texts ...string) []line {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var out []line
	for i, s := range texts {
		out = append(out, line{at: t0.Add(time.Duration(i) * 100 * time.Millisecond), text: []byte(s)})
	}
	return out
}

func TestParse(t *testing.T) {
	t.Parallel()
	srvs := []servers.Server{{Name: "my server", Command: "x"}, {Name: "my", Command: "y"}}
	infos := []transcript.ServerInfo{{Name: "my server", Tools: []string{"do it"}}, {Name: "my"}}
	res := parse(lines(
		`{"type":"system","subtype":"init","session_id":"s1","tools":["Bash","mcp__my_server__do_it","mcp__my__ping"],"mcp_servers":[{"name":"my server","status":"connected"},{"name":"my","status":"connected"}]}`,
		`not json: the CLI's chatter`,
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Working."}]}}`,
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"mcp__my_server__do_it","input":{"a":1}}]}}`,
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"ls"}}]}}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"done it"},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"denied"}],"is_error":true}]}}`,
		`{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t3","name":"mcp__my__ping","input":{}}]}}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","content":[{"type":"text","text":"pong"},{"type":"image"}]}]}}`,
		`{"type":"assistant","message":{"id":"m3","content":[{"type":"text","text":"All done."}]}}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"All done.","num_turns":3,"duration_ms":1234,"total_cost_usd":0.5,"terminal_reason":"completed","usage":{"input_tokens":10,"output_tokens":7,"cache_creation_input_tokens":5,"cache_read_input_tokens":100}}`,
	), "the prompt", srvs, infos)
	if res.Outcome.Status != transcript.Answered || res.Answer != "All done." {
		t.Fatalf("outcome %+v, answer %q", res.Outcome, res.Answer)
	}
	want := []struct{ server, tool, result string }{{"my server", "do it", "done it"}, {client.BuiltinServer, "Bash", "denied"}, {"my", "ping", "pong\n[image]"}}
	if len(res.ToolCalls) != len(want) {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
	for i, w := range want {
		c := res.ToolCalls[i]
		if c.Server != w.server || c.Tool != w.tool || c.Result != w.result {
			t.Errorf("call %d = %+v, want %v", i, c, w)
		}
	}
	if !res.ToolCalls[1].IsError || res.ToolCalls[0].IsError {
		t.Errorf("is_error not carried: %+v", res.ToolCalls)
	}
	if d := res.ToolCalls[0].DurationMs; d != 200 {
		t.Errorf("first call took %v ms, want 200 (from the lines' arrival)", d)
	}
	if string(res.ToolCalls[0].Arguments) != `{"a":1}` {
		t.Errorf("arguments = %s", res.ToolCalls[0].Arguments)
	}
	roles := ""
	for _, m := range res.Messages {
		roles += m.Role[:1]
	}
	if roles != "uattata" {
		t.Errorf("roles = %s, want uattata (user, assistant, tool ×2, assistant, tool, assistant)", roles)
	}
	if m := res.Messages[1]; m.Text != "Working." || len(m.ToolCalls) != 2 {
		t.Errorf("first assistant message = %+v", m)
	}
	u := res.Usage
	if u.InputTokens != 115 || u.OutputTokens != 7 || u.CachedTokens != 100 || u.CostUSD != 0.5 || u.ModelCalls != 3 {
		t.Errorf("usage = %+v", u)
	}
	if res.ClientTelemetry["num_turns"] != 3 || res.ClientTelemetry["session_id"] != "s1" || res.ClientTelemetry["terminal_reason"] != "completed" {
		t.Errorf("telemetry = %v", res.ClientTelemetry)
	}
	if len(res.Servers) != 2 || res.Servers[1].Tools[0] != "ping" || res.Servers[0].Tools[0] != "do it" {
		t.Errorf("servers = %+v", res.Servers)
	}
}

func TestParseOutcomes(t *testing.T) {
	t.Parallel()
	srvs := []servers.Server{{Name: "everything", Command: "x"}}
	for _, tc := range []struct {
		name        string
		lines       []string
		status      string
		cause, text string
	}{
		{"api error with subtype success", []string{
			`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 500 boom","terminal_reason":"api_error","api_error_status":500}`,
		}, transcript.Errored, transcript.CauseProvider, "500"},
		{"max turns", []string{
			`{"type":"result","subtype":"error_max_turns","is_error":true,"terminal_reason":"max_turns"}`,
		}, transcript.NoAnswer, "", "max-turns"},
		{"failed during execution", []string{
			`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["oops"]}`,
		}, transcript.Errored, transcript.CauseClient, "oops"},
		{"empty answer", []string{
			`{"type":"result","subtype":"success","is_error":false,"result":""}`,
		}, transcript.NoAnswer, "", "without answer"},
		{"server failed", []string{
			`{"type":"system","subtype":"init","mcp_servers":[{"name":"everything","status":"failed"}]}`,
			`{"type":"result","subtype":"success","is_error":false,"result":"I have no tools"}`,
		}, transcript.Errored, transcript.CauseServer, "everything"},
		{"no result line", []string{
			`{"type":"system","subtype":"init","mcp_servers":[]}`,
		}, "", "", ""},
	} {
		res := parse(lines(tc.lines...), "p", srvs, nil)
		if res.Outcome.Status != tc.status || res.Outcome.Cause != tc.cause || !strings.Contains(res.Outcome.Detail, tc.text) {
			t.Errorf("%s: outcome = %+v, want %s (%s) with %q", tc.name, res.Outcome, tc.status, tc.cause, tc.text)
		}
		if tc.status != transcript.Answered && res.Answer != "" {
			t.Errorf("%s: answer %q on a trial that did not answer", tc.name, res.Answer)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	desc := "new words"
	for _, tc := range []struct {
		name string
		p    client.OpenParams
		want string
	}{
		{"tool overrides", client.OpenParams{Model: "anthropic/m", Servers: []servers.Server{{Name: "s", Command: "x", Tools: map[string]servers.ToolOverride{"t": {Description: &desc}}}}}, "overrides with claude-code come later"},
		{"another provider", client.OpenParams{Model: "openai/gpt"}, "Anthropic models only"},
		{"no CLI", client.OpenParams{Model: "anthropic/m", Options: json.RawMessage(`{"command": "/nonexistent/claude"}`)}, "not found"},
	} {
		s, err := Open(t.Context(), tc.p)
		if s != nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestMCPConfig(t *testing.T) {
	t.Parallel()
	b, err := mcpConfig([]servers.Server{
		{Name: "local", Command: "/bin/srv", Args: []string{"--x"}, Env: map[string]string{"TOKEN": "t"}},
		{Name: "remote", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer b"}},
	}, []string{"ANTHROPIC_API_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	r := cfg.MCPServers["remote"]
	if r["type"] != "http" || r["url"] != "http://127.0.0.1:1/mcp" || r["headers"].(map[string]any)["Authorization"] != "Bearer b" {
		t.Errorf("remote = %v", r)
	}
	l := cfg.MCPServers["local"]
	args, _ := json.Marshal(l["args"])
	if l["type"] != "stdio" || !strings.Contains(string(args), `"/bin/srv","--x"`) || !strings.Contains(string(b), "TOKEN") {
		t.Errorf("local = %v", l)
	}
}

// TestParseRefusedCalls: a call the CLI refused without running it (its
// <tool_use_error> result, or a permission denial in the result line) is
// an error with a reason in its ToolCall; an error the tool itself returned
// is an error result with no Error.
func TestParseRefusedCalls(t *testing.T) {
	t.Parallel()
	srvs := []servers.Server{{Name: "s", Command: "x"}}
	res := parse(lines(
		`{"type":"assistant","message":{"id":"m1","content":[`+
			`{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"rm -rf /"}},`+
			`{"type":"tool_use","id":"t2","name":"Write","input":{"file_path":"/etc/x"}},`+
			`{"type":"tool_use","id":"t3","name":"mcp__s__fail","input":{}},`+
			`{"type":"tool_use","id":"t4","name":"mcp__s__guarded","input":{}}]}}`,
		`{"type":"user","message":{"role":"user","content":[`+
			`{"type":"tool_result","tool_use_id":"t1","content":"<tool_use_error>Error: No such tool available: Bash</tool_use_error>","is_error":true},`+
			`{"type":"tool_result","tool_use_id":"t2","content":"Claude requested permissions to write to /etc/x, but you haven't granted it yet.","is_error":true},`+
			`{"type":"tool_result","tool_use_id":"t3","content":"the server failed","is_error":true},`+
			`{"type":"tool_result","tool_use_id":"t4","content":[{"type":"text","text":"<tool_use_error>InputValidationError: bad</tool_use_error>"}],"is_error":true}]}}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"ok","permission_denials":[{"tool_name":"Write","tool_use_id":"t2","tool_input":{}}]}`,
	), "p", srvs, nil)
	want := []struct {
		server, tool, errHas string
	}{
		{"", "Bash", "No such tool available: Bash"}, // a tool the CLI does not have: no server's
		{client.BuiltinServer, "Write", "permission denied"},
		{"s", "fail", ""},
		{"s", "guarded", "InputValidationError: bad"},
	}
	if len(res.ToolCalls) != len(want) {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
	for i, w := range want {
		c := res.ToolCalls[i]
		if c.Server != w.server || c.Tool != w.tool || !c.IsError {
			t.Errorf("call %d = %+v, want an error of %s on %s", i, c, w.tool, w.server)
		}
		if w.errHas == "" && c.Error != "" || w.errHas != "" && !strings.Contains(c.Error, w.errHas) {
			t.Errorf("call %d: Error %q, want it to contain %q", i, c.Error, w.errHas)
		}
	}
}
