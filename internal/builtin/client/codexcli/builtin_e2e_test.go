//go:build linux

package codexcli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/transcript"
)

// ownTools are the names under which codex offers its own shell, file,
// web and image tools (in 0.171 and the versions before it).
var ownTools = []string{"exec_command", "write_stdin", "shell", "local_shell", "apply_patch", "web_search", "view_image", "update_plan", "request_user_input", "spawn_agent"}

// shellCalls scripts the model asking for the shell, under each name codex
// has had for it, to run cmd; then an answer.
func shellCalls(cmd string) []providertest.Turn {
	return []providertest.Turn{
		{ToolCalls: []providertest.Call{{Tool: "exec_command", Arguments: map[string]any{"cmd": cmd}}}},
		{ToolCalls: []providertest.Call{{Tool: "shell", Arguments: map[string]any{"command": []string{"bash", "-c", cmd}}}}},
		{Text: "done"},
	}
}

// TestBuiltinShellOff: with builtinTools unset the model is offered none of
// the CLI's own tools, and a shell call it makes anyway (to write a file on
// the host, outside the trial's folder) does not run; the client's account
// has it as a refused call of a tool no server offers (Server ""), with its
// reason: like a call of a tool the variant hides, it is never counted as
// made (docs/outcomes.md).
func TestBuiltinShellOff(t *testing.T) {
	t.Parallel()
	host := filepath.Join(t.TempDir(), "written-by-the-model")
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: shellCalls("echo pwned > " + host)}}})
	s := openTest(t, fake.URL, "", peertest.Everything(t))
	res := run(t, t.Context(), s, "write the file")
	if _, err := os.Stat(host); !os.IsNotExist(err) {
		t.Errorf("the model's shell call wrote %s on the host (stat: %v)", host, err)
	}
	if res.Outcome.Status != transcript.Answered {
		t.Errorf("outcome = %+v", res.Outcome)
	}
	for i, r := range fake.Requests() {
		for _, n := range r.Tools {
			if slices.Contains(ownTools, n) {
				t.Errorf("request %d offers the CLI's own tool %s: %v", i, n, r.Tools)
			}
		}
	}
	var tools []string
	for _, c := range res.ToolCalls {
		tools = append(tools, c.Tool)
		if c.Server != "" || !c.IsError || !strings.Contains(c.Error, "unsupported call") || !strings.Contains(string(c.Arguments), "pwned") {
			t.Errorf("call = %+v, want a refused call of no server with the CLI's reason", c)
		}
	}
	if !slices.Equal(tools, []string{"exec_command", "shell"}) {
		t.Errorf("calls of %v, want the two shell calls", tools)
	}
	if got := res.Usage.ModelCalls; got != 3 {
		t.Errorf("modelCalls = %d, want 3", got)
	}
	// Both refused calls are in the conversation, each with its answer.
	answered := 0
	for _, m := range res.Messages {
		if m.Role == "tool" && strings.Contains(m.Text, "unsupported call") {
			answered++
		}
	}
	if answered != 2 {
		t.Errorf("messages = %+v, want a tool message for each refused call", res.Messages)
	}
}

// TestBuiltinShellOn: with builtinTools ["shell"] the shell runs in the
// trial's own folder, which it may write to, and nowhere else: the write on
// the host is refused by the CLI's sandbox. Each command is in the
// transcript as a call of the built-in server with the model's arguments
// and the output.
func TestBuiltinShellOn(t *testing.T) {
	t.Parallel()
	host := filepath.Join(t.TempDir(), "written-by-the-model")
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{ToolCalls: []providertest.Call{{Tool: "exec_command", Arguments: map[string]any{"cmd": "echo in-trial > inside.txt && cat inside.txt && pwd"}}}},
		{ToolCalls: []providertest.Call{{Tool: "exec_command", Arguments: map[string]any{"cmd": "echo pwned > " + host}}}},
		{Text: "done"},
	}}}})
	s := openTest(t, fake.URL, `{"requestMaxRetries": 0, "streamMaxRetries": 0, "builtinTools": ["shell"]}`, peertest.Everything(t))
	var inside []byte
	s.afterRun = func(dir string) { inside, _ = os.ReadFile(filepath.Join(dir, "inside.txt")) }
	res := run(t, t.Context(), s, "write the files")
	if _, err := os.Stat(host); !os.IsNotExist(err) {
		t.Errorf("the model's shell wrote %s on the host (stat: %v)", host, err)
	}
	if string(inside) != "in-trial\n" {
		t.Errorf("the trial's folder holds inside.txt = %q, want the shell's write", inside)
	}
	if !slices.Contains(fake.Requests()[0].Tools, "exec_command") {
		t.Errorf("the shell is not offered: %v", fake.Requests()[0].Tools)
	}
	if len(res.ToolCalls) != 2 {
		t.Fatalf("calls = %+v, want the two commands", res.ToolCalls)
	}
	ran, denied := res.ToolCalls[0], res.ToolCalls[1]
	if ran.Server != client.BuiltinServer || ran.Tool != "exec_command" || ran.IsError || !strings.Contains(string(ran.Arguments), "inside.txt") ||
		!strings.Contains(ran.Result, "in-trial") || !strings.Contains(ran.Result, filepath.Join(s.dir, "trial-")) {
		t.Errorf("first command = %+v (arguments %s), want it run in the trial's folder", ran, ran.Arguments)
	}
	if denied.Server != client.BuiltinServer || denied.Tool != "exec_command" || !denied.IsError || !strings.Contains(denied.Result+denied.Error, "Read-only file system") || !strings.Contains(string(denied.Arguments), host) {
		t.Errorf("second command = %+v (arguments %s), want an error with the sandbox's refusal", denied, denied.Arguments)
	}
}
