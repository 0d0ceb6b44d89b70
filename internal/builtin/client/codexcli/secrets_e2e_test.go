//go:build linux

package codexcli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// TestCLIGetsOnlyItsKeyAndNoPromptInArgv runs the real CLI with a run
// secret it has no use for, and reads the CLI's /proc cmdline and environ
// while it waits on the model (the first request, passed through a proxy
// to the fake provider): the prompt is not in argv, the key is in the
// environment and the other secret is not; the prompt reached the model.
func TestCLIGetsOnlyItsKeyAndNoPromptInArgv(t *testing.T) {
	t.Parallel()
	const prompt, other = "canary-prompt-7f3a please answer", "canary-other-secret-51c9"
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "done"}}}}})
	snoop := providertest.NewProcSnoop(t, fake.URL, nil)
	raw, _ := json.Marshal(map[string]any{"requestMaxRetries": 0, "streamMaxRetries": 0, "baseURL": snoop.URL + "/v1", "command": peertest.Codex(t)})
	cs, err := Open(t.Context(), client.OpenParams{
		Variant: "v", Model: "openai/gpt-test-1", Options: raw,
		Env:    map[string]string{"OPENAI_API_KEY": testKey, "OTHER_SECRET": other},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	s := cs.(*session)
	t.Cleanup(func() { s.Close() })
	s.onStart = func(pid int) { snoop.PID <- pid }
	res := run(t, t.Context(), s, prompt)
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
	if !bytes.Contains(environ, []byte("OPENAI_API_KEY="+testKey)) {
		t.Errorf("the CLI's environment lacks its key")
	}
	if bytes.Contains(environ, []byte(other)) {
		t.Errorf("the CLI's environment carries a run secret it does not need")
	}
	reqs := fake.Requests()
	if len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), "canary-prompt-7f3a") {
		t.Errorf("the prompt did not reach the model")
	}
}

// TestServerSecretsInNoFile: a stdio server's variable and an HTTP
// server's Authorization header reach the servers (the stdio server starts
// only when its variable holds the value, and the HTTP server answers only
// requests with the header), and no file the session wrote holds either
// value: every file under the session's folder (CODEX_HOME with the
// trial's config layer, the CLI's databases, logs and rollout, the trial's
// folder) is read once the CLI has exited, before anything is removed. The
// servers come once from the session and once from the trial
// (Trial.Servers, as the worker's proxies do). The model's shell (turned
// on) sees none of those values in its environment.
func TestServerSecretsInNoFile(t *testing.T) {
	t.Parallel()
	const envCanary, headerCanary, trialCanary = "canary-env-value-3b81", "canary-header-value-97d2", "canary-trial-header-0c4e"
	everything := peertest.Everything(t)
	sum := sha256.Sum256([]byte(envCanary))
	// The check is made on a hash, so that the value is in no argument.
	stdio := servers.Server{Name: "everything", Command: "/bin/sh", Args: []string{"-c",
		`[ "$(printf %s "$MST_TEST_SERVER_SECRET" | sha256sum | cut -d' ' -f1)" = "$0" ] || { echo "the server's variable is missing" >&2; exit 3; }; exec "$@"`,
		hex.EncodeToString(sum[:]), everything.Command, everything.Args[0], everything.Args[1]},
		Env: map[string]string{"MST_TEST_SERVER_SECRET": envCanary}}
	remote := newToolServer(t, "remote", "Bearer "+headerCanary)
	trialRemote := newToolServer(t, "remote", "Bearer "+trialCanary)
	script := func(match string) providertest.Conversation {
		return providertest.Conversation{Match: match, Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "mcp__remote__echo", Arguments: map[string]any{"text": "over http"}}}},
			{ToolCalls: []providertest.Call{{Tool: "mcp__everything__echo", Arguments: map[string]any{"message": "over stdio"}}}},
			{ToolCalls: []providertest.Call{{Tool: "exec_command", Arguments: map[string]any{"cmd": "env"}}}},
			{Text: "done " + match},
		}}
	}
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{script("session"), script("trial")}})
	s := openTest(t, fake.URL, `{"requestMaxRetries": 0, "streamMaxRetries": 0, "builtinTools": ["shell"]}`, stdio, remote.Server)
	var leaks []string
	var files int
	s.afterRun = func(string) {
		filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			files++
			for _, c := range []string{envCanary, headerCanary, trialCanary} {
				if bytes.Contains(b, []byte(c)) {
					leaks = append(leaks, path+" holds "+c)
				}
			}
			return nil
		})
	}
	for _, tc := range []struct {
		name string
		srvs []servers.Server
		srv  *toolServer
	}{
		{"session", nil, remote},
		{"trial", []servers.Server{stdio, trialRemote.Server}, trialRemote},
	} {
		res, err := s.Run(t.Context(), client.Trial{Key: transcript.Key{Case: tc.name, Variant: "v", Trial: 1}, Prompt: tc.name, Servers: tc.srvs})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome.Status != transcript.Answered || len(res.ToolCalls) != 3 {
			t.Fatalf("%s servers: outcome %+v, calls %+v", tc.name, res.Outcome, res.ToolCalls)
		}
		// The model's shell sees none of the servers' values, nor the key.
		shell := res.ToolCalls[2]
		if shell.Server != client.BuiltinServer || !strings.Contains(shell.Result, "PATH=") {
			t.Errorf("%s servers: the shell call = %+v, want env's output", tc.name, shell)
		}
		for _, c := range []string{envCanary, headerCanary, trialCanary, testKey} {
			if strings.Contains(shell.Result, c) {
				t.Errorf("%s servers: the model's shell sees %s", tc.name, c)
			}
		}
		for _, c := range res.ToolCalls[:2] {
			if c.IsError || c.Error != "" || !strings.Contains(c.Result, "over ") {
				t.Errorf("%s servers: call %+v failed", tc.name, c)
			}
		}
		if got := tc.srv.called(); !slices.Equal(got, []string{"echo"}) {
			t.Errorf("%s servers: the HTTP server got calls %v (refused Authorization headers: %d)", tc.name, got, len(tc.srv.bad))
		}
	}
	if files < 3 {
		t.Fatalf("only %d files were read under %s", files, s.dir)
	}
	for _, l := range leaks {
		t.Error(l)
	}
}
