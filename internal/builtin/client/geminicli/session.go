package geminicli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/cliproc"
	"github.com/mst-eval/mst/transcript"
)

type session struct {
	params   client.OpenParams
	opts     Options
	bin      string
	dir      string // the session folder; removed at Close
	model    string
	settings rendered // every trial home's .gemini/settings.json, unless the trial has servers of its own
	namer    *toolNamer
	version  string
	infos    []transcript.ServerInfo
	// extraArgs are added to the command line, and onStart is told the
	// CLI's process id; tests use them.
	extraArgs []string
	onStart   func(pid int)

	closeOnce sync.Once
}

// env is the CLI's environment: a minimal one, then the variant's key (no
// other secret of the run),
// then what the client sets. home is the CLI's home (HOME, and USERPROFILE
// for Windows) and tmp its temporary folder, where it writes its error
// reports.
func (s *session) env(home, tmp string) []string {
	set := map[string]string{"HOME": home, "USERPROFILE": home, "TMPDIR": tmp, "GEMINI_CLI_TRUST_WORKSPACE": "true"}
	if s.opts.BaseURL != "" {
		set["GOOGLE_GEMINI_BASE_URL"] = s.opts.BaseURL
	}
	return cliproc.Env(s.bin, platformEnv, cliproc.Only(s.params.Env, "GEMINI_API_KEY"), set)
}

// Reset has nothing to do: every trial runs a fresh CLI in a fresh home.
func (s *session) Reset(context.Context) error { return nil }

// Close removes the session folder.
func (s *session) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.dir != "" {
			err = os.RemoveAll(s.dir)
		}
	})
	return err
}

// args is the CLI's command line for one trial. It carries neither a key
// nor the prompt: the prompt is the CLI's standard input (see runOnce).
func (s *session) args() []string {
	args := []string{"--output-format", "stream-json", "-m", s.model, "--yolo"}
	return append(args, s.extraArgs...)
}

// noInput is what the CLI says when it read no prompt on its standard
// input.
const noInput = "No input provided via stdin"

// promptAttempts bounds how many times a trial starts the CLI when the CLI
// lost its prompt (see runOnce).
const promptAttempts = 3

// Run runs one trial: gemini in headless mode in a fresh home and folder
// of its own, with the prompt on its standard input, read into the
// transcript as its events arrive. When ctx ends the CLI's tree is
// stopped and Run returns what it had, errored; MST decides whether that
// was a timeout or a cancellation.
func (s *session) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	tdir, err := os.MkdirTemp(s.dir, "trial-")
	if err != nil {
		return client.Result{}, fmt.Errorf("gemini-cli: creating the trial folder: %w", err)
	}
	defer os.RemoveAll(tdir)
	home, work, tmp := filepath.Join(tdir, "home"), filepath.Join(tdir, "work"), filepath.Join(tdir, "tmp")
	for _, d := range []string{filepath.Join(home, ".gemini"), work, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return client.Result{}, fmt.Errorf("gemini-cli: creating the trial folder: %w", err)
		}
	}
	settings := s.settings
	if t.Servers != nil {
		if settings, err = settingsJSON(s.params.TrialServers(t), s.opts.RequestMaxAttempts, coreTools(s.opts.BuiltinTools)); err != nil {
			return client.Result{}, fmt.Errorf("gemini-cli: %w", err)
		}
	}
	settingsPath := filepath.Join(home, ".gemini", "settings.json")
	if err := os.WriteFile(settingsPath, settings.settings, 0o600); err != nil {
		return client.Result{}, fmt.Errorf("gemini-cli: writing settings.json: %w", err)
	}
	// The prompt is a file the CLI reads as its standard input: unlike a
	// pipe, it is whole when the CLI starts reading.
	promptPath := filepath.Join(tdir, "prompt")
	if err := os.WriteFile(promptPath, []byte(t.Prompt), 0o600); err != nil {
		return client.Result{}, fmt.Errorf("gemini-cli: writing the prompt: %w", err)
	}
	env := append(s.env(home, tmp), settings.env...)
	// The trial's settings also stand in for the machine's system
	// settings, which would otherwise override them (built-in tools and
	// servers included).
	env = append(env, "GEMINI_CLI_SYSTEM_SETTINGS_PATH="+settingsPath, "GEMINI_CLI_SYSTEM_DEFAULTS_PATH="+filepath.Join(tdir, "no-system-defaults.json"))
	for attempt := 1; ; attempt++ {
		res, lost, err := s.runOnce(ctx, t, runDirs{tdir: tdir, work: work, prompt: promptPath, env: env, attempt: attempt})
		if err != nil || !lost || attempt == promptAttempts || ctx.Err() != nil {
			if err == nil {
				// The variant's servers, as configured, even when the
				// trial reached them through others (t.Servers).
				res.Servers = s.infos
				if attempt > 1 {
					res.ClientTelemetry["promptAttempts"] = attempt
				}
			}
			return res, err
		}
	}
}

// runDirs is what every start of the CLI in one trial shares.
type runDirs struct {
	tdir, work, prompt string
	env                []string
	attempt            int
}

// runOnce starts the CLI once. lost reports that the CLI read no prompt
// and asked the model nothing, so that the trial may start it again: it
// gives up on its standard input when the first data has not come 500 ms
// after it began to read, which a loaded machine can make happen even
// with a file.
func (s *session) runOnce(ctx context.Context, t client.Trial, d runDirs) (res client.Result, lost bool, err error) {
	// The CLI's debug log is where it names an MCP server that failed;
	// without --debug it prints only "MCP issues detected".
	debugLog := filepath.Join(d.tdir, fmt.Sprintf("debug-%d.log", d.attempt))

	// The CLI's hint that an MCP server failed prompts a look at the debug
	// log at once, before the CLI goes on to call the model without it.
	poke := make(chan struct{}, 1)
	p := newParser(t.Prompt, s.opts.MaxActions, s.namer.withTools(t.Tools))
	proc, err := cliproc.Start(ctx, cliproc.Command{
		Path: s.bin, Args: s.args(), Dir: d.work, StdinFile: d.prompt,
		Env:        slices.Concat(d.env, []string{"GEMINI_DEBUG_LOG_FILE=" + debugLog}),
		StderrTail: 16 << 10, Stderr: &hintWriter{hint: []byte(mcpHint), poke: poke},
		Started:  s.onStart,
		Line:     func(at time.Time, text []byte) { p.line(text, at.UTC()) },
		StopWhen: func() bool { return p.overLimit },
	})
	if err != nil {
		return client.Result{}, false, fmt.Errorf("gemini-cli: starting %s: %w", s.bin, err)
	}

	// The debug log is read for a server that failed to start; the CLI
	// is stopped then, since it would go on without the server.
	watch := &mcpWatch{path: debugLog}
	var serverFailed string
	var failMu sync.Mutex
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-poke:
			case <-tick.C:
			}
			if msg := watch.check(); msg != "" {
				failMu.Lock()
				serverFailed = msg
				failMu.Unlock()
				proc.Stop()
				return
			}
		}
	}()
	waitErr := proc.Wait()
	close(done)
	<-watched
	stderr := proc.Stderr()

	failMu.Lock()
	failed := serverFailed
	failMu.Unlock()
	if failed == "" && ctx.Err() == nil {
		// The CLI may have gone on without the server and ended before
		// the watcher's next look.
		failed = watch.check()
	}

	res = p.result()
	res.ClientVersion = s.version
	res.Outcome = s.outcome(ctx, p, failed, waitErr, stderr)
	if ctx.Err() != nil {
		res.WaitingOn = p.waiting
	}
	lost = failed == "" && res.Outcome.Status == transcript.Errored && p.usage.ModelCalls == 0 && len(p.calls) == 0 && strings.Contains(stderr, noInput)
	return res, lost, nil
}

// outcome decides how the trial ended, in order: the trial's context
// (errored: MST classifies it), the
// maxActions limit, a server that did not start, an API error, any other
// failure of the CLI, and then the answer.
func (s *session) outcome(ctx context.Context, p *parser, serverFailed string, waitErr error, stderr string) transcript.Outcome {
	switch {
	case ctx.Err() != nil:
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: "gemini was stopped before it answered: " + ctx.Err().Error()}
	case p.overLimit:
		return transcript.Outcome{Status: transcript.NoAnswer, Detail: fmt.Sprintf("maxActions (%d) reached: the model asked for another tool call", s.opts.MaxActions)}
	case serverFailed != "":
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseServer, Detail: "an MCP server failed to start: " + serverFailed}
	case p.resultError != "" && (strings.Contains(p.resultError, "API Error") || strings.Contains(stderr, "Error when talking to Gemini API")):
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseProvider, Detail: p.resultError}
	case p.resultError != "":
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: "gemini failed: " + p.resultError}
	case waitErr != nil:
		detail := "gemini failed: " + waitErr.Error()
		if len(p.errors) > 0 {
			detail += ": " + strings.Join(p.errors, "; ")
		}
		if t := stderrSummary(stderr); t != "" {
			detail += ": " + t
		}
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: detail}
	case !p.sawResult:
		detail := "gemini ended without a result event"
		if t := stderrSummary(stderr); t != "" {
			detail += "; its stderr says: " + t
		}
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: detail}
	case strings.TrimSpace(p.answer()) == "":
		return transcript.Outcome{Status: transcript.NoAnswer, Detail: "gemini ended its turn without an answer"}
	}
	return transcript.Outcome{Status: transcript.Answered}
}

// stderrSummary is what the CLI's stderr says about a failure: for a
// command-line error, the complaint before the usage text it prints after
// it; otherwise the stderr's last 2000 bytes.
func stderrSummary(stderr string) string {
	if i := strings.Index(stderr, "Usage: gemini"); i > 0 {
		if head := strings.TrimSpace(stderr[:i]); head != "" {
			return cliproc.Tail(head, 2000)
		}
	}
	return cliproc.Tail(stderr, 2000)
}

// mcpFailedRE finds, in the CLI's debug log, an MCP server that could not
// be started or connected, and why.
var mcpFailedRE = regexp.MustCompile(`\[MCP error\] (?:Error during discovery for MCP server|Error connecting to MCP server|Fatal error ensuring MCP server) '([^']*)'(?: is connected)?:\s*([^\n]*)`)

// mcpWatch reads the CLI's debug log as it grows.
type mcpWatch struct {
	path   string
	offset int64
	buf    []byte
}

// check reads what the log gained and returns "SERVER: why" for the first
// server that failed, or "".
func (w *mcpWatch) check() string {
	f, err := os.Open(w.path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(w.offset, io.SeekStart); err != nil {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil || len(b) == 0 {
		return ""
	}
	w.offset += int64(len(b))
	w.buf = append(w.buf, b...)
	// Keep only complete lines for later, bounded.
	var text []byte
	if i := bytes.LastIndexByte(w.buf, '\n'); i >= 0 {
		text, w.buf = w.buf[:i+1], append([]byte(nil), w.buf[i+1:]...)
	} else if len(w.buf) > 1<<20 {
		w.buf = nil
	}
	if m := mcpFailedRE.FindSubmatch(text); m != nil {
		why := strings.TrimSpace(string(m[2]))
		// The message repeats itself after the error's name.
		if i := strings.Index(why, " Error: "); i > 0 {
			why = why[:i]
		}
		return fmt.Sprintf("%s: %s", m[1], why)
	}
	return ""
}

// event is one line of gemini --output-format stream-json.
type event struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"session_id"`
	Model      string          `json:"model"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	Delta      bool            `json:"delta"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Severity   string          `json:"severity"`
	Message    string          `json:"message"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		InputTokens  int64   `json:"input_tokens"`
		OutputTokens int64   `json:"output_tokens"`
		Cached       int64   `json:"cached"`
		DurationMs   float64 `json:"duration_ms"`
		ToolCalls    int     `json:"tool_calls"`
	} `json:"stats"`
}

// parser reads the event stream into a result.
type parser struct {
	maxActions  int
	namer       *toolNamer
	messages    []transcript.Message
	calls       []transcript.ToolCall
	callIndex   map[string]int
	usage       transcript.Usage
	sessionID   string
	warnings    []string
	errors      []string
	resultError string
	sawResult   bool
	durationMs  float64
	unparsed    int
	actions     int
	overLimit   bool
	// waiting is what the CLI waits on after its last event: the model
	// after its init, a message or a tool result; a tool after a tool use;
	// nothing it can tell after its result.
	waiting string
}

func newParser(prompt string, maxActions int, namer *toolNamer) *parser {
	if namer == nil {
		namer = newToolNamer(nil)
	}
	return &parser{
		maxActions: maxActions,
		namer:      namer,
		messages:   []transcript.Message{{Role: "user", Text: prompt}},
		callIndex:  map[string]int{},
	}
}

// line reads one event that arrived at now.
func (p *parser) line(b []byte, now time.Time) {
	var e event
	if err := json.Unmarshal(bytes.TrimSpace(b), &e); err != nil || e.Type == "" {
		p.unparsed++
		return
	}
	switch e.Type {
	case "init", "message", "tool_result":
		p.waiting = transcript.WaitingModel
	case "tool_use":
		p.waiting = transcript.WaitingTool
	case "result":
		p.waiting = ""
	}
	switch e.Type {
	case "init":
		p.sessionID = e.SessionID
	case "message":
		if e.Role != "assistant" {
			return
		}
		// Deltas of one model turn go to one message, until a tool
		// result starts the next turn.
		last := &p.messages[len(p.messages)-1]
		if last.Role == "assistant" {
			last.Text += e.Content
		} else {
			p.assistantTurn(transcript.Message{Role: "assistant", Text: e.Content})
		}
	case "tool_use":
		p.toolUse(e, now)
	case "tool_result":
		p.toolResult(e, now)
	case "error":
		if e.Severity == "warning" {
			p.warnings = append(p.warnings, e.Message)
		} else {
			p.errors = append(p.errors, e.Message)
		}
	case "result":
		p.sawResult = true
		if e.Status == "success" && p.messages[len(p.messages)-1].Role != "assistant" {
			// The model was asked once more and answered nothing.
			p.usage.ModelCalls++
		}
		if e.Stats != nil {
			p.usage.Add(transcript.Usage{InputTokens: e.Stats.InputTokens, OutputTokens: e.Stats.OutputTokens, CachedTokens: e.Stats.Cached})
			p.durationMs = e.Stats.DurationMs
		}
		if e.Status != "success" {
			msg := "the CLI reported status " + e.Status
			if e.Error != nil && e.Error.Message != "" {
				msg = e.Error.Message
			}
			p.resultError = msg
		}
	}
}

func (p *parser) toolUse(e event, now time.Time) {
	if _, seen := p.callIndex[e.ToolID]; seen {
		return
	}
	p.actions++
	if p.maxActions > 0 && p.actions > p.maxActions {
		p.overLimit = true
		return
	}
	args := e.Parameters
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	server, tool := p.namer.name(e.ToolName)
	if server == "" {
		// The CLI's own tool, or one it does not have.
		server = client.BuiltinServer
	}
	p.calls = append(p.calls, transcript.ToolCall{ID: e.ToolID, Server: server, Tool: tool, Arguments: args, Started: now})
	p.callIndex[e.ToolID] = len(p.calls) - 1
	// The call belongs to the assistant turn that made it.
	if last := &p.messages[len(p.messages)-1]; last.Role == "assistant" {
		last.ToolCalls = append(last.ToolCalls, e.ToolID)
	} else {
		p.assistantTurn(transcript.Message{Role: "assistant", ToolCalls: []string{e.ToolID}})
	}
}

// assistantTurn adds the first message of a model turn. The stream has no
// event per model request: each turn it shows is one request answered.
func (p *parser) assistantTurn(m transcript.Message) {
	p.messages = append(p.messages, m)
	p.usage.ModelCalls++
}

func (p *parser) toolResult(e event, now time.Time) {
	i, ok := p.callIndex[e.ToolID]
	if !ok {
		return // a call past maxActions, or one never announced
	}
	c := &p.calls[i]
	c.DurationMs = float64(now.Sub(c.Started).Microseconds()) / 1000
	c.Result = e.Output
	c.IsError = e.Status != "success"
	if c.IsError && e.Error != nil && e.Error.Type == "mcp_tool_error" {
		// The output is the CLI's own words ("MCP tool 'fail' reported an
		// error"); the server's text is in the error's message.
		if text, ok := mcpErrorText(e.Error.Message); ok {
			c.Result = text
		}
	}
	// An MCP tool's own error result is a result; anything else (an
	// unknown tool, a refused or failed call) is the call failing.
	if c.IsError && e.Error != nil && e.Error.Type != "mcp_tool_error" {
		c.Error = e.Error.Message
		if c.Error == "" {
			c.Error = e.Error.Type
		}
	}
	if c.IsError && e.Error != nil && e.Error.Type == "tool_not_registered" {
		// A tool the CLI does not have (off, hidden by the variant, or
		// made up): no server and no built-in tool ran it
		// (docs/outcomes.md).
		c.Server, c.Evidence = "", ""
	}
	text := c.Result
	if c.Error != "" {
		text = "error: " + c.Error
	}
	p.messages = append(p.messages, transcript.Message{Role: "tool", Text: text, ToolCall: e.ToolID})
}

// mcpErrorMarker comes, in the message of an MCP tool's error result,
// before the parts the CLI made of the server's result (JSON).
const mcpErrorMarker = " with response: "

// mcpErrorText is the text of the server's result in the message of an MCP
// tool's error result: its text content, one part a line, and a
// placeholder for each other kind of content.
func mcpErrorText(msg string) (string, bool) {
	// The call's arguments come before the marker and the server's text
	// after it; either may hold the marker too: the first place after
	// which the rest is the JSON wanted is the one.
	for from := 0; ; {
		i := strings.Index(msg[from:], mcpErrorMarker)
		if i < 0 {
			return "", false
		}
		from += i + len(mcpErrorMarker)
		if text, ok := mcpResponseText(msg[from:]); ok {
			return text, true
		}
	}
}

// mcpResponseText reads the parts the CLI made of an MCP tool's result.
func mcpResponseText(rest string) (string, bool) {
	var parts []struct {
		FunctionResponse struct {
			Response struct {
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"response"`
		} `json:"functionResponse"`
	}
	if json.Unmarshal([]byte(rest), &parts) != nil {
		return "", false
	}
	var lines []string
	for _, p := range parts {
		for _, c := range p.FunctionResponse.Response.Content {
			if c.Type == "text" {
				lines = append(lines, c.Text)
			} else {
				lines = append(lines, "["+c.Type+"]")
			}
		}
	}
	if len(lines) == 0 {
		return "", false
	}
	return strings.Join(lines, "\n"), true
}

// answer is the text of the model's last turn, if it came after every tool
// result.
func (p *parser) answer() string {
	if last := p.messages[len(p.messages)-1]; last.Role == "assistant" && len(p.messages) > 1 {
		return last.Text
	}
	return ""
}

// result returns what the stream said so far; Run adds the outcome.
func (p *parser) result() client.Result {
	tel := map[string]any{}
	if p.sessionID != "" {
		tel["sessionId"] = p.sessionID
	}
	if p.durationMs > 0 {
		tel["durationMs"] = p.durationMs
	}
	if len(p.warnings) > 0 {
		tel["warnings"] = append([]string(nil), p.warnings...)
	}
	if len(p.errors) > 0 {
		tel["errors"] = append([]string(nil), p.errors...)
	}
	if p.unparsed > 0 {
		tel["unparsedLines"] = p.unparsed
	}
	return client.Result{
		Messages:        p.messages,
		ToolCalls:       p.calls,
		Answer:          p.answer(),
		Usage:           p.usage,
		ClientTelemetry: tel,
	}
}

// mcpHint is what the CLI prints on stderr when an MCP server reported an
// error or a warning; the debug log says which and why.
const mcpHint = "MCP issues detected"

// hintWriter pokes when a write holds hint. A hint split across two writes
// is left to the periodic look.
type hintWriter struct {
	hint []byte
	poke chan struct{}
}

func (h *hintWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, h.hint) {
		select {
		case h.poke <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}
