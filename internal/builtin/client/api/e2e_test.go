package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/api"
	"github.com/mst-eval/mst/internal/builtin/provider/anthropic"
	"github.com/mst-eval/mst/internal/builtin/provider/google"
	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/builtin/provider/openai"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// providers is the built-in provider registry, as internal/builtin wires it.
var providers = provider.NewRegistry(anthropic.Definition(), openai.Definition(), google.Definition(), offline.Definition())

// wire is one provider wire format under test.
type wire struct {
	name    string
	model   string
	env     map[string]string
	options func(url string) string
	format  string
}

var wires = []wire{
	{"anthropic", "anthropic/claude-test-1", map[string]string{"ANTHROPIC_API_KEY": "test-key-anthropic"},
		func(url string) string { return fmt.Sprintf(`{"baseURL": %q}`, url) }, "anthropic"},
	{"openai-responses", "openai/gpt-test-1", map[string]string{"OPENAI_API_KEY": "test-key-openai"},
		func(url string) string { return fmt.Sprintf(`{"baseURL": %q, "api": "responses"}`, url+"/v1") }, "responses"},
	{"openai-chat", "openai/gpt-test-1", map[string]string{"OPENAI_API_KEY": "test-key-openai"},
		func(url string) string { return fmt.Sprintf(`{"baseURL": %q, "api": "chat"}`, url+"/v1") }, "chat"},
}

func open(t *testing.T, w wire, url string, srvs ...servers.Server) client.Session {
	t.Helper()
	s, err := api.Definition(providers).Open(t.Context(), client.OpenParams{
		Variant: "v", Model: w.model, Options: json.RawMessage(w.options(url)), Servers: srvs,
		Env: w.env, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("Open(%s) = %v", w.name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func runTrial(t *testing.T, s client.Session, prompt string) client.Result {
	t.Helper()
	res, err := s.Run(t.Context(), client.Trial{Key: transcript.Key{Case: "c1", Variant: "v", Trial: 1}, Prompt: prompt})
	if err != nil {
		t.Fatalf("Run(%q) error = %v", prompt, err)
	}
	return res
}

// TestEverythingEcho runs the api client against the real npm
// server-everything, through each wire format of the fake provider.
func TestEverythingEcho(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
				Turns: []providertest.Turn{
					{Text: "Let me echo that.", ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "hello from mst"}}}, InputTokens: 100, OutputTokens: 20},
					{Text: "The server echoed: hello from mst", InputTokens: 150, OutputTokens: 10},
				},
			}}})
			res := runTrial(t, open(t, w, fake.URL, srv), "Please echo 'hello from mst'")
			if res.Outcome.Status != transcript.Answered {
				t.Fatalf("outcome = %+v, want answered", res.Outcome)
			}
			if len(res.ToolCalls) != 1 {
				t.Fatalf("tool calls = %+v, want 1", res.ToolCalls)
			}
			call := res.ToolCalls[0]
			if call.Server != "everything" || call.Tool != "echo" || !strings.Contains(call.Result, "hello from mst") || call.IsError {
				t.Errorf("tool call = %+v, want echo on everything with the message in its result", call)
			}
			if res.Answer != "The server echoed: hello from mst" {
				t.Errorf("answer = %q", res.Answer)
			}
			if res.Usage.InputTokens != 250 || res.Usage.OutputTokens != 30 || res.Usage.ModelCalls != 2 {
				t.Errorf("usage = %+v, want 250 in, 30 out, 2 calls", res.Usage)
			}
			if len(res.Servers) != 1 || !slices.Contains(res.Servers[0].Tools, "echo") || res.Servers[0].ToolsHash == "" {
				t.Errorf("servers = %+v", res.Servers)
			}
			reqs := fake.Requests()
			if len(reqs) != 2 {
				t.Fatalf("the provider got %d requests, want 2", len(reqs))
			}
			for i, r := range reqs {
				if r.Format != w.format || r.Model != strings.SplitN(w.model, "/", 2)[1] || !slices.Contains(r.Tools, "echo") || r.Turn != i {
					t.Errorf("request %d = format %s model %s turn %d tools %v", i, r.Format, r.Model, r.Turn, r.Tools)
				}
			}
			// The tool's result went back to the model.
			if !strings.Contains(string(reqs[1].Body), "hello from mst") {
				t.Errorf("second request does not carry the tool result: %s", reqs[1].Body)
			}
		})
	}
}

// TestFilesystem lists a folder through the real npm server-filesystem.
func TestFilesystem(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "planted-note.txt"), []byte("x"), 0o644)
	root, _ = filepath.EvalSymlinks(root)
	srv := peertest.Filesystem(t, root)
	for _, w := range wires[:2] {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
				Turns: []providertest.Turn{
					{ToolCalls: []providertest.Call{{Tool: "list_directory", Arguments: map[string]any{"path": root}}}},
					{Text: "There is one note."},
				},
			}}})
			res := runTrial(t, open(t, w, fake.URL, srv), "What files are in my folder?")
			if res.Outcome.Status != transcript.Answered || len(res.ToolCalls) != 1 {
				t.Fatalf("outcome %+v, calls %+v", res.Outcome, res.ToolCalls)
			}
			if c := res.ToolCalls[0]; c.Tool != "list_directory" || !strings.Contains(c.Result, "planted-note.txt") {
				t.Errorf("call = %+v, want list_directory listing planted-note.txt", c)
			}
		})
	}
}

// TestAwkwardToolNames offers the go-sdk example server's tools, whose
// names have spaces and parentheses, under valid names, and maps the
// model's call back to the server's own name.
func TestAwkwardToolNames(t *testing.T) {
	t.Parallel()
	srv := peertest.GoEverything(t)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
				Turns: []providertest.Turn{
					{ToolCalls: []providertest.Call{{Tool: "greet (structured)", Arguments: map[string]any{"name": "Ada"}}}},
					{Text: "Greeted."},
				},
			}}})
			res := runTrial(t, open(t, w, fake.URL, srv), "Greet Ada")
			for _, name := range fake.Requests()[0].Tools {
				if strings.ContainsAny(name, " ()") || len(name) > 64 {
					t.Errorf("offered tool name %q is not valid for providers", name)
				}
			}
			if res.Outcome.Status != transcript.Answered || len(res.ToolCalls) != 1 {
				t.Fatalf("outcome %+v, calls %+v", res.Outcome, res.ToolCalls)
			}
			if c := res.ToolCalls[0]; c.Tool != "greet (structured)" || c.IsError || c.Error != "" || !strings.Contains(c.Result, "Ada") {
				t.Errorf("call = %+v, want greet (structured) answered for Ada", c)
			}
			if !slices.Contains(res.Servers[0].Tools, "greet (structured)") {
				t.Errorf("transcript tools = %v, want the server's own names", res.Servers[0].Tools)
			}
		})
	}
}

// TestStreamableHTTP reaches the go-sdk example server over streamable HTTP.
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
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "http://" + addr
	// Wait for the port without sleeping blind: dial until it answers (the
	// bound is for a server that never starts, not a guess of its start-up
	// time on a loaded machine).
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the server never listened on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w := wires[0]
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "greet", Arguments: map[string]any{"name": "Grace"}}}},
			{Text: "Done."},
		},
	}}})
	res := runTrial(t, open(t, w, fake.URL, servers.Server{Name: "remote", URL: url}), "Greet Grace")
	if res.Outcome.Status != transcript.Answered || len(res.ToolCalls) != 1 || !strings.Contains(res.ToolCalls[0].Result, "Grace") {
		t.Fatalf("outcome %+v, calls %+v", res.Outcome, res.ToolCalls)
	}
	if res.Servers[0].Transport != "http" {
		t.Errorf("transport = %s, want http", res.Servers[0].Transport)
	}
}

// TestProviderFaults: 429s are retried, persistent 500s end the trial
// errored with cause provider.
func TestProviderFaults(t *testing.T) {
	t.Parallel()
	srv := peertest.Everything(t)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			turns := []providertest.Turn{{Text: "fine"}}
			fake := providertest.New(t, providertest.Script{
				Faults:        []providertest.Fault{{Status: 429, Times: 2, Message: "slow down"}},
				Conversations: []providertest.Conversation{{Turns: turns}},
			})
			res := runTrial(t, open(t, w, fake.URL, srv), "hi")
			if res.Outcome.Status != transcript.Answered || len(fake.Requests()) != 3 {
				t.Errorf("after two 429s: outcome %+v after %d requests, want answered after 3", res.Outcome, len(fake.Requests()))
			}
			fake = providertest.New(t, providertest.Script{
				Faults:        []providertest.Fault{{Status: 500, Times: 10, Message: "boom"}},
				Conversations: []providertest.Conversation{{Turns: turns}},
			})
			res = runTrial(t, open(t, w, fake.URL, srv), "hi")
			if res.Outcome.Status != transcript.Errored || res.Outcome.Cause != transcript.CauseProvider || !strings.Contains(res.Outcome.Detail, "500") {
				t.Errorf("after 500s: outcome %+v, want errored (provider) naming 500", res.Outcome)
			}
			if n := len(fake.Requests()); n != 3 {
				t.Errorf("the provider got %d requests, want 3 (1 + 2 retries)", n)
			}

			// An answer cut off mid-body is retried, as a reset
			// connection is: nothing of it reached the conversation.
			fake = providertest.New(t, providertest.Script{
				Faults:        []providertest.Fault{{Cut: true, Times: 2}},
				Conversations: []providertest.Conversation{{Turns: turns}},
			})
			res = runTrial(t, open(t, w, fake.URL, srv), "hi")
			if res.Outcome.Status != transcript.Answered || res.Answer != "fine" || len(fake.Requests()) != 3 || res.Usage.ModelCalls != 1 {
				t.Errorf("after two cut answers: outcome %+v, answer %q, %d model calls counted, after %d requests; want answered \"fine\" after 3, one model call",
					res.Outcome, res.Answer, res.Usage.ModelCalls, len(fake.Requests()))
			}
		})
	}
}
