//go:build unix

package claudecode

import (
	"encoding/json"
	"errors"
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

// offeredBuiltins are the tools of a request that are not MCP tools: the
// CLI's own.
func offeredBuiltins(r providertest.Request) []string {
	var out []string
	for _, n := range r.Tools {
		if !strings.HasPrefix(n, "mcp__") {
			out = append(out, n)
		}
	}
	return out
}

// bashScript scripts a model that runs command with the CLI's Bash tool,
// then answers.
func bashScript(command string) providertest.Script {
	return providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "Bash", Arguments: map[string]any{"command": command, "description": "a scripted command"}}}},
			{Text: "Done."},
		},
	}}}
}

// TestBuiltinToolsOffByDefault: with builtinTools unset the CLI offers the
// model none of its own tools, and a scripted shell call that would write
// a file on the host, outside the trial's folder, never runs; the
// transcript records it as a refused call of the builtin server.
func TestBuiltinToolsOffByDefault(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	marker := filepath.Join(t.TempDir(), "written-by-the-model")
	fake := providertest.New(t, bashScript("echo pwned > "+marker))
	s := openCLI(t, fake.URL, nil, srv)
	res := run(t, s, t.Context(), "please run the command")
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the shell call ran on the host: %s exists (stat: %v)", marker, err)
	}
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("the provider got no request")
	}
	for i, r := range reqs {
		if b := offeredBuiltins(r); len(b) > 0 {
			t.Errorf("request %d offers the CLI's own tools %v; want only the servers' tools", i, b)
		}
		if !slices.Contains(r.Tools, "mcp__everything__echo") {
			t.Errorf("request %d does not offer the server's tools: %v", i, r.Tools)
		}
	}
	if len(res.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v, want the one refused Bash call", res.ToolCalls)
	}
	c := res.ToolCalls[0]
	if c.Server != "" || c.Tool != "Bash" || !c.IsError || c.Error == "" {
		t.Errorf("call = %+v, want Bash of no server (the CLI does not have it), an error, refused", c)
	}
	var args map[string]any
	if json.Unmarshal(c.Arguments, &args) != nil || args["command"] != "echo pwned > "+marker {
		t.Errorf("arguments = %s, want the scripted command", c.Arguments)
	}
}

// TestBuiltinBashOn: with builtinTools [Bash] the CLI offers Bash and no
// other tool of its own, and the command runs in the trial's folder; the
// transcript records the call with its result.
func TestBuiltinBashOn(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	fake := providertest.New(t, bashScript("pwd && echo made > made-by-bash.txt && ls"))
	s := openCLI(t, fake.URL, map[string]any{"builtinTools": []string{"Bash"}}, srv)
	res := run(t, s, t.Context(), "please run the command")
	for i, r := range fake.Requests() {
		if b := offeredBuiltins(r); !slices.Equal(b, []string{"Bash"}) {
			t.Errorf("request %d offers the CLI's tools %v, want [Bash]", i, b)
		}
	}
	if res.Outcome.Status != transcript.Answered || len(res.ToolCalls) != 1 {
		t.Fatalf("outcome %+v, calls %+v", res.Outcome, res.ToolCalls)
	}
	c := res.ToolCalls[0]
	if c.Server != client.BuiltinServer || c.Tool != "Bash" || c.IsError || c.Error != "" {
		t.Fatalf("call = %+v, want a Bash call of %q that ran", c, client.BuiltinServer)
	}
	dir, _, _ := strings.Cut(strings.TrimSpace(c.Result), "\n")
	if rel, err := filepath.Rel(s.dir, dir); err != nil || !strings.HasPrefix(rel, "trial-") || filepath.Base(dir) != "work" {
		t.Errorf("the command ran in %q, want the trial's work folder under %s", dir, s.dir)
	}
	if !strings.Contains(c.Result, "made-by-bash.txt") {
		t.Errorf("result %q does not list the file the command wrote", c.Result)
	}
}

// TestBuiltinToolNames: every name builtinTools takes is a tool the
// installed CLI offers when turned on, and turning them all on offers no
// other tool of the CLI's.
func TestBuiltinToolNames(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "Nothing to do."}}}}})
	names := builtinToolNames()
	s := openCLI(t, fake.URL, map[string]any{"builtinTools": names}, srv)
	run(t, s, t.Context(), "hello")
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("the provider got no request")
	}
	got := offeredBuiltins(reqs[0])
	slices.Sort(got)
	if !slices.Equal(got, names) {
		t.Errorf("with builtinTools %v the CLI offers %v", names, got)
	}
}
