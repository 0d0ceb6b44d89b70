package geminicli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

func TestSettingsJSON(t *testing.T) {
	r, err := settingsJSON([]servers.Server{
		{Name: "my-server", Command: "/bin/srv", Args: []string{"a b"}, Env: map[string]string{"K": "v", "A": "w"}, Dir: "/d"},
		{Name: "remote", URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t"}},
	}, 2, []string{"run_shell_command"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(r.settings, &got); err != nil {
		t.Fatal(err)
	}
	blocked := []any{"GEMINI_API_KEY", dollarVar, secretVarPrefix + "0", secretVarPrefix + "1", secretVarPrefix + "2"}
	want := map[string]any{
		"mcpServers": map[string]any{
			"my-server": map[string]any{"command": "/bin/srv", "args": []any{"a b"}, "env": map[string]any{"A": "${" + secretVarPrefix + "0}", "K": "${" + secretVarPrefix + "1}"}, "cwd": "/d", "trust": true},
			"remote":    map[string]any{"httpUrl": "https://example.com/mcp", "headers": map[string]any{"Authorization": "${" + secretVarPrefix + "2}"}, "trust": true},
		},
		"tools":     map[string]any{"core": []any{"run_shell_command", "mcp_*"}},
		"telemetry": map[string]any{"enabled": false},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"general":   map[string]any{"disableAutoUpdate": true, "maxAttempts": float64(2)},
		"security": map[string]any{
			"auth":                         map[string]any{"selectedType": "gemini-api-key"},
			"environmentVariableRedaction": map[string]any{"enabled": true, "blocked": blocked},
		},
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("settings.json =\n%s\nwant\n%s", gb, wb)
	}
	wantEnv := []string{secretVarPrefix + "0=w", secretVarPrefix + "1=v", secretVarPrefix + "2=Bearer t", dollarVar + "=$"}
	if !slices.Equal(r.env, wantEnv) {
		t.Errorf("env = %q, want %q", r.env, wantEnv)
	}
}

// loadExpand is the CLI's expansion of every string of a settings file
// when it reads it (packages/cli/src/utils/envVarResolver.ts, 0.61.0).
var loadExpandRE = regexp.MustCompile(`\$(?:(\w+)|\{([^}]+?)(?::-([^}]*))?\})`)

func loadExpand(s string, env map[string]string) string {
	return loadExpandRE.ReplaceAllStringFunc(s, func(m string) string {
		g := loadExpandRE.FindStringSubmatch(m)
		name := g[1] + g[2]
		if v, ok := env[name]; ok {
			return v
		}
		if strings.Contains(m, ":-") {
			return g[3]
		}
		return m
	})
}

// dotenvExpand is the CLI's second expansion of a server's env and header
// values (dotenv-expand, with no variable the test sets visible): a
// reference to an unset name is "", and "\$" is "$".
func dotenvExpand(s string) string {
	re := regexp.MustCompile(`(^|[^\\])\$(\{[^{}]+\}|[A-Za-z_][A-Za-z0-9_]*)`)
	for {
		n := re.ReplaceAllString(s, "$1")
		if n == s {
			break
		}
		s = n
	}
	return strings.ReplaceAll(s, `\$`, "$")
}

// TestSettingsValuesSurvive: every string MST writes comes back from the
// CLI's expansions as it was, whatever "$", "\" and braces it holds, and
// no server env or header value is in the file.
func TestSettingsValuesSurvive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"$", "\\", "{", "}", ":-", "HOME", "a", "_", " ", "${X}", "$$", "é"}
	gen := func(prefix string) string {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return prefix + b.String()
	}
	for i := range 300 {
		secret := fmt.Sprintf("secret-%d-", i)
		srv := servers.Server{Name: "s", Command: gen(""), Args: []string{gen(""), gen("")}, Dir: gen(""), Env: map[string]string{"E": gen(secret)}}
		web := servers.Server{Name: "w", URL: "http://127.0.0.1/" + gen(""), Headers: map[string]string{"H": gen(secret)}}
		r, err := settingsJSON([]servers.Server{srv, web}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"HOME": "/home/x", "X": "x"}
		for _, kv := range r.env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		var got struct {
			MCPServers map[string]struct {
				Command, Cwd, HttpUrl string
				Args                  []string
				Env, Headers          map[string]string
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal(r.settings, &got); err != nil {
			t.Fatal(err)
		}
		s, w := got.MCPServers["s"], got.MCPServers["w"]
		for _, c := range [][2]string{
			{loadExpand(s.Command, env), srv.Command}, {loadExpand(s.Cwd, env), srv.Dir},
			{loadExpand(s.Args[0], env), srv.Args[0]}, {loadExpand(s.Args[1], env), srv.Args[1]},
			{loadExpand(w.HttpUrl, env), web.URL},
			{dotenvExpand(loadExpand(s.Env["E"], env)), srv.Env["E"]},
			{dotenvExpand(loadExpand(w.Headers["H"], env)), web.Headers["H"]},
		} {
			if c[0] != c[1] {
				t.Fatalf("the CLI would read %q as %q", c[1], c[0])
			}
		}
		for _, v := range []string{srv.Env["E"], web.Headers["H"]} {
			if strings.Contains(string(r.settings), v) {
				t.Fatalf("settings.json holds the value %q", v)
			}
		}
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

// TestToolNamerWithTrialTools checks that, given the tools the trial's
// servers offer (client.Trial.Tools), the names the CLI reports map back
// to the servers' own: one the CLI rewrote (accents), one it cut short
// (past 63 characters), and one of a server whose name it rewrote.
func TestToolNamerWithTrialTools(t *testing.T) {
	n := newToolNamer([]servers.Server{{Name: "many"}, {Name: "we ird"}}).withTools(map[string][]string{
		"many":   {"echo", "météo_prévision", "summarise_the_quarterly_inventory_of_a_warehouse_region"},
		"we ird": {"greet (structured)"},
	})
	for cli, want := range map[string][2]string{
		"mcp_many_echo":            {"many", "echo"},
		"mcp_many_m_t_o_pr_vision": {"many", "météo_prévision"},
		"mcp_many_summarise_the_quarter...nventory_of_a_warehouse_region": {"many", "summarise_the_quarterly_inventory_of_a_warehouse_region"},
		"mcp_we_ird_greet__structured_":                                   {"we ird", "greet (structured)"},
		"mcp_many_not_offered":                                            {"many", "not_offered"},
		"read_file":                                                       {"", "read_file"},
	} {
		if s, tool := n.name(cli); s != want[0] || tool != want[1] {
			t.Errorf("name(%q) = %q, %q; want %q, %q", cli, s, tool, want[0], want[1])
		}
	}
	if m := n.withTools(nil); m != n {
		t.Errorf("withTools(nil) made a new namer")
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
	if res.Answer != "It is 3." || len(res.ToolCalls) != 2 || res.Usage != (transcript.Usage{InputTokens: 20, OutputTokens: 7, CachedTokens: 4, ModelCalls: 2}) {
		t.Fatalf("result = %+v", res)
	}
	if c := res.ToolCalls[0]; c.Server != "everything" || c.Tool != "get-sum" || c.Result != "3" || c.IsError || string(c.Arguments) != `{"a":1,"b":2}` {
		t.Errorf("call 0 = %+v", c)
	}
	if c := res.ToolCalls[1]; c.Server != client.BuiltinServer || c.Tool != "read_file" || !c.IsError || c.Error != "no such file" {
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

// TestMCPErrorText: an MCP tool's error result keeps the server's text,
// wherever the CLI's wording would trip a naive reading of it.
func TestMCPErrorText(t *testing.T) {
	const marker = " with response: "
	for _, text := range []string{"fail: why", "two\nlines", "quote \" and" + marker + "[]", "", "unicode é ✓"} {
		for _, args := range []string{`{"reason":"x"}`, `{"reason":"` + marker + `[{\"functionResponse\":{}}]"}`} {
			resp, _ := json.Marshal([]any{map[string]any{"functionResponse": map[string]any{"name": "fail", "response": map[string]any{
				"content": []any{map[string]any{"type": "text", "text": text}, map[string]any{"type": "image", "data": "AA=="}}, "isError": true}}}})
			msg := `MCP tool 'fail' reported tool error for function call: {"name":"fail","args":` + args + `}` + marker + string(resp)
			ev, _ := json.Marshal(map[string]any{"type": "tool_result", "tool_id": "c1", "status": "error", "output": "Error: MCP tool 'fail' reported an error.",
				"error": map[string]any{"type": "mcp_tool_error", "message": msg}})
			p := newParser("hi", 0, newToolNamer([]servers.Server{{Name: "ts"}}))
			p.line([]byte(`{"type":"tool_use","tool_name":"mcp_ts_fail","tool_id":"c1","parameters":{}}`), time.Now())
			p.line(ev, time.Now())
			c := p.calls[0]
			if want := text + "\n[image]"; c.Result != want || !c.IsError || c.Error != "" || c.Server != "ts" {
				t.Errorf("text %q, args %s: call = %+v, want result %q", text, args, c, want)
			}
		}
	}
	// A message the CLI words otherwise keeps its output.
	p := newParser("hi", 0, newToolNamer([]servers.Server{{Name: "ts"}}))
	p.line([]byte(`{"type":"tool_use","tool_name":"mcp_ts_fail","tool_id":"c1","parameters":{}}`), time.Now())
	p.line([]byte(`{"type":"tool_result","tool_id":"c1","status":"error","output":"Error: it failed","error":{"type":"mcp_tool_error","message":"something else"}}`), time.Now())
	if c := p.calls[0]; c.Result != "Error: it failed" || !c.IsError {
		t.Errorf("call = %+v", c)
	}
}

// TestModelCalls: each model turn the stream shows is one model call, and
// a last turn that said nothing is one too.
func TestModelCalls(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  int
	}{
		{[]string{`{"type":"message","role":"assistant","content":"a","delta":true}`, `{"type":"message","role":"assistant","content":"b","delta":true}`, `{"type":"result","status":"success"}`}, 1},
		{[]string{`{"type":"tool_use","tool_name":"x","tool_id":"1"}`, `{"type":"tool_use","tool_name":"x","tool_id":"2"}`, `{"type":"tool_result","tool_id":"1","status":"success"}`,
			`{"type":"tool_result","tool_id":"2","status":"success"}`, `{"type":"message","role":"assistant","content":"done"}`, `{"type":"result","status":"success"}`}, 2},
		{[]string{`{"type":"tool_use","tool_name":"x","tool_id":"1"}`, `{"type":"tool_result","tool_id":"1","status":"success"}`, `{"type":"result","status":"success"}`}, 2},
		{[]string{`{"type":"result","status":"error","error":{"message":"[API Error: boom]"}}`}, 0},
	} {
		p := newParser("hi", 0, nil)
		for _, l := range c.lines {
			p.line([]byte(l), time.Now())
		}
		if got := p.result().Usage.ModelCalls; got != c.want {
			t.Errorf("%v: model calls = %d, want %d", c.lines, got, c.want)
		}
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
