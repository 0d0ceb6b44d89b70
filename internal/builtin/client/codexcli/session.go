package codexcli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/cliproc"
	"github.com/mst-eval/mst/transcript"
)

type session struct {
	params  client.OpenParams
	opts    Options
	bin     string
	dir     string // the session folder, HOME of the CLI; removed at Close
	home    string // CODEX_HOME, inside dir
	keyEnv  string // the variable of params.Env holding the key
	version string
	infos   []transcript.ServerInfo
	// extraArgs are added before the prompt, onStart is told the CLI's
	// process id, and afterRun is called with the trial's folder once the
	// CLI has exited, before anything of the trial is removed; tests use
	// them.
	extraArgs []string
	onStart   func(pid int)
	afterRun  func(trialDir string)

	closeOnce sync.Once
}

// env is the CLI's environment: a minimal one, then servers (the values
// a trial's servers need, which the trial's config names: see
// serversTOML), then HOME (the session folder), the variant's key (and no
// other secret of the run) and CODEX_HOME.
func (s *session) env(servers map[string]string) []string {
	return cliproc.Env(s.bin, platformEnv, servers, map[string]string{"HOME": s.dir}, cliproc.Only(s.params.Env, s.keyEnv), map[string]string{"CODEX_HOME": s.home})
}

// baseEnv is the CLI's environment before any server's values, as a map.
func (s *session) baseEnv() map[string]string {
	m := map[string]string{}
	for _, kv := range s.env(nil) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Reset has nothing to do: every trial runs a fresh codex exec.
func (s *session) Reset(context.Context) error { return nil }

// Close removes the session folder, CODEX_HOME included.
func (s *session) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.dir != "" {
			err = os.RemoveAll(s.dir)
		}
	})
	return err
}

// Run runs one trial: codex exec --json with the prompt, in a fresh folder
// of its own (its working folder, the only one its shell may write to when
// builtinTools turns the shell on), with the trial's servers in a config
// layer of its own, read into the transcript as its events arrive; then
// the CLI's record of the thread (its rollout file) adds the calls the
// event stream left out and the count of model calls. When ctx ends the
// CLI's tree is stopped and Run returns what it had, errored; MST decides
// whether that was a timeout or a cancellation.
func (s *session) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	srvs := s.params.TrialServers(t)
	layer, srvEnv, err := serversTOML(srvs, s.baseEnv())
	if err != nil {
		return client.Result{}, fmt.Errorf("codex-cli: %w", err)
	}
	cwd, err := os.MkdirTemp(s.dir, "trial-")
	if err != nil {
		return client.Result{}, fmt.Errorf("codex-cli: creating the trial folder: %w", err)
	}
	defer os.RemoveAll(cwd)
	// The trial's servers are a profile: CODEX_HOME/NAME.config.toml,
	// layered on config.toml by -p NAME.
	profile := "mst-" + filepath.Base(cwd)
	profilePath := filepath.Join(s.home, profile+".config.toml")
	if err := os.WriteFile(profilePath, []byte(layer), 0o600); err != nil {
		return client.Result{}, fmt.Errorf("codex-cli: writing the trial's config: %w", err)
	}
	defer os.Remove(profilePath)

	// --strict-config: a switch this version of the CLI does not know
	// (a built-in tool MST turns off, say) fails the trial instead of
	// being ignored. No --ephemeral: the rollout file is read after the
	// run (see rollout.go).
	args := []string{"exec", "--json", "--skip-git-repo-check", "--strict-config", "-p", profile,
		"--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps", "--disable", "tool_suggest"}
	args = append(args, s.extraArgs...)
	// "-" has codex exec read the prompt from stdin: argv is visible to
	// every user of the machine.
	args = append(args, "-")
	p := newParser(t.Prompt, s.opts.MaxActions)
	p.maxReconnects = *s.opts.RequestMaxRetries
	p.namespaces = namespaces(srvs)
	proc, err := cliproc.Start(ctx, cliproc.Command{
		Path: s.bin, Args: args, Stdin: t.Prompt, Env: s.env(srvEnv), Dir: cwd,
		StderrTail: 16 << 10, Started: s.onStart,
		Line:     func(at time.Time, text []byte) { p.line(text, at.UTC()) },
		StopWhen: func() bool { return p.overLimit || p.unreachable },
	})
	if err != nil {
		return client.Result{}, fmt.Errorf("codex-cli: starting %s: %w", s.bin, err)
	}
	waitErr := proc.Wait()
	stderr := proc.Stderr()
	if s.afterRun != nil {
		s.afterRun(cwd)
	}
	if p.threadID != "" {
		if err := p.rollout(s.home); err != nil {
			p.warnings = append(p.warnings, "reading the CLI's rollout file: "+err.Error())
		}
	}

	res := p.result()
	res.Servers = s.infos
	res.ClientVersion = s.version
	if w := stderrWarnings(stderr); len(w) > 0 {
		warnings, _ := res.ClientTelemetry["warnings"].([]string)
		res.ClientTelemetry["warnings"] = append(warnings, w...)
	}
	res.Outcome = s.outcome(ctx, p, waitErr, stderr)
	if ctx.Err() != nil {
		res.WaitingOn = p.waiting
	}
	return res, nil
}

// outcome decides how the trial ended, in order: the trial's context
// (errored: MST classifies it), the maxActions limit, an API error in the
// stream, a required server that did not start, any other failure of the
// CLI, and then the answer.
func (s *session) outcome(ctx context.Context, p *parser, waitErr error, stderr string) transcript.Outcome {
	switch {
	case ctx.Err() != nil:
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: "codex was stopped before it answered: " + ctx.Err().Error()}
	case p.overLimit:
		return transcript.Outcome{Status: transcript.NoAnswer, Detail: fmt.Sprintf("maxActions (%d) reached: the model asked for another tool call", s.opts.MaxActions)}
	case p.apiError != "":
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseProvider, Detail: p.apiError}
	}
	if m := serverFailedRE.FindStringSubmatch(stderr); m != nil {
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseServer, Detail: "a required MCP server failed to start: " + strings.TrimSpace(m[1])}
	}
	if waitErr != nil {
		detail := "codex exec failed: " + waitErr.Error()
		if t := cliproc.Tail(stderr, 2000); t != "" {
			detail += ": " + t
		}
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: detail}
	}
	if strings.TrimSpace(p.answer) == "" {
		return transcript.Outcome{Status: transcript.NoAnswer, Detail: "codex ended its turn without an answer"}
	}
	return transcript.Outcome{Status: transcript.Answered}
}

// serverFailedRE finds the CLI's report of a required MCP server that did
// not start ("required MCP servers failed to initialize: everything: No such
// file or directory").
var serverFailedRE = regexp.MustCompile(`required MCP servers? failed to initialize:\s*([^\n]*?)(?:\s*\(code -?\d+\))?\s*(?:\n|$)`)

// stderrWarnings returns the CLI's WARNING lines.
func stderrWarnings(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "WARNING") {
			out = append(out, l)
		}
	}
	return out
}

// event is one line of codex exec --json.
type event struct {
	Type     string          `json:"type"`
	ThreadID string          `json:"thread_id"`
	Message  string          `json:"message"`
	Item     *item           `json:"item"`
	Usage    *usage          `json:"usage"`
	Error    json.RawMessage `json:"error"`
}

type item struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Message   string          `json:"message"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"is_error"`
	} `json:"result"`
	Error  json.RawMessage `json:"error"`
	Status string          `json:"status"`
	// command_execution (the shell)
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	// file_change (apply_patch)
	Changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	// web_search
	Query string `json:"query"`
}

type usage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
}

// parser reads the event stream into a result.
type parser struct {
	maxActions int
	messages   []transcript.Message
	calls      []transcript.ToolCall
	callIndex  map[string]int
	answer     string
	usage      transcript.Usage
	threadID   string
	warnings   []string
	apiError   string
	// waiting is what the CLI waits on after its last event (waitingAfter).
	waiting   string
	unparsed  int
	actions   int
	overLimit bool
	// reconnects counts the CLI's "waiting for network" reports: it waits
	// for a provider it cannot reach for ever, whatever its retry
	// settings, so past maxReconnects (requestMaxRetries) the trial ends
	// (unreachable) as the provider's failure.
	reconnects, maxReconnects int
	unreachable               bool
	// namespaces maps the CLI's tool namespace of each of the trial's
	// servers (mcp__NAME) to the server's name.
	namespaces map[string]string
	modelCalls int
}

func newParser(prompt string, maxActions int) *parser {
	return &parser{
		maxActions: maxActions,
		messages:   []transcript.Message{{Role: "user", Text: prompt}},
		callIndex:  map[string]int{},
	}
}

// isWarning reports whether an error item is one the CLI goes on after.
func isWarning(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "model metadata") && strings.Contains(m, "not found")
}

// isReconnecting reports whether an error event is the CLI saying it waits
// to reach the provider ("Reconnecting... waiting for network (Connection
// failed: …)").
func isReconnecting(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "reconnecting") || strings.Contains(m, "connection failed")
}

// line reads one event that arrived at now.
func (p *parser) line(b []byte, now time.Time) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil {
		p.unparsed++
		return
	}
	p.waitingAfter(e)
	switch e.Type {
	case "thread.started":
		p.threadID = e.ThreadID
	case "turn.completed":
		if e.Usage != nil {
			p.usage.Add(transcript.Usage{InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens, CachedTokens: e.Usage.CachedInputTokens})
		}
	case "turn.failed":
		p.fail(errorText(e.Error, "the turn failed"))
	case "error":
		msg := e.Message
		if msg == "" {
			msg = errorText(e.Error, "error")
		}
		switch {
		case isWarning(msg):
			p.warnings = append(p.warnings, msg)
		case isReconnecting(msg):
			p.reconnects++
			if p.reconnects > p.maxReconnects {
				p.unreachable = true
				p.fail("the model provider cannot be reached (check clientOptions.baseURL): " + msg)
			}
		default:
			p.fail(msg)
		}
	case "item.started", "item.updated", "item.completed":
		if e.Item != nil {
			p.item(e.Type, e.Item, now)
		}
	}
}

// waitingAfter updates what the CLI is waiting on after event e: the
// model once its thread or turn started and after each item it completed;
// a tool while a tool item (an MCP call, a command, a search, an edit) runs;
// nothing it can tell after its turn ended.
func (p *parser) waitingAfter(e event) {
	switch e.Type {
	case "thread.started", "turn.started", "item.completed":
		p.waiting = transcript.WaitingModel
	case "item.started", "item.updated":
		if e.Item != nil && e.Item.Type != "agent_message" && e.Item.Type != "reasoning" {
			p.waiting = transcript.WaitingTool
		}
	case "turn.completed", "turn.failed":
		p.waiting = ""
	}
}

func (p *parser) fail(msg string) {
	if p.apiError == "" {
		p.apiError = msg
	} else if !strings.Contains(p.apiError, msg) {
		p.apiError += "; " + msg
	}
}

func (p *parser) item(kind string, it *item, now time.Time) {
	switch it.Type {
	case "agent_message":
		if kind == "item.completed" {
			p.messages = append(p.messages, transcript.Message{Role: "assistant", Text: it.Text})
			p.answer = it.Text
		}
	case "error":
		if isWarning(it.Message) {
			p.warnings = append(p.warnings, it.Message)
		} else {
			p.fail(it.Message)
		}
	case "mcp_tool_call":
		i, ok := p.begin(it.ID, it.Server, it.Tool, it.Arguments, now)
		if !ok || kind != "item.completed" {
			return
		}
		c := &p.calls[i]
		if it.Result != nil {
			var texts []string
			for _, part := range it.Result.Content {
				if part.Type == "text" {
					texts = append(texts, part.Text)
				}
			}
			c.Result = strings.Join(texts, "\n")
			c.IsError = it.Result.IsError || it.Status == "failed"
		}
		if len(it.Error) > 0 && string(it.Error) != "null" {
			c.Error = errorText(it.Error, "the call failed")
			c.IsError = true
		} else if it.Result == nil && it.Status == "failed" {
			c.Error = "the call failed"
			c.IsError = true
		}
		p.finish(i, now)
	case "command_execution":
		args, _ := json.Marshal(map[string]string{"command": it.Command})
		i, ok := p.begin(it.ID, client.BuiltinServer, "exec_command", args, now)
		if !ok || kind != "item.completed" {
			return
		}
		c := &p.calls[i]
		c.Result = it.AggregatedOutput
		switch {
		case it.Status == "declined":
			c.IsError, c.Error = true, "the CLI declined to run the command"
		case it.Status == "failed" || (it.ExitCode != nil && *it.ExitCode != 0):
			c.IsError = true
			if it.ExitCode != nil {
				c.Error = fmt.Sprintf("the command exited with code %d", *it.ExitCode)
			} else {
				c.Error = "the command failed"
			}
		}
		p.finish(i, now)
	case "file_change":
		args, _ := json.Marshal(map[string]any{"changes": it.Changes})
		i, ok := p.begin(it.ID, client.BuiltinServer, "apply_patch", args, now)
		if !ok || kind != "item.completed" {
			return
		}
		c := &p.calls[i]
		var lines []string
		for _, ch := range it.Changes {
			lines = append(lines, ch.Kind+" "+ch.Path)
		}
		c.Result = strings.Join(lines, "\n")
		if it.Status == "failed" || it.Status == "declined" {
			c.IsError, c.Error = true, "the patch was not applied ("+it.Status+")"
		}
		p.finish(i, now)
	case "web_search":
		args, _ := json.Marshal(map[string]string{"query": it.Query})
		i, ok := p.begin(it.ID, client.BuiltinServer, "web_search", args, now)
		if ok && kind == "item.completed" {
			p.finish(i, now)
		}
	}
}

// begin returns the index of the call of item id, recording it (and
// counting it against maxActions) the first time the item is seen; false
// when the call is one past maxActions.
func (p *parser) begin(id, server, tool string, args json.RawMessage, now time.Time) (int, bool) {
	if i, seen := p.callIndex[id]; seen {
		return i, true
	}
	p.actions++
	if p.maxActions > 0 && p.actions > p.maxActions {
		p.overLimit = true
		return 0, false
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	c := transcript.ToolCall{ID: id, Server: server, Tool: tool, Arguments: args, Started: now}
	if server == client.BuiltinServer {
		c.Evidence = transcript.EvidenceClient
	}
	p.calls = append(p.calls, c)
	i := len(p.calls) - 1
	p.callIndex[id] = i
	// The call belongs to the assistant turn that made it.
	if last := &p.messages[len(p.messages)-1]; last.Role == "assistant" {
		last.ToolCalls = append(last.ToolCalls, id)
	} else {
		p.messages = append(p.messages, transcript.Message{Role: "assistant", ToolCalls: []string{id}})
	}
	return i, true
}

// finish ends call i (its result already set) and adds its tool message.
func (p *parser) finish(i int, now time.Time) {
	c := &p.calls[i]
	c.DurationMs = float64(now.Sub(c.Started).Microseconds()) / 1000
	text := c.Result
	if c.Error != "" {
		text = "error: " + c.Error
	}
	p.messages = append(p.messages, transcript.Message{Role: "tool", Text: text, ToolCall: c.ID})
}

// errorText reads an error that is a string or an object with a message.
func errorText(raw json.RawMessage, fallback string) string {
	if len(raw) == 0 || string(raw) == "null" {
		return fallback
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	return string(raw)
}

// result returns what the stream said so far; Run adds the outcome.
func (p *parser) result() client.Result {
	tel := map[string]any{}
	if p.threadID != "" {
		tel["threadId"] = p.threadID
	}
	if len(p.warnings) > 0 {
		tel["warnings"] = append([]string(nil), p.warnings...)
	}
	if p.unparsed > 0 {
		tel["unparsedLines"] = p.unparsed
	}
	u := p.usage
	u.ModelCalls = p.modelCalls
	return client.Result{
		Messages:        p.messages,
		ToolCalls:       p.calls,
		Answer:          p.answer,
		Usage:           u,
		ClientTelemetry: tel,
	}
}
