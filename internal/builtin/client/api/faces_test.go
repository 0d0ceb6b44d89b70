package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/api"
	"github.com/mst-eval/mst/internal/engine/mcpproxy"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Clean()
	os.Exit(code)
}

// TestProxyFaces runs the same trials of the api client through both faces
// of MST's proxy, its MCP endpoints over HTTP (Trial.Servers) and its
// in-process connections (Trial.Conns, what the worker gives the api
// client), and compares what a transcript records of them, timings aside:
// the tools offered to the model and in which order, the calls under the
// servers' names with offeredAs, evidence, simulated and injected, the
// client's own account, discrepancies, the servers' tool hashes, the
// outcome with its error text.
func TestProxyFaces(t *testing.T) {
	t.Parallel()
	bin, err := testbin.Build(testbin.Options{}, testbin.TestServer)
	if err != nil {
		t.Fatal(err)
	}
	server := func(name string, args ...string) servers.Server {
		return servers.Server{Name: name, Command: testbin.Path(bin, testbin.TestServer), Args: args}
	}
	// notes: renamed, hidden and re-described tools, a dry run, faults;
	// old: an older protocol version and 40+ tools, some named outside
	// what providers accept.
	notes := func(faults ...servers.Fault) servers.Server {
		s := server("notes", "--notes", t.TempDir())
		s.Tools = map[string]servers.ToolOverride{
			"echo":                {Name: "repeat", Description: ptr("Say the text back."), Parameters: map[string]string{"text": "What to say."}},
			"sleep":               {Hidden: true},
			testserver.DeleteNote: {Hidden: true},
		}
		s.Writes, s.DryRun = []string{testserver.WriteNote}, servers.DryRunDeclared
		s.Faults = append([]servers.Fault{
			{Kind: servers.FaultError, Rate: 1, Tools: []string{testserver.TouchNote}, Message: "quota exceeded"},
			{Kind: servers.FaultLatency, Rate: 0.5, Delay: time.Millisecond},
		}, faults...)
		return s
	}
	old := server("old", "--protocol", "2024-11-05", "--many")
	// Arguments as a model may write them: spaces, characters an HTML
	// escaper would touch, non-ASCII.
	spaced := json.RawMessage(`{ "text" : "a <b> & \"c\" é" }`)
	trials := []struct {
		name    string
		servers []servers.Server
		calls   [][]providertest.Call // the model's turns of tool calls
	}{
		{"answered", []servers.Server{notes(), old}, [][]providertest.Call{
			{{Tool: "repeat", Arguments: spaced}, {Tool: testserver.WriteNote, Arguments: map[string]any{"name": "a", "text": "b"}}},
			{{Tool: testserver.TouchNote, Arguments: map[string]any{"name": "a"}}, {Tool: "fail", Arguments: map[string]any{"reason": "disk full"}}},
			{{Tool: testserver.UnicodeTool, Arguments: map[string]any{"text": "Zürich"}}, {Tool: testserver.ReadNote, Arguments: nil}},
		}},
		{"protocol error", []servers.Server{notes(servers.Fault{Kind: servers.FaultProtocol, Rate: 1, AfterCalls: 1, Message: "backend <unavailable>"})}, [][]providertest.Call{
			{{Tool: "repeat", Arguments: spaced}}, {{Tool: "repeat", Arguments: spaced}},
		}},
		{"disconnect", []servers.Server{notes(servers.Fault{Kind: servers.FaultDisconnect, Rate: 1, AfterCalls: 1})}, [][]providertest.Call{
			{{Tool: "repeat", Arguments: spaced}}, {{Tool: "fail", Arguments: map[string]any{"reason": "x"}}},
		}},
		{"hidden tool", []servers.Server{notes()}, [][]providertest.Call{
			{{Tool: testserver.DeleteNote, Arguments: map[string]any{"name": "a"}}, {Tool: "repeat", Arguments: spaced}},
		}},
		{"server crash", []servers.Server{notes(), old}, [][]providertest.Call{
			{{Tool: "crash"}},
		}},
	}
	var script providertest.Script
	for _, tr := range trials {
		c := providertest.Conversation{Match: tr.name}
		for _, calls := range tr.calls {
			c.Turns = append(c.Turns, providertest.Turn{ToolCalls: calls})
		}
		c.Turns = append(c.Turns, providertest.Turn{Text: "Done."})
		script.Conversations = append(script.Conversations, c)
	}
	w := wires[0] // anthropic
	host, err := mcpproxy.NewHost()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })

	// run runs one trial on one face, as the worker does, and returns its
	// transcript and the tools each model request offered.
	run := func(t *testing.T, inProcess bool, i int) (transcript.Transcript, [][]string) {
		tr := trials[i]
		fake := providertest.New(t, script)
		names := make([]servers.Server, len(tr.servers))
		for j, s := range tr.servers {
			names[j] = s.Declaration()
		}
		sess, err := api.Definition(providers).Open(t.Context(), client.OpenParams{
			Variant: "v", Model: w.model, Options: json.RawMessage(w.options(fake.URL)),
			Servers: names, Proxied: true, Env: w.env, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		key := transcript.Key{Case: tr.name, Variant: "v", Trial: 1}
		set, err := host.Open(t.Context(), tr.servers, mcpproxy.Options{Trial: key.String()})
		if err != nil {
			t.Fatal(err)
		}
		trial := client.Trial{Key: key, Prompt: "Please do it: " + tr.name}
		if inProcess {
			trial.Conns = set.Conns()
		} else {
			trial.Servers = set.Servers()
		}
		res, err := sess.Run(t.Context(), trial)
		ev := set.Evidence()
		set.Close()
		tt := transcript.Transcript{
			Servers: res.Servers, Messages: res.Messages, ToolCalls: res.ToolCalls,
			Answer: res.Answer, Usage: res.Usage, Outcome: res.Outcome,
		}
		if err != nil {
			tt.Outcome = transcript.Outcome{Status: transcript.Errored, Detail: err.Error()}
		}
		mcpproxy.Merge(&tt, ev, err == nil)
		for _, calls := range [][]transcript.ToolCall{tt.ToolCalls, tt.ClientToolCalls} {
			for k := range calls {
				calls[k].Started, calls[k].DurationMs = time.Time{}, 0
			}
		}
		var offered [][]string
		for _, r := range fake.Requests() {
			offered = append(offered, r.Tools)
		}
		return tt, offered
	}

	for i, tr := range trials {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			overHTTP, httpTools := run(t, false, i)
			inProcess, localTools := run(t, true, i)
			if d := cmp.Diff(overHTTP, inProcess); d != "" {
				t.Errorf("the transcript through the in-process face differs from the one over HTTP (-http +in-process):\n%s", d)
			}
			if d := cmp.Diff(httpTools, localTools); d != "" {
				t.Errorf("the model was offered other tools through the in-process face (-http +in-process):\n%s", d)
			}
			checkFaceTrial(t, tr.name, inProcess)
		})
	}
}

// checkFaceTrial checks that a trial of TestProxyFaces recorded what it is
// there to compare, so that two empty transcripts do not pass.
func checkFaceTrial(t *testing.T, name string, tt transcript.Transcript) {
	t.Helper()
	byTool := map[string]transcript.ToolCall{}
	for _, c := range tt.ToolCalls {
		byTool[c.Tool] = c
	}
	if len(tt.Servers) == 0 || tt.Servers[0].ServerToolsHash == "" || tt.Servers[0].Offered["echo"] != "repeat" {
		t.Errorf("%s: servers %+v; want the proxy's record, echo offered as repeat", name, tt.Servers)
	}
	if got, ok := byTool["echo"]; name != "server crash" && (!ok || got.OfferedAs != "repeat" || got.Evidence != transcript.EvidenceServer) {
		t.Errorf("%s: the call of repeat is recorded as %+v", name, got)
	}
	switch name {
	case "answered":
		if tt.Outcome.Status != transcript.Answered || len(tt.ToolCalls) != 6 || len(tt.Discrepancies) > 0 {
			t.Fatalf("outcome %+v, %d calls, discrepancies %+v", tt.Outcome, len(tt.ToolCalls), tt.Discrepancies)
		}
		if !byTool[testserver.WriteNote].Simulated || byTool[testserver.TouchNote].Injected != servers.FaultError || !byTool["fail"].IsError {
			t.Errorf("simulated, injected and failed calls: %+v", tt.ToolCalls)
		}
		if got := byTool["echo"].Arguments; string(got) != `{"text":"a <b> & \"c\" é"}` {
			t.Errorf("the server got the arguments %s; want them compact, unescaped", got)
		}
		if len(tt.Servers) != 2 || tt.Servers[1].ProtocolVersion != "2024-11-05" || len(tt.Servers[1].Tools) < testserver.ManyTools {
			t.Errorf("the old server is recorded as %+v", tt.Servers[1:])
		}
	case "hidden tool":
		// No server got the call of the hidden tool: it is not among the
		// calls graders count, only in the client's account, unconfirmed.
		if tt.Outcome.Status != transcript.Answered {
			t.Errorf("%s: outcome %+v; want answered", name, tt.Outcome)
		}
		if _, ok := byTool[testserver.DeleteNote]; ok || len(tt.ToolCalls) != 1 {
			t.Errorf("%s: tool calls %+v; want only the call of repeat", name, tt.ToolCalls)
		}
		if len(tt.Discrepancies) != 1 || tt.Discrepancies[0].Kind != transcript.Unconfirmed || tt.Discrepancies[0].Tool != testserver.DeleteNote {
			t.Errorf("%s: discrepancies %+v; want the hidden call unconfirmed", name, tt.Discrepancies)
		}
	case "protocol error", "disconnect":
		// An injected fault is the condition under test: the model gets
		// the failure as an error result and the trial goes on.
		want := map[string]string{"protocol error": "backend <unavailable>", "disconnect": "not running"}[name]
		if tt.Outcome.Status != transcript.Answered || tt.Answer != "Done." {
			t.Errorf("%s: outcome %+v, answer %q; want answered: an injected fault does not end the trial", name, tt.Outcome, tt.Answer)
		}
		var failed transcript.ToolCall
		for _, c := range tt.ToolCalls {
			if c.Injected != "" && c.Injected != "latency 1ms" {
				failed = c
			}
		}
		if !strings.Contains(failed.Error, want) || failed.Evidence != transcript.EvidenceServer {
			t.Errorf("%s: the injected call is recorded as %+v; want its error to say %q", name, failed, want)
		}
		sawError := false
		for _, m := range tt.Messages {
			sawError = sawError || (m.Role == "tool" && strings.Contains(m.Text, want))
		}
		if !sawError {
			t.Errorf("%s: the model was not given the error %q: messages %+v", name, want, tt.Messages)
		}
	default:
		if tt.Outcome.Status != transcript.Errored || tt.Outcome.Cause != transcript.CauseServer {
			t.Errorf("%s: outcome %+v; want errored, cause server", name, tt.Outcome)
		}
		t.Logf("%s: %s", name, tt.Outcome.Detail)
		if !strings.Contains(tt.Outcome.Detail, "crash") {
			t.Errorf("%s: outcome %q; want it to say why the server failed", name, tt.Outcome.Detail)
		}
	}
}

func ptr(s string) *string { return &s }
