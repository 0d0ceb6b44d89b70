//go:build linux

package claudecode

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/servers"
)

// TestCLIGetsOnlyItsKeyAndNoPromptInArgv runs the real CLI with a run
// secret it has no use for, and reads the CLI's /proc cmdline and environ
// while it waits on the model (the first request, passed through a proxy
// to the fake provider): the prompt is not in argv, the key is in the
// environment and the other secret is not; the prompt reached the model.
// A stdio server whose env holds a secret gets it in its environment, not
// in the argv of any process of the tree, and does not get the CLI's key.
func TestCLIGetsOnlyItsKeyAndNoPromptInArgv(t *testing.T) {
	t.Parallel()
	const prompt, other, serverSecret = "canary-prompt-7f3a please answer", "canary-other-secret-51c9", "canary-server-secret-e2d4"
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "done"}}}}})
	var tree []proc
	snoop := providertest.NewProcSnoop(t, fake.URL, func(pid int) { tree = procTree(t, strconv.Itoa(pid)) })
	raw, _ := json.Marshal(map[string]any{"baseURL": snoop.URL, "command": peertest.ClaudeCode(t)})
	srv := peertest.Everything(t)
	srv.Env = map[string]string{"SERVER_TOKEN": serverSecret}
	cs, err := Open(t.Context(), client.OpenParams{
		Variant: "v", Model: "anthropic/claude-test-1", Options: raw, Servers: []servers.Server{srv},
		Env:    map[string]string{"ANTHROPIC_API_KEY": testKey, "OTHER_SECRET": other},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	s := cs.(*session)
	t.Cleanup(func() { s.Close() })
	s.started = func(pid int) { snoop.PID <- pid }
	res := run(t, s, t.Context(), prompt)
	if res.Answer != "done" {
		t.Errorf("answer %q, want done", res.Answer)
	}
	cmdline, environ := snoop.Cmdline(), snoop.Environ()
	if len(cmdline) == 0 || len(environ) == 0 {
		t.Fatalf("the CLI's /proc files were not read (cmdline %d bytes, environ %d bytes)", len(cmdline), len(environ))
	}
	if bytes.Contains(cmdline, []byte("canary-prompt")) {
		t.Errorf("the CLI's argv carries the prompt: %q", cmdline)
	}
	if !bytes.Contains(environ, []byte("ANTHROPIC_API_KEY="+testKey)) {
		t.Errorf("the CLI's environment lacks its key")
	}
	if bytes.Contains(environ, []byte(other)) {
		t.Errorf("the CLI's environment carries a run secret it does not need")
	}
	var server bool
	for _, p := range tree {
		if bytes.Contains(p.cmdline, []byte("canary-")) {
			t.Errorf("process %s has a canary in its argv: %q", p.pid, p.cmdline)
		}
		if bytes.Contains(p.environ, []byte("SERVER_TOKEN="+serverSecret)) {
			server = true
			if bytes.Contains(p.environ, []byte(testKey)) || bytes.Contains(p.environ, []byte(other)) {
				t.Errorf("the server (process %s) has the CLI's key or another secret in its environment", p.pid)
			}
		}
	}
	if !server {
		t.Errorf("no process of the CLI's tree (%d) has the server's secret in its environment", len(tree))
	}
	// The wrapper that starts the server (env) lives too briefly to be
	// caught in /proc: its command line is the config's args.
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	b, err := os.ReadFile(s.mcpConfig)
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("reading the MCP config: %v", err)
	}
	for name, e := range cfg.MCPServers {
		if strings.Contains(e.Command+strings.Join(e.Args, " "), "canary-") {
			t.Errorf("server %s is started with a secret on its command line: %q", name, e.Args)
		}
	}
	reqs := fake.Requests()
	if len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), "canary-prompt-7f3a") {
		t.Errorf("the prompt did not reach the model")
	}
}

type proc struct {
	pid              string
	cmdline, environ []byte
}

// procTree reads the argv and environment of every process under root.
func procTree(t *testing.T, root string) []proc {
	t.Helper()
	parent := map[string]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ")".
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				parent[e.Name()] = f[1]
			}
		}
	}
	var out []proc
	for pid := range parent {
		for p := pid; p != "" && p != "0"; p = parent[p] {
			if p == root {
				c, _ := os.ReadFile("/proc/" + pid + "/cmdline")
				env, _ := os.ReadFile("/proc/" + pid + "/environ")
				out = append(out, proc{pid: pid, cmdline: c, environ: env})
				break
			}
		}
	}
	return out
}
