package codexcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

const testKey = "test-key-codex-cli"

// openTest opens a session on the peers' codex against the fake provider.
func openTest(t *testing.T, url, options string, srvs ...servers.Server) *session {
	t.Helper()
	bin := peertest.Codex(t)
	if options == "" {
		options = `{"requestMaxRetries": 0, "streamMaxRetries": 0}`
	}
	// The test's options, with the fake's address and the peers' codex.
	var o map[string]any
	if err := json.Unmarshal([]byte(options), &o); err != nil {
		t.Fatal(err)
	}
	o["baseURL"], o["command"] = url+"/v1", bin
	raw, _ := json.Marshal(o)
	cs, err := Open(t.Context(), client.OpenParams{
		Variant: "v", Model: "openai/gpt-test-1", Options: raw, Servers: srvs,
		Env: map[string]string{"OPENAI_API_KEY": testKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	s := cs.(*session)
	t.Cleanup(func() { s.Close() })
	return s
}

func run(t *testing.T, ctx context.Context, s client.Session, prompt string) client.Result {
	t.Helper()
	res, err := s.Run(ctx, client.Trial{Key: transcript.Key{Case: "c1", Variant: "v", Trial: 1}, Prompt: prompt})
	if err != nil {
		t.Fatalf("Run(%q) error = %v", prompt, err)
	}
	return res
}

// TestEverythingEcho runs the real Codex CLI against the real npm
// server-everything and the fake provider: one echo call, then an answer.
func TestEverythingEcho(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{Text: "Let me echo that.", ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "hello from mst"}}}, InputTokens: 100, OutputTokens: 20},
		{Text: "The server echoed: hello from mst", InputTokens: 150, OutputTokens: 10},
	}}}})
	s := openTest(t, fake.URL, "", srv)
	start := time.Now()
	res := run(t, t.Context(), s, "Please echo 'hello from mst'")
	t.Logf("trial took %v", time.Since(start))
	if res.Outcome.Status != transcript.Answered {
		t.Fatalf("outcome = %+v, want answered", res.Outcome)
	}
	if len(res.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v, want 1", res.ToolCalls)
	}
	c := res.ToolCalls[0]
	var args map[string]any
	if json.Unmarshal(c.Arguments, &args) != nil || args["message"] != "hello from mst" {
		t.Errorf("arguments = %s", c.Arguments)
	}
	if c.Server != "everything" || c.Tool != "echo" || !strings.Contains(c.Result, "hello from mst") || c.IsError || c.Error != "" || c.ID == "" || c.Started.IsZero() || c.DurationMs < 0 {
		t.Errorf("tool call = %+v, want echo on everything with the message in its result", c)
	}
	if res.Answer != "The server echoed: hello from mst" {
		t.Errorf("answer = %q", res.Answer)
	}
	if res.Usage.InputTokens != 250 || res.Usage.OutputTokens != 30 || res.Usage.ModelCalls != 2 {
		t.Errorf("usage = %+v, want 250 in, 30 out, 2 model calls", res.Usage)
	}
	if res.ClientVersion == "" || strings.Contains(res.ClientVersion, "codex-cli") {
		t.Errorf("client version = %q", res.ClientVersion)
	}
	if id, _ := res.ClientTelemetry["threadId"].(string); id == "" {
		t.Errorf("telemetry = %v, want a thread id", res.ClientTelemetry)
	}
	// user, assistant (text + call), tool, assistant (answer)
	roles := []string{}
	for _, m := range res.Messages {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []string{"user", "assistant", "tool", "assistant"}) || res.Messages[0].Text != "Please echo 'hello from mst'" ||
		!slices.Equal(res.Messages[1].ToolCalls, []string{c.ID}) || res.Messages[2].ToolCall != c.ID {
		t.Errorf("messages = %+v", res.Messages)
	}
	if len(res.Servers) != 1 || res.Servers[0].Name != "everything" || res.Servers[0].Transport != "stdio" {
		t.Errorf("servers = %+v", res.Servers)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the provider got %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Format != providertest.FormatResponses || r.Model != "gpt-test-1" || !slices.Contains(r.Tools, "mcp__everything.echo") || r.Turn != i {
			t.Errorf("request %d: format %s model %s turn %d tools %v", i, r.Format, r.Model, r.Turn, r.Tools)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
			t.Errorf("request %d: Authorization = %q", i, got)
		}
	}
	if !strings.Contains(string(reqs[1].Body), "hello from mst") {
		t.Errorf("the second request does not carry the tool result")
	}
	// The key is never in a file MST keeps, nor in CODEX_HOME.
	cfg, err := os.ReadFile(filepath.Join(s.home, "config.toml"))
	if err != nil || bytes.Contains(cfg, []byte(testKey)) || !bytes.Contains(cfg, []byte(`env_key = "OPENAI_API_KEY"`)) {
		t.Errorf("config.toml (%v):\n%s", err, cfg)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("the session folder is still there after Close: %v", err)
	}
}

// TestProviderError: a provider that always answers 500 ends the trial
// errored (provider), after the configured retries.
func TestProviderError(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{
		Faults:        []providertest.Fault{{Status: 500, Times: 1000, Message: "boom"}},
		Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "fine"}}}},
	})
	s := openTest(t, fake.URL, `{"requestMaxRetries": 1, "streamMaxRetries": 0}`, peertest.Everything(t))
	start := time.Now()
	res := run(t, t.Context(), s, "hi")
	t.Logf("trial took %v after %d requests", time.Since(start), len(fake.Requests()))
	if res.Outcome.Status != transcript.Errored || res.Outcome.Cause != transcript.CauseProvider || res.Outcome.Detail == "" {
		t.Errorf("outcome = %+v, want errored (provider)", res.Outcome)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("the provider got %d requests, want 2 (1 + 1 retry)", n)
	}
}

// TestServerMissing: a required server whose command does not exist ends
// the trial errored (server), naming the server.
func TestServerMissing(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "fine"}}}}})
	srv := servers.Server{Name: "everything", Command: filepath.Join(t.TempDir(), "no-such-server")}
	s := openTest(t, fake.URL, "", srv)
	res := run(t, t.Context(), s, "hi")
	if res.Outcome.Status != transcript.Errored || res.Outcome.Cause != transcript.CauseServer || !strings.Contains(res.Outcome.Detail, "everything") {
		t.Errorf("outcome = %+v, want errored (server) naming everything", res.Outcome)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the provider got %d requests, want none", n)
	}
}

// TestClientFails: codex exiting non-zero for its own reasons ends the
// trial errored (client) with its stderr.
func TestClientFails(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{})
	s := openTest(t, fake.URL, "", peertest.Everything(t))
	s.extraArgs = []string{"--no-such-flag-for-mst"}
	res := run(t, t.Context(), s, "hi")
	if res.Outcome.Status != transcript.Errored || res.Outcome.Cause != transcript.CauseClient || !strings.Contains(res.Outcome.Detail, "no-such-flag-for-mst") {
		t.Errorf("outcome = %+v, want errored (client) with the CLI's complaint", res.Outcome)
	}
}

// TestToolOverrides: a variant with tool overrides fails at Open.
func TestToolOverrides(t *testing.T) {
	t.Parallel()
	desc := "Echo, differently"
	srv := servers.Server{Name: "everything", Command: "node", Tools: map[string]servers.ToolOverride{"echo": {Description: &desc}}}
	_, err := open(t.Context(), client.OpenParams{Model: "openai/gpt-test-1", Servers: []servers.Server{srv},
		Env: map[string]string{"OPENAI_API_KEY": testKey}, WorkDir: t.TempDir()}, "/nonexistent/codex")
	if err == nil || !strings.Contains(err.Error(), "come later") || !strings.Contains(err.Error(), "everything") {
		t.Errorf("open = %v, want a refusal of tool overrides", err)
	}
}

// TestMissingCommand: a command that is not there fails at Open, saying
// how to install the CLI.
func TestMissingCommand(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), client.OpenParams{Model: "openai/gpt-test-1", Options: json.RawMessage(`{"command": "/nonexistent/codex"}`),
		Env: map[string]string{"OPENAI_API_KEY": testKey}, WorkDir: t.TempDir()})
	if s != nil || err == nil || !strings.Contains(err.Error(), "npm install -g @openai/codex") {
		t.Errorf("Open = %v, %v", s, err)
	}
}

// TestNoKey: without OPENAI_API_KEY or CODEX_API_KEY Open fails; with
// CODEX_API_KEY config.toml names that variable.
func TestNoKey(t *testing.T) {
	t.Parallel()
	_, err := open(t.Context(), client.OpenParams{Model: "openai/gpt-test-1", WorkDir: t.TempDir()}, "/nonexistent/codex")
	if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("open without a key = %v", err)
	}
}

// TestMaxActions: a model that asks for more tool calls than maxActions
// allows ends the trial as no-answer.
func TestMaxActions(t *testing.T) {
	t.Parallel()
	echo := providertest.Turn{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "again"}}}}
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{echo, echo, echo, {Text: "done"}}}}})
	s := openTest(t, fake.URL, `{"requestMaxRetries": 0, "streamMaxRetries": 0, "maxActions": 2}`, peertest.Everything(t))
	res := run(t, t.Context(), s, "echo forever")
	if res.Outcome.Status != transcript.NoAnswer || !strings.Contains(res.Outcome.Detail, "maxActions (2)") || len(res.ToolCalls) != 2 {
		t.Errorf("outcome = %+v with %d calls, want no-answer after 2", res.Outcome, len(res.ToolCalls))
	}
}

// TestConcurrent runs three trials at once in one session (the definition
// says Concurrent): each gets its own conversation and answer.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	var convs []providertest.Conversation
	for i := range 3 {
		convs = append(convs, providertest.Conversation{Match: fmt.Sprintf("question %d", i), Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": fmt.Sprintf("echo %d", i)}}}},
			{Text: fmt.Sprintf("answer %d", i)},
		}})
	}
	// The fake holds the trials' first requests until all three are in
	// flight: the test waits for the overlap rather than for a latency.
	const within = 2 * time.Minute
	fake := providertest.New(t, providertest.Script{Conversations: convs, Gate: providertest.Gate{Conversations: 3, Within: within}})
	s := openTest(t, fake.URL, "", peertest.Everything(t))
	results := make([]client.Result, 3)
	errs := make([]error, 3)
	done := make(chan int)
	for i := range 3 {
		go func() {
			results[i], errs[i] = s.Run(t.Context(), client.Trial{Key: transcript.Key{Case: fmt.Sprint(i), Variant: "v", Trial: 1}, Prompt: fmt.Sprintf("question %d", i)})
			done <- i
		}()
	}
	for range 3 {
		<-done
	}
	for i, res := range results {
		if errs[i] != nil || res.Answer != fmt.Sprintf("answer %d", i) || len(res.ToolCalls) != 1 || !strings.Contains(res.ToolCalls[0].Result, fmt.Sprintf("echo %d", i)) {
			t.Errorf("trial %d: err %v, outcome %+v, answer %q, calls %+v", i, errs[i], res.Outcome, res.Answer, res.ToolCalls)
		}
	}
	if n := fake.Gathered(); n < 3 {
		t.Errorf("only %d of 3 trials reached the model at once within %v", n, within)
	}
}
