//go:build unix

package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

const testKey = "test-key-claude-code-0123456789"

// openCLI opens a claude-code session on the real CLI against the fake
// provider at url.
func openCLI(t *testing.T, url string, extra map[string]any, srvs ...servers.Server) *session {
	t.Helper()
	cli := peertest.ClaudeCode(t)
	opts := map[string]any{"baseURL": url, "command": cli}
	for k, v := range extra {
		opts[k] = v
	}
	raw, _ := json.Marshal(opts)
	cs, err := Open(t.Context(), client.OpenParams{
		Variant: "v", Model: "anthropic/claude-test-1", Options: raw, Servers: srvs,
		Env:     map[string]string{"ANTHROPIC_API_KEY": testKey},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		WorkDir: t.TempDir(),
	})
	if err != nil {
		if cs != nil {
			cs.Close()
		}
		t.Fatalf("Open = %v", err)
	}
	s := cs.(*session)
	t.Cleanup(func() {
		dir := s.dir
		if err := s.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the session folder %s is still there after Close", dir)
		}
	})
	return s
}

func trial(prompt string) client.Trial {
	return client.Trial{Key: transcript.Key{Case: "c1", Variant: "v", Trial: 1}, Prompt: prompt}
}

func run(t *testing.T, s *session, ctx context.Context, prompt string) client.Result {
	t.Helper()
	res, err := s.Run(ctx, trial(prompt))
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	return res
}

// TestEverythingEcho: the CLI calls server-everything's echo through the
// fake provider and answers; the transcript says so.
func TestEverythingEcho(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			{Text: "Let me echo that.", ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "hello from mst"}}}, InputTokens: 100, OutputTokens: 20},
			{Text: "The server echoed: hello from mst", InputTokens: 150, OutputTokens: 10},
		},
	}}})
	s := openCLI(t, fake.URL, nil, srv)
	var pid int
	s.started = func(p int) { pid = p }
	start := time.Now()
	res := run(t, s, t.Context(), "Please echo 'hello from mst'")
	t.Logf("trial took %v", time.Since(start))
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still has processes after the trial (kill 0: %v)", pid, err)
	}
	if res.Outcome.Status != transcript.Answered {
		t.Fatalf("outcome = %+v, want answered", res.Outcome)
	}
	if len(res.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v, want 1", res.ToolCalls)
	}
	c := res.ToolCalls[0]
	if c.Server != "everything" || c.Tool != "echo" || c.IsError || !strings.Contains(c.Result, "hello from mst") {
		t.Errorf("tool call = %+v, want echo on everything with the message in its result", c)
	}
	var args map[string]any
	if json.Unmarshal(c.Arguments, &args) != nil || args["message"] != "hello from mst" {
		t.Errorf("arguments = %s", c.Arguments)
	}
	if c.Started.IsZero() || c.DurationMs < 0 {
		t.Errorf("call timing: started %v, %v ms", c.Started, c.DurationMs)
	}
	if res.Answer != "The server echoed: hello from mst" {
		t.Errorf("answer = %q", res.Answer)
	}
	if res.Usage.InputTokens != 250 || res.Usage.OutputTokens != 30 || res.Usage.ModelCalls != 2 || res.Usage.CostUSD <= 0 {
		t.Errorf("usage = %+v, want 250 in, 30 out, 2 calls, a cost", res.Usage)
	}
	if res.ClientVersion == "" {
		t.Errorf("no client version")
	}
	for _, k := range []string{"num_turns", "duration_ms", "terminal_reason", "session_id"} {
		if _, ok := res.ClientTelemetry[k]; !ok {
			t.Errorf("client telemetry %v lacks %s", res.ClientTelemetry, k)
		}
	}
	roles := []string{}
	for _, m := range res.Messages {
		roles = append(roles, m.Role)
	}
	if want := []string{"user", "assistant", "tool", "assistant"}; !slices.Equal(roles, want) {
		t.Errorf("message roles = %v, want %v", roles, want)
	}
	if m := res.Messages[1]; m.Text != "Let me echo that." || len(m.ToolCalls) != 1 || m.ToolCalls[0] != c.ID {
		t.Errorf("first assistant message = %+v", m)
	}
	if len(res.Servers) != 1 || !slices.Contains(res.Servers[0].Tools, "echo") || res.Servers[0].ToolsHash == "" {
		t.Errorf("servers = %+v", res.Servers)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the provider got %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Format != providertest.FormatAnthropic || r.Model != "claude-test-1" || !slices.Contains(r.Tools, "mcp__everything__echo") {
			t.Errorf("request %d: format %s model %s tools %v", i, r.Format, r.Model, r.Tools)
		}
		if got := r.Header.Get("x-api-key"); got != testKey {
			t.Errorf("request %d: x-api-key %q, want the key from Env", i, got)
		}
	}
	if !strings.Contains(string(reqs[1].Body), "hello from mst") {
		t.Errorf("the second request does not carry the tool result")
	}
	// The key travels in the environment only.
	for _, a := range s.args(s.mcpConfig, s.params.Servers) {
		if strings.Contains(a, testKey) {
			t.Errorf("the CLI's argv carries the key: %q", a)
		}
	}
	if cfg, _ := os.ReadFile(s.mcpConfig); strings.Contains(string(cfg), testKey) {
		t.Errorf("the MCP config carries the key")
	}
}

// TestProviderError: a provider that answers 500 every time ends the trial
// errored (provider), though the CLI's subtype says success.
func TestProviderError(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	fake := providertest.New(t, providertest.Script{
		Faults:        []providertest.Fault{{Status: 500, Times: 100, Message: "boom"}},
		Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "fine"}}}},
	})
	s := openCLI(t, fake.URL, map[string]any{"maxRetries": 1}, srv)
	start := time.Now()
	res := run(t, s, t.Context(), "hi")
	t.Logf("trial took %v; outcome %+v; telemetry %v", time.Since(start), res.Outcome, res.ClientTelemetry)
	if res.Outcome.Status != transcript.Errored || res.Outcome.Cause != transcript.CauseProvider {
		t.Errorf("outcome = %+v, want errored (provider)", res.Outcome)
	}
	if res.Answer != "" {
		t.Errorf("answer = %q, want none", res.Answer)
	}
	if n := len(fake.Requests()); n < 2 {
		t.Errorf("the provider got %d requests, want the first and a retry", n)
	}
}

// TestServerMissing: a server whose command does not exist ends the trial
// errored (server), naming it.
func TestServerMissing(t *testing.T) {
	t.Parallel()
	peertest.Everything(t) // Node and the servers are there: this is about the missing one
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "no tools here"}}}}})
	s := openCLI(t, fake.URL, nil, servers.Server{Name: "ghost", Command: "/nonexistent/mcp-ghost-server"})
	res := run(t, s, t.Context(), "hi")
	if res.Outcome.Status != transcript.Errored || res.Outcome.Cause != transcript.CauseServer || !strings.Contains(res.Outcome.Detail, "ghost") {
		t.Errorf("outcome = %+v, want errored (server) naming ghost", res.Outcome)
	}
}

// TestCLIFails: a CLI that exits non-zero without a result line ends the
// trial errored (client) with its stderr.
func TestCLIFails(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	fake := providertest.New(t, providertest.Script{})
	s := openCLI(t, fake.URL, nil, srv)
	// An MCP config the CLI cannot read.
	if err := os.WriteFile(s.mcpConfig, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := run(t, s, t.Context(), "hi")
	t.Logf("outcome %+v", res.Outcome)
	if res.Outcome.Status != transcript.Errored || res.Outcome.Cause != transcript.CauseClient || !strings.Contains(res.Outcome.Detail, "stderr") {
		t.Errorf("outcome = %+v, want errored (client) with the CLI's stderr", res.Outcome)
	}
}

// TestMaxActions: --max-turns reached ends the trial as no-answer.
func TestMaxActions(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "one"}}}},
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "two"}}}},
			{Text: "done"},
		},
	}}})
	s := openCLI(t, fake.URL, map[string]any{"maxActions": 1}, srv)
	res := run(t, s, t.Context(), "echo twice")
	if res.Outcome.Status != transcript.NoAnswer {
		t.Errorf("outcome = %+v, want no-answer", res.Outcome)
	}
}

// TestStreamableHTTP reaches the go-sdk example server over streamable
// HTTP: the MCP config names it by url.
func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	bin := peertest.GoEverything(t).Command
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-http", addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	// Wait for the event (the server listens) or its end (it exited);
	// the bound is only there so that a hung server fails the test.
	const within = 2 * time.Minute
	limit := time.NewTimer(within)
	defer limit.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for listening := false; !listening; {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the server exited (%v) before it listened on %s; stderr: %s", err, addr, stderr.String())
		case <-limit.C:
			t.Fatalf("the server did not listen on %s within %v", addr, within)
		case <-tick.C:
			if c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr); err == nil {
				c.Close()
				listening = true
			}
		}
	}
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "greet", Arguments: map[string]any{"name": "Grace"}}}},
			{Text: "Done."},
		},
	}}})
	s := openCLI(t, fake.URL, nil, servers.Server{Name: "remote", URL: "http://" + addr})
	res := run(t, s, t.Context(), "Greet Grace")
	if res.Outcome.Status != transcript.Answered || len(res.ToolCalls) != 1 || !strings.Contains(res.ToolCalls[0].Result, "Grace") {
		t.Fatalf("outcome %+v, calls %+v", res.Outcome, res.ToolCalls)
	}
	if c := res.ToolCalls[0]; c.Server != "remote" || c.Tool != "greet" {
		t.Errorf("call = %+v, want greet on remote", c)
	}
	if res.Servers[0].Transport != "http" {
		t.Errorf("transport = %s, want http", res.Servers[0].Transport)
	}
}

// TestConcurrentTrials runs three trials of one session at once.
func TestConcurrentTrials(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	var convs []providertest.Conversation
	for _, w := range []string{"alpha", "beta", "gamma"} {
		convs = append(convs, providertest.Conversation{Match: w, Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": w}}}},
			{Text: "echoed " + w},
		}})
	}
	// The fake holds the trials' first requests until all three are in
	// flight: the test waits for the overlap rather than for a latency.
	const within = 2 * time.Minute
	fake := providertest.New(t, providertest.Script{Conversations: convs, Gate: providertest.Gate{Conversations: 3, Within: within}})
	s := openCLI(t, fake.URL, nil, srv)
	var wg sync.WaitGroup
	for _, w := range []string{"alpha", "beta", "gamma"} {
		wg.Go(func() {
			res, err := s.Run(t.Context(), trial("please echo "+w))
			if err != nil || res.Outcome.Status != transcript.Answered || res.Answer != "echoed "+w ||
				len(res.ToolCalls) != 1 || !strings.Contains(res.ToolCalls[0].Result, w) {
				t.Errorf("%s: err %v, outcome %+v, answer %q, calls %+v", w, err, res.Outcome, res.Answer, res.ToolCalls)
			}
		})
	}
	wg.Wait()
	if n := fake.Gathered(); n < 3 {
		t.Errorf("only %d of 3 trials reached the model at once within %v", n, within)
	}
}
