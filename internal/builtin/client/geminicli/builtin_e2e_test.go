package geminicli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// testServer is the project's MCP test server over stdio.
func testServer(t *testing.T) servers.Server {
	t.Helper()
	dir, err := testbin.Build(testbin.Options{}, testbin.TestServer)
	if err != nil {
		t.Fatal(err)
	}
	return servers.Server{Name: "ts", Command: testbin.Path(dir, testbin.TestServer)}
}

// hostileTurns are a model's calls of the CLI's own tools that would
// write outside the trial's folder: a shell command and each file tool
// that writes.
func hostileTurns(outside string) []providertest.Turn {
	return []providertest.Turn{
		{ToolCalls: []providertest.Call{{Tool: "run_shell_command", Arguments: map[string]any{"command": "echo shell > " + filepath.Join(outside, "shell.txt")}}}},
		{ToolCalls: []providertest.Call{{Tool: "write_file", Arguments: map[string]any{"file_path": filepath.Join(outside, "write.txt"), "content": "x"}}}},
		{ToolCalls: []providertest.Call{{Tool: "replace", Arguments: map[string]any{"file_path": filepath.Join(outside, "edit.txt"), "old_string": "", "new_string": "x"}}}},
		{Text: "done"},
	}
}

// TestBuiltinToolsOff: with builtinTools unset the model is offered none
// of the CLI's own tools, and its calls of them (shell, write, edit, aimed
// outside the trial's folder) do not run: nothing appears on the host, and
// the transcript records each call, failed, under the built-in server.
func TestBuiltinToolsOff(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: hostileTurns(outside)}}})
	s := openTest(t, fake.URL, "", testServer(t))
	res := run(t, t.Context(), s, "write outside")
	if left, _ := os.ReadDir(outside); len(left) > 0 {
		t.Errorf("the CLI wrote outside the trial's folder: %v", left)
	}
	if res.Outcome.Status != transcript.Answered || len(res.ToolCalls) != 3 {
		t.Fatalf("outcome %+v, calls %+v: want answered after 3 calls", res.Outcome, res.ToolCalls)
	}
	for i, want := range []string{"run_shell_command", "write_file", "replace"} {
		c := res.ToolCalls[i]
		// A tool the CLI does not have is no server's: never counted as
		// made (docs/outcomes.md).
		if c.Server != "" || c.Tool != want || !c.IsError || !strings.Contains(c.Error, "not found") {
			t.Errorf("call %d = %+v, want a failed %s of no server", i, c, want)
		}
	}
	reqs := fake.Requests()
	for i, r := range reqs {
		for _, tool := range r.Tools {
			if !strings.HasPrefix(tool, "mcp_ts_") {
				t.Errorf("request %d offered %q, which is not the test server's", i, tool)
			}
		}
		if len(r.Tools) == 0 {
			t.Errorf("request %d offered no tool", i)
		}
	}
	if res.Usage.ModelCalls != len(reqs) {
		t.Errorf("model calls = %d, the provider got %d requests", res.Usage.ModelCalls, len(reqs))
	}
}

// TestBuiltinShellOn: builtinTools ["shell"] offers the shell and no other
// of the CLI's tools; a command runs in the trial's own folder, without
// the CLI's key or the servers' secrets in its environment, and is
// recorded with its output.
func TestBuiltinShellOn(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{ToolCalls: []providertest.Call{{Tool: "run_shell_command", Arguments: map[string]any{"command": "echo made > made.txt; pwd; env"}}}},
		{ToolCalls: []providertest.Call{{Tool: "write_file", Arguments: map[string]any{"file_path": "w.txt", "content": "x"}}}},
		{Text: "done"},
	}}}})
	srv := testServer(t)
	srv.Env = map[string]string{"TS_CANARY": "canary-shell-env-5d1e"}
	s := openTest(t, fake.URL, `{"requestMaxAttempts": 1, "builtinTools": ["shell"]}`, srv)
	res := run(t, t.Context(), s, "run a command")
	if res.Outcome.Status != transcript.Answered || len(res.ToolCalls) != 2 {
		t.Fatalf("outcome %+v, calls %+v", res.Outcome, res.ToolCalls)
	}
	c := res.ToolCalls[0]
	if c.Server != client.BuiltinServer || c.Tool != "run_shell_command" || c.IsError {
		t.Fatalf("shell call = %+v", c)
	}
	var args map[string]any
	if json.Unmarshal(c.Arguments, &args) != nil || !strings.Contains(args["command"].(string), "made.txt") {
		t.Errorf("arguments = %s", c.Arguments)
	}
	pwd, _, _ := strings.Cut(c.Result, "\n")
	if rel, err := filepath.Rel(s.dir, pwd); err != nil || !strings.HasPrefix(rel, "trial-") || filepath.Base(rel) != "work" {
		t.Errorf("the shell ran in %q, not in a trial's folder under %s", pwd, s.dir)
	}
	for _, secret := range []string{testKey, "canary-shell-env-5d1e"} {
		if strings.Contains(c.Result, secret) {
			t.Errorf("the shell's environment holds %q", secret)
		}
	}
	if !strings.Contains(c.Result, "PATH=") {
		t.Errorf("the shell's output lacks its environment: %q", c.Result)
	}
	if w := res.ToolCalls[1]; w.Server != "" || w.Tool != "write_file" || !w.IsError {
		t.Errorf("write_file call = %+v, want it refused: only the shell is on", w)
	}
	for i, r := range fake.Requests() {
		var builtin []string
		for _, tool := range r.Tools {
			if !strings.HasPrefix(tool, "mcp_ts_") {
				builtin = append(builtin, tool)
			}
		}
		if !slices.Equal(builtin, []string{"run_shell_command"}) {
			t.Errorf("request %d offered the CLI's tools %v, want only run_shell_command", i, builtin)
		}
	}
}

// TestToolErrorText: a server's error result reaches the transcript with
// the server's own text, not only the CLI's words for it.
func TestToolErrorText(t *testing.T) {
	t.Parallel()
	const reason = "the disk is full (ENOSPC) ✗"
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{ToolCalls: []providertest.Call{{Tool: "fail", Arguments: map[string]any{"reason": reason}}}},
		{Text: "it failed"},
	}}}})
	s := openTest(t, fake.URL, "", testServer(t))
	res := run(t, t.Context(), s, "fail please")
	if len(res.ToolCalls) != 1 {
		t.Fatalf("calls = %+v", res.ToolCalls)
	}
	if c := res.ToolCalls[0]; c.Server != "ts" || c.Tool != "fail" || !c.IsError || c.Result != "fail: "+reason || c.Error != "" {
		t.Errorf("call = %+v, want the server's error result %q", c, "fail: "+reason)
	}
	if m := res.Messages[2]; m.Role != "tool" || m.Text != "fail: "+reason {
		t.Errorf("tool message = %+v", m)
	}
	if res.Usage.ModelCalls != 2 {
		t.Errorf("model calls = %d, want 2", res.Usage.ModelCalls)
	}
}

// TestBuiltinToolsOption: builtinTools takes only the names the client
// documents.
func TestBuiltinToolsOption(t *testing.T) {
	o, err := decodeOptions(json.RawMessage(`{"builtinTools": ["shell", "edit"]}`))
	if err != nil || !slices.Equal(coreTools(o.BuiltinTools), []string{"run_shell_command", "replace"}) {
		t.Errorf("decodeOptions = %+v, %v", o, err)
	}
	for _, bad := range []string{"Bash", "run_shell_command", "", "mcp_x"} {
		raw, _ := json.Marshal(map[string]any{"builtinTools": []string{"shell", bad}})
		if _, err := decodeOptions(raw); err == nil || !strings.Contains(err.Error(), "builtinTools[1]") || !strings.Contains(err.Error(), "shell") {
			t.Errorf("builtinTools [shell %q]: err = %v", bad, err)
		}
	}
	var schema struct {
		Properties map[string]struct {
			Items struct {
				Enum []string `json:"enum"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(Definition().Options, &schema); err != nil {
		t.Fatal(err)
	}
	if got := schema.Properties[client.OptionBuiltinTools].Items.Enum; !slices.Equal(got, builtinToolNames()) {
		t.Errorf("schema names %v, want %v", got, builtinToolNames())
	}
}
