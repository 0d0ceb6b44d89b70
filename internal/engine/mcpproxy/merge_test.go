package mcpproxy_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/mcpproxy"
	"github.com/mst-eval/mst/transcript"
)

func TestMerge(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	srv := func(id, tool, args string, s int) transcript.ToolCall {
		return transcript.ToolCall{ID: id, Server: "notes", Tool: tool, Arguments: json.RawMessage(args), Started: at(s), Evidence: transcript.EvidenceServer, Result: "server says " + tool}
	}
	cli := func(id, server, tool, args string, s int) transcript.ToolCall {
		return transcript.ToolCall{ID: id, Server: server, Tool: tool, Arguments: json.RawMessage(args), Started: at(s), Result: "client says"}
	}
	ev := mcpproxy.Evidence{
		Servers: []transcript.ServerInfo{{Name: "notes", Tools: []string{"read_note", "write_note"}, Offered: map[string]string{"write_note": "save"}, ServerToolsHash: "abc"}},
		Calls: []transcript.ToolCall{
			srv("mst-1", "read_note", `{"name":"a"}`, 1),
			srv("mst-2", "write_note", `{"text":"x","name":"a"}`, 3),
			srv("mst-3", "read_note", `{"name":"b"}`, 5), // the client never mentions it
		},
	}
	tr := &transcript.Transcript{
		Servers: []transcript.ServerInfo{{Name: "notes"}, {Name: "builtin", Tools: []string{"shell"}}},
		ToolCalls: []transcript.ToolCall{
			cli("c2", "notes", "save", `{"name":"a","text":"x"}`, 3), // renamed, keys in another order
			cli("c1", "notes", "read_note", `{"name":"a"}`, 1),
			cli("c3", "builtin", "shell", `{"cmd":"ls"}`, 2),
			cli("c4", "notes", "read_note", `{"name":"zz"}`, 4), // a second read the server never got
		},
	}
	mcpproxy.Merge(tr, ev, true)

	var ids []string
	for _, c := range tr.ToolCalls {
		ids = append(ids, c.ID+":"+c.Tool+":"+c.Evidence)
	}
	want := []string{"c1:read_note:server", "c3:shell:client", "c2:write_note:server", "mst-3:read_note:server"}
	if len(ids) != len(want) {
		t.Fatalf("tool calls %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("tool calls %v, want %v", ids, want)
		}
	}
	if tr.ToolCalls[0].Result != "server says read_note" {
		t.Errorf("a matched call keeps the client's result %q; the server's record wins", tr.ToolCalls[0].Result)
	}
	if len(tr.ClientToolCalls) != 4 || tr.ClientToolCalls[0].Tool != "save" {
		t.Errorf("the client's account is not kept as reported: %+v", tr.ClientToolCalls)
	}
	if len(tr.Discrepancies) != 2 {
		t.Fatalf("discrepancies %+v", tr.Discrepancies)
	}
	if d := tr.Discrepancies[0]; d.Kind != transcript.Unreported || d.Call != "mst-3" {
		t.Errorf("first discrepancy %+v; want mst-3 unreported", d)
	}
	if d := tr.Discrepancies[1]; d.Kind != transcript.Unconfirmed || d.Call != "c4" {
		t.Errorf("second discrepancy %+v; want c4 unconfirmed", d)
	}
	if len(tr.Servers) != 2 || tr.Servers[0].ServerToolsHash != "abc" || tr.Servers[1].Name != "builtin" {
		t.Errorf("servers %+v; want the proxy's record, then the client's other servers", tr.Servers)
	}

	// Without the client's account (it was abandoned), calls the server got
	// are recorded, and nothing is a discrepancy.
	tr2 := &transcript.Transcript{}
	mcpproxy.Merge(tr2, ev, false)
	if len(tr2.ToolCalls) != 3 || len(tr2.Discrepancies) != 0 {
		t.Errorf("without an account: %d calls, discrepancies %+v", len(tr2.ToolCalls), tr2.Discrepancies)
	}
}

// TestMergeRules pins the rules every client's trials share: a call of a
// tool no server offers (hidden by the variant, or made up) never counts as
// made, and a server that failed by itself makes the trial errored
// (server), while an injected fault does not.
func TestMergeRules(t *testing.T) {
	t.Parallel()
	ev := mcpproxy.Evidence{Servers: []transcript.ServerInfo{{Name: "notes", Tools: []string{"read_note"}}}}
	hidden := transcript.ToolCall{ID: "c1", Tool: "delete_note", Arguments: json.RawMessage(`{}`), Error: "the model called \"delete_note\", which no server offers"}
	tr := &transcript.Transcript{ToolCalls: []transcript.ToolCall{hidden}, Outcome: transcript.Outcome{Status: transcript.Answered}, Answer: "ok"}
	mcpproxy.Merge(tr, ev, true)
	if len(tr.ToolCalls) != 0 {
		t.Errorf("Merge(a call of a hidden tool): tool calls %+v, want none: no server got it", tr.ToolCalls)
	}
	if len(tr.Discrepancies) != 1 || tr.Discrepancies[0].Kind != transcript.Unconfirmed || tr.Discrepancies[0].Tool != "delete_note" {
		t.Errorf("Merge(a call of a hidden tool): discrepancies %+v, want one unconfirmed call of delete_note", tr.Discrepancies)
	}
	if len(tr.ClientToolCalls) != 1 || tr.Outcome.Status != transcript.Answered {
		t.Errorf("Merge(a call of a hidden tool): client calls %+v, outcome %+v; want the account kept and the outcome unchanged", tr.ClientToolCalls, tr.Outcome)
	}

	for _, status := range []string{transcript.Answered, transcript.NoAnswer, transcript.TimedOut} {
		failed := ev
		failed.ServerFailed = "server notes: tool crash: EOF"
		injected := ev
		injected.Calls = []transcript.ToolCall{{ID: "mst-1", Server: "notes", Tool: "read_note", Error: "the server is not running", Injected: "disconnect", Evidence: transcript.EvidenceServer}}
		tr := &transcript.Transcript{Outcome: transcript.Outcome{Status: status}, Answer: "x"}
		mcpproxy.Merge(tr, injected, true)
		if tr.Outcome.Status != status {
			t.Errorf("Merge(%s, an injected disconnect) = %+v, want %s unchanged", status, tr.Outcome, status)
		}
		mcpproxy.Merge(tr, failed, true)
		if tr.Outcome.Status != transcript.Errored || tr.Outcome.Cause != transcript.CauseServer || tr.Answer != "" {
			t.Errorf("Merge(%s, a server that failed) = %+v (answer %q), want errored (server) with no answer", status, tr.Outcome, tr.Answer)
		}
	}
	tr = &transcript.Transcript{Outcome: transcript.Outcome{Status: transcript.Cancelled}}
	mcpproxy.Merge(tr, mcpproxy.Evidence{Servers: ev.Servers, ServerFailed: "gone"}, false)
	if tr.Outcome.Status != transcript.Cancelled {
		t.Errorf("Merge(cancelled, a server that failed) = %+v, want cancelled", tr.Outcome)
	}
}
