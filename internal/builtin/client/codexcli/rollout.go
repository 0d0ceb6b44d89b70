package codexcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// The CLI writes a rollout file per thread,
// CODEX_HOME/sessions/YYYY/MM/DD/rollout-TIME-THREAD.jsonl: every item the
// model produced (its tool calls with their call ids, and what the CLI
// answered each), the CLI's own item events, and one token_usage_record per
// model response. Its --json event stream leaves some calls out: a call
// of a tool the CLI does not offer ("unsupported call"), a shell command
// its sandbox denied. The rollout is read once the CLI has exited, to add
// those calls (as errors, with what the CLI told the model) and to count
// the model calls.

// rolloutLine is one line of a rollout file.
type rolloutLine struct {
	Timestamp time.Time       `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

type rolloutPayload struct {
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	CallID    string          `json:"call_id"`
	Action    json.RawMessage `json:"action"`
	Output    json.RawMessage `json:"output"`
	Item      *struct {
		ID string `json:"id"`
	} `json:"item"`
}

// rolloutCall is a tool call the model made, as the rollout records it.
type rolloutCall struct {
	id, server, tool string
	args             json.RawMessage
	at               time.Time
}

// namespaces maps the CLI's tool namespace of each server (mcp__ and the
// name with every character but letters, digits and _ made _) to the
// server's name.
func namespaces(srvs []servers.Server) map[string]string {
	m := map[string]string{}
	for _, s := range srvs {
		m["mcp__"+toolIdent(s.Name)] = s.Name
	}
	return m
}

// toolIdent is name as the CLI puts it in a tool or namespace name.
func toolIdent(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// findRollout returns the rollout file of thread under home, or "".
func findRollout(home, thread string) (string, error) {
	var found string
	suffix := "-" + thread + ".jsonl"
	err := filepath.WalkDir(filepath.Join(home, "sessions"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "rollout-") && strings.HasSuffix(d.Name(), suffix) {
			found = path
			return fs.SkipAll
		}
		return nil
	})
	return found, err
}

// rollout reads the rollout file of p's thread under home into p, then
// removes it: a session runs many trials, and the file holds the whole
// conversation.
func (p *parser) rollout(home string) error {
	path, err := findRollout(home, p.threadID)
	if err != nil || path == "" {
		return err
	}
	defer os.Remove(path)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	p.readRollout(b)
	return nil
}

// readRollout adds what a rollout file says to p: the model calls, and
// the tool calls the event stream did not report.
func (p *parser) readRollout(b []byte) {
	var calls []rolloutCall
	reported := map[string]bool{}
	outputs := map[string]string{}
	responses := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l rolloutLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		if l.Type == "token_usage_record" {
			responses++
			continue
		}
		var pl rolloutPayload
		if json.Unmarshal(l.Payload, &pl) != nil {
			continue
		}
		switch {
		case l.Type == "event_msg" && (pl.Type == "item_started" || pl.Type == "item_completed") && pl.Item != nil:
			reported[pl.Item.ID] = true
		case l.Type != "response_item" || pl.CallID == "":
		case pl.Type == "function_call":
			c := rolloutCall{id: pl.CallID, server: client.BuiltinServer, tool: pl.Name, args: rawOr(pl.Arguments), at: l.Timestamp}
			if pl.Namespace != "" {
				c.server = pl.Namespace
				if s, ok := p.namespaces[pl.Namespace]; ok {
					c.server = s
				}
			}
			calls = append(calls, c)
		case pl.Type == "custom_tool_call":
			args, _ := json.Marshal(map[string]string{"input": pl.Input})
			calls = append(calls, rolloutCall{id: pl.CallID, server: client.BuiltinServer, tool: pl.Name, args: args, at: l.Timestamp})
		case pl.Type == "local_shell_call":
			calls = append(calls, rolloutCall{id: pl.CallID, server: client.BuiltinServer, tool: "local_shell", args: rawOr(string(pl.Action)), at: l.Timestamp})
		case pl.Type == "function_call_output" || pl.Type == "custom_tool_call_output":
			outputs[pl.CallID] = outputText(pl.Output)
		}
	}
	if responses > p.modelCalls {
		p.modelCalls = responses
	}
	p.merge(calls, reported, outputs)
}

// merge puts the rollout's calls that the event stream did not report
// among p's calls, in the order the model made them, as errors carrying
// what the CLI answered the model; a reported built-in call takes the
// tool name and arguments the model gave (the event stream has only the
// command line).
func (p *parser) merge(calls []rolloutCall, reported map[string]bool, outputs map[string]string) {
	used := make([]bool, len(p.calls))
	var out []transcript.ToolCall
	var added []int // indexes in out
	take := func(j int) {
		for k := 0; k <= j; k++ {
			if !used[k] {
				used[k] = true
				out = append(out, p.calls[k])
			}
		}
	}
	for _, rc := range calls {
		if reported[rc.id] {
			j := p.matching(rc, used)
			if j < 0 {
				continue
			}
			if rc.server == client.BuiltinServer {
				p.calls[j].Tool = rc.tool
				if len(rc.args) > 0 {
					p.calls[j].Arguments = rc.args
				}
			}
			take(j)
			continue
		}
		if p.overLimit && len(out)+len(p.calls)-countUsed(used) >= p.maxActions {
			// A call past maxActions that the CLI wrote down before MST
			// stopped it: the stream's parser left it out on purpose.
			continue
		}
		output, answered := outputs[rc.id]
		reason := strings.TrimSpace(output)
		if !answered || reason == "" {
			reason = "no answer was recorded"
		}
		c := transcript.ToolCall{
			ID: rc.id, Server: rc.server, Tool: rc.tool, Arguments: rc.args, Started: rc.at,
			Result: output, IsError: true,
			Error: "the CLI refused or failed the call without reporting it in its event stream; it answered the model: " + cut(reason, 2000),
		}
		switch {
		case strings.HasPrefix(reason, "unsupported call"):
			// A tool the CLI does not have (hidden by the variant, or made
			// up by the model): no server and no built-in tool ran it, so
			// it is no server's call (mcpproxy.Merge lists it unconfirmed).
			c.Server = ""
		case rc.server == client.BuiltinServer:
			c.Evidence = transcript.EvidenceClient
		}
		added = append(added, len(out))
		out = append(out, c)
	}
	if len(added) == 0 {
		return
	}
	take(len(p.calls) - 1)
	p.calls = out
	// Each added call goes into the conversation after the tool message
	// of the call before it (or after the prompt), as an assistant turn
	// of its own and its answer.
	for _, i := range added {
		c := out[i]
		at := 1
		if i > 0 {
			prev := out[i-1].ID
			for k, m := range p.messages {
				if m.Role == "tool" && m.ToolCall == prev {
					at = k + 1
				}
			}
		}
		at = min(at, len(p.messages))
		msgs := []transcript.Message{{Role: "assistant", ToolCalls: []string{c.ID}}, {Role: "tool", Text: "error: " + c.Error, ToolCall: c.ID}}
		p.messages = append(p.messages[:at], append(msgs, p.messages[at:]...)...)
	}
	p.callIndex = map[string]int{}
	for i, c := range p.calls {
		p.callIndex[c.ID] = i
	}
}

// countUsed counts the true entries of used.
func countUsed(used []bool) int {
	n := 0
	for _, u := range used {
		if u {
			n++
		}
	}
	return n
}

// matching returns the first call of p not yet used that rc may be: the
// same server and tool, or for a built-in call any built-in call (the
// event stream does not name the tool); -1 if none.
func (p *parser) matching(rc rolloutCall, used []bool) int {
	for j, c := range p.calls {
		if used[j] || c.Server != rc.server {
			continue
		}
		if c.Server == client.BuiltinServer || c.Tool == rc.tool || toolIdent(c.Tool) == rc.tool {
			return j
		}
	}
	return -1
}

// rawOr returns s as raw JSON, or {} when it is empty or not JSON.
func rawOr(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		if s == "" {
			return json.RawMessage(`{}`)
		}
		b, _ := json.Marshal(map[string]string{"raw": s})
		return b
	}
	return json.RawMessage(s)
}

// outputText reads a tool output that is a string or a list of parts with
// text.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var texts []string
		for _, pt := range parts {
			if pt.Text != "" {
				texts = append(texts, pt.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return string(raw)
}

// cut shortens s to at most n bytes, at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}
