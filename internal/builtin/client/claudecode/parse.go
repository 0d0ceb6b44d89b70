package claudecode

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/ground/msgblocks"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// streamLine is the part of a stream-json line this client reads.
type streamLine struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`

	SessionID string `json:"session_id"`

	// system/init
	Model      string   `json:"model"`
	Tools      []string `json:"tools"`
	MCPServers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"mcp_servers"`

	// assistant, user
	Message *struct {
		ID      string            `json:"id"`
		Role    string            `json:"role"`
		Content msgblocks.Content `json:"content"`
		Usage   map[string]any    `json:"usage"`
	} `json:"message"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	ToolUseMeta     []struct {
		ID       string `json:"id"`
		ToolName string `json:"tool_name"`
	} `json:"tool_use_meta"`

	// result
	IsError        bool            `json:"is_error"`
	Result         string          `json:"result"`
	NumTurns       *int            `json:"num_turns"`
	DurationMs     *float64        `json:"duration_ms"`
	DurationAPIMs  *float64        `json:"duration_api_ms"`
	TotalCostUSD   float64         `json:"total_cost_usd"`
	TerminalReason string          `json:"terminal_reason"`
	StopReason     *string         `json:"stop_reason"`
	APIErrorStatus json.RawMessage `json:"api_error_status"`
	Errors         []any           `json:"errors"`
	Usage          *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
	PermissionDenials []any `json:"permission_denials"`
}

// toolNamer maps the CLI's mcp__SERVER__TOOL names back to the server's
// and the tool's own names.
type toolNamer struct {
	prefixes []string // "mcp__SERVER__", longest first
	server   map[string]string
	tools    map[string]map[string]string // server -> normalized tool -> tool
}

func newToolNamer(srvs []servers.Server, infos []transcript.ServerInfo) *toolNamer {
	n := &toolNamer{server: map[string]string{}, tools: map[string]map[string]string{}}
	for _, s := range srvs {
		p := "mcp__" + normalizeName(s.Name) + "__"
		n.prefixes = append(n.prefixes, p)
		n.server[p] = s.Name
	}
	for _, info := range infos {
		m := map[string]string{}
		for _, t := range info.Tools {
			m[normalizeName(t)] = t
		}
		n.tools[info.Name] = m
	}
	sort.Slice(n.prefixes, func(i, j int) bool { return len(n.prefixes[i]) > len(n.prefixes[j]) })
	return n
}

// name returns the server and tool of a CLI tool name; server is
// client.BuiltinServer for the CLI's own tools (Bash, Read, …), whose name
// is kept as it is. meta is the tool's own name as the CLI reported it, if
// it did.
func (n *toolNamer) name(cli, meta string) (server, tool string) {
	for _, p := range n.prefixes {
		if strings.HasPrefix(cli, p) {
			server = n.server[p]
			tool = strings.TrimPrefix(cli, p)
			if meta != "" {
				return server, meta
			}
			if t, ok := n.tools[server][tool]; ok {
				return server, t
			}
			return server, tool
		}
	}
	return client.BuiltinServer, cli
}

// parse turns the CLI's stream-json lines into a trial's result. It sets an
// outcome only when the lines say how the trial ended (a result line, or a
// server that failed to start).
func parse(lines []line, prompt string, srvs []servers.Server, infos []transcript.ServerInfo) client.Result {
	var res client.Result
	res.Messages = append(res.Messages, transcript.Message{Role: "user", Text: prompt})
	tel := map[string]any{}
	namer := newToolNamer(srvs, infos)
	calls := map[string]int{} // tool_use id -> index in res.ToolCalls
	seenMsg := map[string]bool{}
	var failed []string
	var final *streamLine
	var lastText string
	for _, l := range lines {
		var sl streamLine
		if json.Unmarshal(l.text, &sl) != nil {
			continue // not a JSON line: the CLI's own chatter
		}
		if sl.SessionID != "" {
			tel["session_id"] = sl.SessionID
		}
		switch sl.Type {
		case "system":
			if sl.Subtype != "init" {
				continue
			}
			if sl.Model != "" {
				tel["model"] = sl.Model
			}
			for _, ms := range sl.MCPServers {
				if ms.Status != "connected" {
					f := fmt.Sprintf("server %s did not start (the CLI reports it %s", ms.Name, ms.Status)
					if ms.Error != "" {
						f += ": " + ms.Error
					}
					failed = append(failed, f+")")
				}
			}
			res.Servers = serversSeen(infos, sl.Tools, srvs)
		case "assistant":
			if sl.Message == nil {
				continue
			}
			meta := map[string]string{}
			for _, m := range sl.ToolUseMeta {
				meta[m.ID] = m.ToolName
			}
			id := sl.Message.ID
			if id == "" || !seenMsg[id] {
				if id != "" {
					seenMsg[id] = true
				}
				res.Usage.ModelCalls++
				res.Messages = append(res.Messages, transcript.Message{Role: "assistant"})
			} else if last := &res.Messages[len(res.Messages)-1]; last.Role != "assistant" {
				// A later block of a message whose tool results came in
				// between: it continues as a message of its own.
				res.Messages = append(res.Messages, transcript.Message{Role: "assistant"})
			}
			msg := &res.Messages[len(res.Messages)-1]
			for _, b := range sl.Message.Content {
				switch b.Type {
				case "text":
					if msg.Text != "" {
						msg.Text += "\n"
					}
					msg.Text += b.Text
					lastText = b.Text
				case "tool_use":
					server, tool := namer.name(b.Name, meta[b.ID])
					args := b.Input
					if len(args) == 0 {
						args = json.RawMessage(`{}`)
					}
					msg.ToolCalls = append(msg.ToolCalls, b.ID)
					calls[b.ID] = len(res.ToolCalls)
					res.ToolCalls = append(res.ToolCalls, transcript.ToolCall{
						ID: b.ID, Server: server, Tool: tool, Arguments: args, Started: l.at.UTC(),
					})
				}
			}
		case "user":
			if sl.Message == nil {
				continue
			}
			for _, b := range sl.Message.Content {
				if b.Type != "tool_result" {
					continue
				}
				text := msgblocks.ResultText(b.Content)
				res.Messages = append(res.Messages, transcript.Message{Role: "tool", Text: text, ToolCall: b.ToolUseID})
				if i, ok := calls[b.ToolUseID]; ok {
					c := &res.ToolCalls[i]
					c.Result, c.IsError = text, b.IsError
					if b.IsError {
						c.Error = refusal(text)
						if strings.Contains(text, "No such tool available") {
							// A tool the CLI does not have (off, hidden
							// by the variant, or made up): no server and
							// no built-in tool ran it (docs/outcomes.md).
							c.Server, c.Evidence = "", ""
						}
					}
					c.DurationMs = float64(l.at.Sub(c.Started).Microseconds()) / 1000
				}
			}
		case "result":
			sl := sl
			final = &sl
		}
	}
	if final != nil {
		r := final
		if r.NumTurns != nil {
			tel["num_turns"] = *r.NumTurns
		}
		if r.DurationMs != nil {
			tel["duration_ms"] = *r.DurationMs
		}
		if r.DurationAPIMs != nil {
			tel["duration_api_ms"] = *r.DurationAPIMs
		}
		if r.TerminalReason != "" {
			tel["terminal_reason"] = r.TerminalReason
		}
		if r.StopReason != nil {
			tel["stop_reason"] = *r.StopReason
		}
		tel["subtype"] = r.Subtype
		tel["is_error"] = r.IsError
		if s := apiStatus(r.APIErrorStatus); s != "" {
			tel["api_error_status"] = s
		}
		if len(r.PermissionDenials) > 0 {
			tel["permission_denials"] = r.PermissionDenials
			markDenied(res.ToolCalls, calls, r.PermissionDenials)
		}
		if r.Usage != nil {
			u := r.Usage
			res.Usage.InputTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
			res.Usage.OutputTokens = u.OutputTokens
			res.Usage.CachedTokens = u.CacheReadInputTokens
		}
		res.Usage.CostUSD = r.TotalCostUSD
		res.Outcome = outcome(r, lastText)
		if res.Outcome.Status == transcript.Answered {
			res.Answer = r.Result
		}
	}
	if len(failed) > 0 {
		res.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseServer, Detail: strings.Join(failed, "; ")}
		res.Answer = ""
	}
	if len(tel) > 0 {
		res.ClientTelemetry = tel
	}
	return res
}

// refusal says why the CLI refused a tool call without running it (a tool
// that is off, a permission it did not grant, arguments it rejected), read
// from the error result it gave the model: the CLI wraps its own errors in
// <tool_use_error>. It is "" for an error the tool itself returned.
func refusal(text string) string {
	const open, end = "<tool_use_error>", "</tool_use_error>"
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, open) {
		return ""
	}
	t = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(t, open), end))
	if t == "" {
		t = "no reason given"
	}
	return "refused by the Claude Code CLI: " + t
}

// markDenied marks the calls the result line lists as permission denials
// (by tool_use_id) as failed calls, where their result did not already say
// so.
func markDenied(tcs []transcript.ToolCall, calls map[string]int, denials []any) {
	for _, d := range denials {
		m, _ := d.(map[string]any)
		id, _ := m["tool_use_id"].(string)
		i, ok := calls[id]
		if !ok || tcs[i].Error != "" {
			continue
		}
		tcs[i].IsError = true
		tcs[i].Error = "refused by the Claude Code CLI: permission denied"
		if r := strings.TrimSpace(tcs[i].Result); r != "" {
			tcs[i].Error += ": " + r
		}
	}
}

// apiStatus is the result line's api_error_status as text, "" when null.
func apiStatus(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return ""
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	return s
}

// outcome reads how the CLI ended. Its subtype says "success" even when
// the API failed, so is_error and terminal_reason decide.
func outcome(r *streamLine, lastText string) transcript.Outcome {
	reason := r.TerminalReason
	if r.Subtype == "error_max_turns" || reason == "max_turns" {
		return transcript.Outcome{Status: transcript.NoAnswer, Detail: "the CLI's --max-turns (maxActions) was reached before an answer"}
	}
	if r.IsError || strings.HasPrefix(r.Subtype, "error") {
		detail := strings.TrimSpace(r.Result)
		if detail == "" {
			detail = strings.TrimSpace(lastText)
		}
		if len(r.Errors) > 0 {
			if b, err := json.Marshal(r.Errors); err == nil {
				detail = strings.TrimSpace(detail + " " + string(b))
			}
		}
		if s := apiStatus(r.APIErrorStatus); s != "" {
			detail = fmt.Sprintf("API error status %s: %s", s, detail)
		}
		if reason != "" {
			detail += " (terminal reason " + reason + ")"
		}
		cause := transcript.CauseProvider
		if r.Subtype != "success" && apiStatus(r.APIErrorStatus) == "" && !strings.Contains(strings.ToLower(reason), "api") {
			// error_during_execution and the like: the CLI itself failed.
			cause = transcript.CauseClient
		}
		return transcript.Outcome{Status: transcript.Errored, Cause: cause, Detail: detail}
	}
	if strings.TrimSpace(r.Result) == "" {
		d := "the CLI ended without answer text"
		if reason != "" {
			d += " (terminal reason " + reason + ")"
		}
		return transcript.Outcome{Status: transcript.NoAnswer, Detail: d}
	}
	return transcript.Outcome{Status: transcript.Answered}
}

// serversSeen is the transcript's server list: what Open learned, with the
// tool names the CLI offered filled in for a server Open could not list.
func serversSeen(infos []transcript.ServerInfo, cliTools []string, srvs []servers.Server) []transcript.ServerInfo {
	out := make([]transcript.ServerInfo, len(infos))
	copy(out, infos)
	namer := newToolNamer(srvs, infos)
	for i := range out {
		if len(out[i].Tools) > 0 {
			continue
		}
		var tools []string
		for _, t := range cliTools {
			if s, name := namer.name(t, ""); s == out[i].Name {
				tools = append(tools, name)
			}
		}
		out[i].Tools = tools
	}
	return out
}
