package mcpproxy

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/mst-eval/mst/transcript"
)

// Merge folds a trial's evidence into its transcript, whose ToolCalls and
// Servers hold the client's account. Afterwards:
//
//   - Servers describe the proxied servers as the proxy found them (the
//     client's description of any other server stays);
//   - ToolCalls are the proxy's record of every call that reached a proxy,
//     under the servers' tool names, each with the id the client gave it
//     when the client reports it, plus the client's calls of servers no
//     proxy stood in front of (its built-in tools), in the order they
//     started;
//   - ClientToolCalls keep the client's account as it was;
//   - Discrepancies list the calls the client reports that never reached a
//     server (calls of a tool no server offers among them: those are never
//     in ToolCalls, so graders do not count them as made), and (when
//     reported is true: the client gave an account) the calls a server got
//     that the client does not report;
//   - a trial in which a server failed by itself (ev.ServerFailed) is
//     errored (server), whatever the client made of it.
//
// A client call is matched to the first unmatched proxy call of the same
// server and tool with the same arguments (compared as JSON values); a
// client call whose account has no arguments, to the first of the same
// server and tool. A call reported with other arguments than the server
// got is both unconfirmed and unreported.
func Merge(t *transcript.Transcript, ev Evidence, reported bool) {
	proxied := map[string]map[string]string{} // server → offered name → server name
	for _, s := range ev.Servers {
		inv := map[string]string{}
		for real, offered := range s.Offered {
			inv[offered] = real
		}
		proxied[s.Name] = inv
	}
	if len(proxied) == 0 {
		return
	}
	client := t.ToolCalls
	t.ClientToolCalls = slices.Clone(client)

	var out []transcript.ToolCall
	taken := make([]bool, len(ev.Calls))
	var unconfirmed []transcript.ToolCall
	pending := []int{} // indexes into client of proxied calls not yet matched
	for i, c := range client {
		if c.Server == "" {
			// A tool no server offers (the variant hides it, or the model
			// made its name up): the client refused it, no server got it.
			unconfirmed = append(unconfirmed, c)
			continue
		}
		inv, ok := proxied[c.Server]
		if !ok {
			if c.Evidence == "" {
				c.Evidence = transcript.EvidenceClient
			}
			out = append(out, c)
			continue
		}
		if real, renamed := inv[c.Tool]; renamed {
			client[i].Tool = real
		}
		pending = append(pending, i)
	}
	match := func(c transcript.ToolCall, sameArgs bool) int {
		for j, s := range ev.Calls {
			if taken[j] || s.Server != c.Server || s.Tool != c.Tool {
				continue
			}
			if sameArgs && !equalJSON(s.Arguments, c.Arguments) {
				continue
			}
			if !sameArgs && !noArgs(c.Arguments) {
				continue
			}
			return j
		}
		return -1
	}
	matched := map[int]int{} // client index → evidence index
	for _, sameArgs := range []bool{true, false} {
		for _, i := range pending {
			if _, done := matched[i]; done {
				continue
			}
			if j := match(client[i], sameArgs); j >= 0 {
				taken[j] = true
				matched[i] = j
			}
		}
	}
	for _, i := range pending {
		j, ok := matched[i]
		if !ok {
			unconfirmed = append(unconfirmed, client[i])
			continue
		}
		s := ev.Calls[j]
		if client[i].ID != "" {
			s.ID = client[i].ID
		}
		out = append(out, s)
	}
	for j, s := range ev.Calls {
		if taken[j] {
			continue
		}
		out = append(out, s)
		if reported {
			t.Discrepancies = append(t.Discrepancies, transcript.Discrepancy{
				Kind: transcript.Unreported, Server: s.Server, Tool: s.Tool, Call: s.ID,
				Detail: "the server got this call, but the client does not report it",
			})
		}
	}
	for _, c := range unconfirmed {
		detail := "the client reports this call, but it never reached the server"
		if c.Server == "" {
			detail = "the client reports this call of a tool that no server offers (the variant hides it, or the model made it up): no server got it"
		}
		t.Discrepancies = append(t.Discrepancies, transcript.Discrepancy{
			Kind: transcript.Unconfirmed, Server: c.Server, Tool: c.Tool, Call: c.ID,
			Detail: detail,
		})
	}
	slices.SortStableFunc(out, func(a, b transcript.ToolCall) int { return a.Started.Compare(b.Started) })
	t.ToolCalls = out

	servers := slices.Clone(ev.Servers)
	for _, s := range t.Servers {
		if _, ok := proxied[s.Name]; !ok {
			servers = append(servers, s)
		}
	}
	t.Servers = servers

	// A server that failed by itself makes the trial say nothing about the
	// variant, whichever client ran it; an injected fault never does.
	if ev.ServerFailed != "" {
		switch t.Outcome.Status {
		case transcript.Answered, transcript.NoAnswer, transcript.TimedOut, transcript.Errored:
			if t.Outcome.Status != transcript.Errored || t.Outcome.Cause != transcript.CauseServer {
				t.Answer = ""
				t.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseServer,
					Detail: "a server failed during the trial: " + ev.ServerFailed}
			}
		}
	}
}

// equalJSON reports whether a and b are the same JSON value; an empty or
// null value equals {} (no arguments).
func equalJSON(a, b json.RawMessage) bool {
	norm := func(r json.RawMessage) any {
		r = bytes.TrimSpace(r)
		if len(r) == 0 || string(r) == "null" {
			return map[string]any{}
		}
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return string(r)
		}
		return v
	}
	x, _ := json.Marshal(norm(a))
	y, _ := json.Marshal(norm(b))
	return bytes.Equal(x, y)
}

// noArgs reports whether a client's account of a call gives no arguments.
func noArgs(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null" || string(r) == "{}"
}
