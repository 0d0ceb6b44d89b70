package clienttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// Case names one behaviour the suite checks; each runs as a subtest of
// that name.
type Case string

// The cases, in the order Run runs them.
const (
	// ToolCall: the model calls a real MCP server's tool; the transcript's
	// tool calls and messages hold the arguments and the result, and the
	// answer comes back.
	ToolCall Case = "tool-call"
	// ToolError: a tool answers with an error result (isError); the call
	// is recorded as an error and the trial still ends with an answer.
	ToolError Case = "tool-error"
	// ManyTools: a server with more than 40 tools, one with a non-ASCII
	// name and one with a long name; the model calls those two.
	ManyTools Case = "many-tools"
	// ProviderError: the provider answers 500, 429 or 401; the trial ends
	// errored (provider) and the detail says so.
	ProviderError Case = "provider-error"
	// ProviderDown: nothing listens at the provider's address; the trial
	// ends errored (provider), promptly.
	ProviderDown Case = "provider-down"
	// MissingServer: a server that cannot start; Open fails with an error
	// that wraps servers.ErrServer, or the trial ends errored (server),
	// naming the server either way.
	MissingServer Case = "missing-server"
	// ProgramFails: the client's program exits non-zero; the trial ends
	// errored (client) quoting what it printed on stderr.
	ProgramFails Case = "program-fails"
	// Timeout: the trial's context ends while a tool call is in flight;
	// Run returns within Config.StopWithin, without classifying the trial
	// as timed-out or cancelled itself, and every process the trial
	// started is gone.
	Timeout Case = "timeout"
	// MaxActions: maxActions 1 with a model that wants three tool calls
	// ends the trial as no-answer with at most one call.
	MaxActions Case = "max-actions"
	// Concurrent: two trials at once on one session (for a Concurrent
	// definition) each get their own answer, and both have a model
	// request in flight at the same time (the fake provider holds the
	// first until the second arrives, up to half the trial timeout).
	Concurrent Case = "concurrent"
	// StreamableHTTP: the tool call of ToolCall, to a server reached over
	// streamable HTTP.
	StreamableHTTP Case = "streamable-http"
	// MissingProgram: the client's program is not installed; Preflight and
	// Open say which program and how to install it.
	MissingProgram Case = "missing-program"
	// MissingKey: no API key; Open fails naming the variable to set.
	MissingKey Case = "missing-key"
	// CloseAfterFailedOpen: Close on the session a failed Open returned
	// is safe.
	CloseAfterFailedOpen Case = "close-after-failed-open"
)

// Cases lists every case in the order Run runs them.
func Cases() []Case {
	return []Case{ToolCall, ToolError, ManyTools, ProviderError, ProviderDown, MissingServer, ProgramFails, Timeout,
		MaxActions, Concurrent, StreamableHTTP, MissingProgram, MissingKey, CloseAfterFailedOpen}
}

// Config describes the client under test.
type Config struct {
	// Definition is the client's definition, as registered.
	Definition *client.Definition
	// Model is the model reference of every trial ("anthropic/claude-test-1",
	// "offline").
	Model string
	// Provider returns the clientOptions that point the client at the fake
	// provider (internal/provider/providertest) whose base address is url, and that
	// make it fail fast (no retries). Nil means the model needs no
	// provider (the offline model): the cases then rely on the model's own
	// documented game, and those that need a scripted model must be in
	// Cannot.
	Provider func(url string) map[string]any
	// KeyVar is the variable the client reads its API key from; the suite
	// sets it to a test key. Empty when the model needs none.
	KeyVar string
	// CommandOption is the option that names the client's program
	// ("command"); empty for a client that runs no program.
	CommandOption string
	// SessionProcesses is true when the servers live as long as the
	// session rather than the trial (the api client): Timeout then checks
	// that the processes are gone after Close instead of after Run.
	SessionProcesses bool
	// Cannot lists the cases the client cannot pass, each with the reason.
	// A case that does not apply by the definition's own data (Concurrent
	// for a definition that is not, MaxActions without the option,
	// ProgramFails and MissingProgram without CommandOption, MissingKey
	// without KeyVar) needs no entry.
	Cannot map[Case]string
	// StopWithin bounds how long Run may take to return after its context
	// ends (20 s when zero): the CLIs get SIGTERM and, 3 s later, SIGKILL.
	StopWithin time.Duration
	// TrialTimeout bounds every other trial (3 min when zero).
	TrialTimeout time.Duration
}

// Run runs every case against the client cfg describes, each as a parallel
// subtest named for its case. A case that needs something missing (the
// peers, Go to build the test server) fails when CI is set and is skipped
// otherwise.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.Definition == nil || cfg.Definition.Open == nil && cfg.Definition.Run == nil {
		t.Fatal("clienttest: Config.Definition needs Open or Run")
	}
	for c, why := range cfg.Cannot {
		if strings.TrimSpace(why) == "" {
			t.Fatalf("clienttest: Config.Cannot[%s] has no reason", c)
		}
		if !slices.Contains(Cases(), c) {
			t.Fatalf("clienttest: Config.Cannot names an unknown case %q (known: %v)", c, Cases())
		}
	}
	s := &suite{cfg: cfg}
	if s.cfg.StopWithin == 0 {
		s.cfg.StopWithin = 20 * time.Second
	}
	if s.cfg.TrialTimeout == 0 {
		s.cfg.TrialTimeout = 3 * time.Minute
	}
	cases := map[Case]func(*testing.T){
		ToolCall: s.toolCall, ToolError: s.toolError, ManyTools: s.manyTools,
		ProviderError: s.providerError, ProviderDown: s.providerDown, MissingServer: s.missingServer, ProgramFails: s.programFails,
		Timeout: s.timeout, MaxActions: s.maxActions, Concurrent: s.concurrent,
		StreamableHTTP: s.streamableHTTP, MissingProgram: s.missingProgram, MissingKey: s.missingKey,
		CloseAfterFailedOpen: s.closeAfterFailedOpen,
	}
	for _, c := range Cases() {
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			if why, ok := cfg.Cannot[c]; ok {
				t.Skipf("%s cannot: %s", cfg.Definition.Name, why)
			}
			if why := s.notApplicable(c); why != "" {
				t.Skipf("does not apply: %s", why)
			}
			cases[c](t)
		})
	}
}

type suite struct {
	cfg Config
}

// notApplicable says why a case does not apply by the definition's data,
// or "".
func (s *suite) notApplicable(c Case) string {
	d := s.cfg.Definition
	switch c {
	case Concurrent:
		if !d.Concurrent {
			return d.Name + " is not Concurrent"
		}
	case MaxActions:
		if !hasOption(d.Options, client.OptionMaxActions) {
			return d.Name + " takes no maxActions"
		}
	case ProgramFails, MissingProgram:
		if s.cfg.CommandOption == "" {
			return d.Name + " runs no program of its own"
		}
	case MissingKey:
		if s.cfg.KeyVar == "" {
			return "model " + s.cfg.Model + " needs no key"
		}
	}
	return ""
}

func hasOption(schema json.RawMessage, name string) bool {
	opts, _ := client.DescribeOptions(schema)
	for _, o := range opts {
		if o.Name == name {
			return true
		}
	}
	return false
}

const testKey = "clienttest-key-0123456789"

// params are the OpenParams of a session against the fake provider at url
// ("" without one), with extra options and servers.
func (s *suite) params(t *testing.T, url string, extra map[string]any, srvs ...servers.Server) client.OpenParams {
	t.Helper()
	opts := map[string]any{}
	if s.cfg.Provider != nil {
		for k, v := range s.cfg.Provider(url) {
			opts[k] = v
		}
	}
	for k, v := range extra {
		opts[k] = v
	}
	raw, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	if s.cfg.KeyVar != "" {
		env[s.cfg.KeyVar] = testKey
	}
	return client.OpenParams{
		Variant: "v", Model: s.cfg.Model, Options: raw, Servers: srvs, Env: env,
		Timeout: s.cfg.TrialTimeout,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)), WorkDir: t.TempDir(),
	}
}

// open opens a session with p; a non-nil session is closed when the test
// ends.
func (s *suite) open(t *testing.T, p client.OpenParams) (client.Session, error) {
	t.Helper()
	d := s.cfg.Definition
	var real []servers.Server
	if d.ProxiedServers && len(p.Servers) > 0 {
		real, p = p.Servers, proxiedParams(p)
	}
	wrap := func(sess client.Session) client.Session {
		if real != nil {
			limit := 0
			if d.ToolCallLimit != nil {
				limit = d.ToolCallLimit(p.Options)
			}
			return newProxied(t, sess, real, limit, d.InProcessServers)
		}
		return sess
	}
	if d.Open == nil {
		return wrap(oneShot{d: d, p: p}), nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), s.cfg.TrialTimeout)
	defer cancel()
	sess, err := d.Open(ctx, p)
	if sess != nil {
		closed := false
		t.Cleanup(func() {
			if !closed {
				sess.Close()
			}
		})
		return wrap(closeOnce{Session: sess, closed: &closed}), err
	}
	return nil, err
}

// mustOpen opens a session or fails the test.
func (s *suite) mustOpen(t *testing.T, p client.OpenParams) client.Session {
	t.Helper()
	sess, err := s.open(t, p)
	if err != nil {
		t.Fatalf("Open(model %s, servers %v) = %v", p.Model, serverNames(p.Servers), err)
	}
	return sess
}

// closeOnce lets a case Close the session itself; the cleanup then does not.
type closeOnce struct {
	client.Session
	closed *bool
}

func (c closeOnce) Close() error {
	if *c.closed {
		return nil
	}
	*c.closed = true
	return c.Session.Close()
}

// oneShot is a run-only client as a session.
type oneShot struct {
	d *client.Definition
	p client.OpenParams
}

func (o oneShot) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	return o.d.Run(ctx, o.p, t)
}
func (oneShot) Reset(context.Context) error { return nil }
func (oneShot) Close() error                { return nil }

func serverNames(srvs []servers.Server) []string {
	var out []string
	for _, s := range srvs {
		out = append(out, s.Name)
	}
	return out
}

func trial(prompt string) client.Trial {
	return client.Trial{Key: transcript.Key{Case: "c1", Variant: "v", Trial: 1}, Prompt: prompt}
}

// run runs one trial within the trial timeout and fails on an error.
func (s *suite) run(t *testing.T, sess client.Session, prompt string) client.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), s.cfg.TrialTimeout)
	defer cancel()
	start := time.Now()
	res, err := sess.Run(ctx, trial(prompt))
	t.Logf("Run(%q) took %v: outcome %+v", prompt, time.Since(start).Round(time.Millisecond), res.Outcome)
	if err != nil {
		t.Fatalf("Run(%q) error = %v", prompt, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Run(%q) did not finish within %v", prompt, s.cfg.TrialTimeout)
	}
	return res
}

// fake starts the fake provider with script, or returns nil without one.
func (s *suite) fake(t *testing.T, script providertest.Script) *providertest.Server {
	if s.cfg.Provider == nil {
		return nil
	}
	return providertest.New(t, script)
}

func url(f *providertest.Server) string {
	if f == nil {
		return ""
	}
	return f.URL
}

// one returns the conversation that answers with turns.
func one(turns ...providertest.Turn) providertest.Script {
	return providertest.Script{Conversations: []providertest.Conversation{{Turns: turns}}}
}

func call(tool string, args map[string]any) []providertest.Call {
	return []providertest.Call{{Tool: tool, Arguments: args}}
}

// echoPrompt makes both a scripted model and the offline model call echo
// with text.
func echoPrompt(text string) string { return "Echo the text '" + text + "'" }

// echoScript answers echoPrompt(text): one echo call, then the result.
func echoScript(text string) []providertest.Turn {
	return []providertest.Turn{
		{Text: "Let me echo that.", ToolCalls: call("echo", map[string]any{"text": text})},
		{Text: "The server said: echo: " + text},
	}
}

func (s *suite) toolCall(t *testing.T) {
	srv := testServer(t, "mst")
	s.checkEcho(t, srv)
}

func (s *suite) streamableHTTP(t *testing.T) {
	s.checkEcho(t, httpServer(t, "remote"))
}

// checkEcho runs one echo trial against srv and checks the transcript.
func (s *suite) checkEcho(t *testing.T, srv servers.Server) {
	const text = "hello from clienttest"
	f := s.fake(t, one(echoScript(text)...))
	sess := s.mustOpen(t, s.params(t, url(f), nil, srv))
	res := s.run(t, sess, echoPrompt(text))
	if res.Outcome.Status != transcript.Answered {
		t.Fatalf("outcome = %+v, want answered", res.Outcome)
	}
	if len(res.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v, want one echo", res.ToolCalls)
	}
	c := res.ToolCalls[0]
	if c.Server != srv.Name || c.Tool != "echo" || c.ID == "" || c.IsError || c.Error != "" {
		t.Errorf("tool call = %+v, want echo on %s, with an id, not an error", c, srv.Name)
	}
	var args map[string]any
	if err := json.Unmarshal(c.Arguments, &args); err != nil || args["text"] != text {
		t.Errorf("tool call arguments = %s, want {\"text\": %q}", c.Arguments, text)
	}
	want := "echo: " + text
	if !strings.Contains(c.Result, want) {
		t.Errorf("tool call result = %q, want it to hold %q", c.Result, want)
	}
	if c.Started.IsZero() || c.DurationMs < 0 {
		t.Errorf("tool call timing: started %v, %v ms", c.Started, c.DurationMs)
	}
	checkMessages(t, res, echoPrompt(text), c.ID, want)
	if !strings.Contains(res.Answer, want) {
		t.Errorf("answer = %q, want it to hold %q", res.Answer, want)
	}
	i := slices.IndexFunc(res.Servers, func(si transcript.ServerInfo) bool { return si.Name == srv.Name })
	if i < 0 || res.Servers[i].Transport != srv.Transport() {
		t.Errorf("servers = %+v, want %s over %s", res.Servers, srv.Name, srv.Transport())
	}
	if f != nil {
		reqs := f.Requests()
		if len(reqs) < 2 || !strings.Contains(string(reqs[len(reqs)-1].Body), want) {
			t.Errorf("the provider got %d requests, want 2, the last carrying the tool result", len(reqs))
		}
	}
}

// checkMessages checks that the messages start with the prompt, and hold
// an assistant message making the call id and a tool message with its
// result.
func checkMessages(t *testing.T, res client.Result, prompt, id, result string) {
	t.Helper()
	if len(res.Messages) == 0 || res.Messages[0].Role != "user" || res.Messages[0].Text != prompt {
		t.Errorf("messages = %+v, want the prompt first", res.Messages)
		return
	}
	asked := slices.ContainsFunc(res.Messages, func(m transcript.Message) bool {
		return m.Role == "assistant" && slices.Contains(m.ToolCalls, id)
	})
	answered := slices.ContainsFunc(res.Messages, func(m transcript.Message) bool {
		return m.Role == "tool" && m.ToolCall == id && strings.Contains(m.Text, result)
	})
	if !asked || !answered {
		t.Errorf("messages = %+v, want an assistant message calling %s and a tool message with %q", res.Messages, id, result)
	}
}

func (s *suite) toolError(t *testing.T) {
	const reason = "disk on fire"
	prompt := "Fail with the reason '" + reason + "'"
	f := s.fake(t, one(
		providertest.Turn{ToolCalls: call("fail", map[string]any{"reason": reason})},
		providertest.Turn{Text: "The tool failed: " + reason},
	))
	sess := s.mustOpen(t, s.params(t, url(f), nil, testServer(t, "mst")))
	res := s.run(t, sess, prompt)
	if res.Outcome.Status != transcript.Answered || strings.TrimSpace(res.Answer) == "" {
		t.Errorf("outcome = %+v, answer %q, want answered: a tool's error result is the model's to read", res.Outcome, res.Answer)
	}
	if len(res.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v, want one call of fail", res.ToolCalls)
	}
	c := res.ToolCalls[0]
	if c.Tool != "fail" || !c.IsError || strings.TrimSpace(c.Result+c.Error) == "" {
		t.Errorf("tool call = %+v, want fail, an error, saying something", c)
	}
	// The CLI may report the failure in words of its own (gemini: "MCP
	// tool 'fail' reported an error"), dropping the server's text.
	if !strings.Contains(c.Result+c.Error, reason) {
		t.Logf("the recorded result %q does not hold the server's reason %q", c.Result+c.Error, reason)
	}
	checkMessages(t, res, prompt, c.ID, "")
}

func (s *suite) manyTools(t *testing.T) {
	prompt := "What is the météo prévision forecast for 'Oslo'?"
	f := s.fake(t, one(
		providertest.Turn{ToolCalls: call(testserver.UnicodeTool, map[string]any{"text": "Oslo"})},
		providertest.Turn{ToolCalls: call(testserver.LongTool, map[string]any{"text": "north"})},
		providertest.Turn{Text: "Oslo: sunny. North: full."},
	))
	srv := testServer(t, "many", "--many")
	sess := s.mustOpen(t, s.params(t, url(f), nil, srv))
	res := s.run(t, sess, prompt)
	if res.Outcome.Status != transcript.Answered {
		t.Fatalf("outcome = %+v, want answered", res.Outcome)
	}
	want := map[string]string{testserver.UnicodeTool: testserver.UnicodeTool + ": Oslo"}
	if f != nil {
		want[testserver.LongTool] = testserver.LongTool + ": north"
	}
	got := map[string]string{}
	for _, c := range res.ToolCalls {
		if c.Server != "many" || c.IsError {
			t.Errorf("tool call = %+v, want one on many, not an error", c)
		}
		got[c.Tool] = c.Result
	}
	for tool, result := range want {
		if r, ok := got[tool]; !ok || !strings.Contains(r, result) {
			t.Errorf("tool calls = %+v, want %q (the server's own name) answering %q", res.ToolCalls, tool, result)
		}
	}
	if f != nil {
		if reqs := f.Requests(); len(reqs) == 0 || len(reqs[0].Tools) < testserver.ManyTools {
			t.Errorf("the first model request offered %d tools, want at least %d", len(reqs[0].Tools), testserver.ManyTools)
		}
	}
	i := slices.IndexFunc(res.Servers, func(si transcript.ServerInfo) bool { return si.Name == "many" })
	if i >= 0 && len(res.Servers[i].Tools) > 0 && !slices.Contains(res.Servers[i].Tools, testserver.UnicodeTool) {
		t.Errorf("server many lists tools %v, without %q", res.Servers[i].Tools, testserver.UnicodeTool)
	}
}

func (s *suite) providerError(t *testing.T) {
	if s.cfg.Provider == nil {
		t.Fatal("clienttest: provider-error needs Config.Provider; list it in Cannot for a model without a provider")
	}
	for _, status := range []int{500, 429, 401} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			msg := fmt.Sprintf("clienttest: the provider fails with HTTP %d", status)
			f := s.fake(t, providertest.Script{
				Faults:        []providertest.Fault{{Status: status, Times: 1000, Message: msg}},
				Conversations: one(providertest.Turn{Text: "unreachable"}).Conversations,
			})
			sess := s.mustOpen(t, s.params(t, f.URL, nil, testServer(t, "mst")))
			res := s.run(t, sess, echoPrompt("x"))
			o := res.Outcome
			if o.Status != transcript.Errored || o.Cause != transcript.CauseProvider {
				t.Errorf("outcome = %+v, want errored (provider)", o)
			}
			// Some CLIs put their own words on a status (codex: "high
			// demand" for a 500): the detail must say something.
			if strings.TrimSpace(o.Detail) == "" {
				t.Errorf("outcome detail is empty, want what the provider said")
			}
			if res.Answer != "" {
				t.Errorf("answer = %q, want none", res.Answer)
			}
			if len(f.Requests()) == 0 {
				t.Errorf("the provider got no request")
			}
		})
	}
}

// providerDown points the client at an address where nothing listens:
// the trial ends errored (provider), promptly, with a detail.
func (s *suite) providerDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()
	sess := s.mustOpen(t, s.params(t, down, nil, testServer(t, "mst")))
	res := s.run(t, sess, echoPrompt("x"))
	o := res.Outcome
	if o.Status != transcript.Errored || o.Cause != transcript.CauseProvider {
		t.Errorf("outcome with the provider down = %+v, want errored (provider)", o)
	}
	if strings.TrimSpace(o.Detail) == "" {
		t.Errorf("outcome detail with the provider down is empty, want why")
	}
	if res.Answer != "" {
		t.Errorf("answer with the provider down = %q, want none", res.Answer)
	}
}

func (s *suite) missingServer(t *testing.T) {
	f := s.fake(t, one(providertest.Turn{Text: "no tools here"}))
	sess, err := s.open(t, s.params(t, url(f), nil, testServer(t, "broken", "--fail-start")))
	if err != nil {
		// The worker records an Open error as errored (server) only when
		// it wraps servers.ErrServer.
		if !errors.Is(err, servers.ErrServer) || !strings.Contains(err.Error(), "broken") {
			t.Errorf("Open = %v, want an error that wraps servers.ErrServer and names the server broken", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), s.cfg.TrialTimeout)
	defer cancel()
	res, err := sess.Run(ctx, trial("Say hello"))
	if err != nil {
		// Through MST's proxy, the server fails to start before the
		// client runs: the worker records the error as errored (server).
		if !errors.Is(err, servers.ErrServer) || !strings.Contains(err.Error(), "broken") {
			t.Errorf("Run = %v, want an error that wraps servers.ErrServer and names the server broken", err)
		}
		return
	}
	o := res.Outcome
	if o.Status != transcript.Errored || o.Cause != transcript.CauseServer || !strings.Contains(o.Detail, "broken") {
		t.Errorf("outcome = %+v, want errored (server) naming the server broken", o)
	}
}

// failingProgram writes a program that reports a version and otherwise
// prints why it fails on stderr and exits 3.
func failingProgram(t *testing.T) (path, says string) {
	t.Helper()
	says = "clienttest: this program fails on purpose"
	path = filepath.Join(t.TempDir(), "failing-cli")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 9.9.9; exit 0; fi\necho '" + says + "' >&2\nexit 3\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, says
}

func (s *suite) programFails(t *testing.T) {
	prog, says := failingProgram(t)
	f := s.fake(t, one(providertest.Turn{Text: "unreachable"}))
	sess, err := s.open(t, s.params(t, url(f), map[string]any{s.cfg.CommandOption: prog}, testServer(t, "mst")))
	if err != nil {
		if !strings.Contains(err.Error(), says) && !strings.Contains(err.Error(), prog) {
			t.Errorf("Open = %v, want it to quote the program's stderr or name it", err)
		}
		return
	}
	res := s.run(t, sess, "Say hello")
	o := res.Outcome
	if o.Status != transcript.Errored || o.Cause != transcript.CauseClient || !strings.Contains(o.Detail, says) {
		t.Errorf("outcome = %+v, want errored (client) quoting the program's stderr %q", o, says)
	}
}

func (s *suite) maxActions(t *testing.T) {
	f := s.fake(t, one(
		providertest.Turn{ToolCalls: call("echo", map[string]any{"text": "one"})},
		providertest.Turn{ToolCalls: call("echo", map[string]any{"text": "two"})},
		providertest.Turn{ToolCalls: call("echo", map[string]any{"text": "three"})},
		providertest.Turn{Text: "done"},
	))
	sess := s.mustOpen(t, s.params(t, url(f), map[string]any{client.OptionMaxActions: 1}, testServer(t, "mst")))
	res := s.run(t, sess, "Echo the text 'one', then 'two', then 'three'")
	if res.Outcome.Status != transcript.NoAnswer {
		t.Errorf("outcome = %+v, want no-answer", res.Outcome)
	}
	if len(res.ToolCalls) > 1 {
		t.Errorf("tool calls = %+v, want at most maxActions (1)", res.ToolCalls)
	}
}

func (s *suite) concurrent(t *testing.T) {
	words := []string{"alpha", "beta"}
	// The fake holds each trial's first model request until both trials
	// have one in flight: the check waits for the overlap itself, however
	// far apart the two programs start, up to a bound well inside the
	// trial timeout.
	within := min(2*time.Minute, s.cfg.TrialTimeout/2)
	var f *providertest.Server
	if s.cfg.Provider != nil {
		var convs []providertest.Conversation
		for _, w := range words {
			convs = append(convs, providertest.Conversation{Match: w, Turns: echoScript(w)})
		}
		f = providertest.New(t, providertest.Script{Conversations: convs,
			Gate: providertest.Gate{Conversations: len(words), Within: within}})
	}
	sess := s.mustOpen(t, s.params(t, url(f), nil, testServer(t, "mst")))
	type out struct {
		res client.Result
		err error
	}
	results := make([]out, len(words))
	done := make(chan int)
	ctx, cancel := context.WithTimeout(t.Context(), s.cfg.TrialTimeout)
	defer cancel()
	for i, w := range words {
		go func() {
			res, err := sess.Run(ctx, trial(echoPrompt(w)))
			results[i] = out{res, err}
			done <- i
		}()
	}
	for range words {
		<-done
	}
	for i, w := range words {
		r := results[i]
		if r.err != nil || r.res.Outcome.Status != transcript.Answered || !strings.Contains(r.res.Answer, "echo: "+w) ||
			len(r.res.ToolCalls) != 1 || !strings.Contains(r.res.ToolCalls[0].Result, w) {
			t.Errorf("trial %s: err %v, outcome %+v, answer %q, calls %+v", w, r.err, r.res.Outcome, r.res.Answer, r.res.ToolCalls)
		}
	}
	if f != nil && f.Gathered() < len(words) {
		t.Errorf("only %d of %d trials reached the model at once within %v: the session ran them one after the other",
			f.Gathered(), len(words), within)
	}
}

func (s *suite) missingProgram(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "no-such-cli")
	extra := map[string]any{s.cfg.CommandOption: prog}
	setup := s.cfg.Definition.Requirements.Setup
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s with %s %s = nil, want an error", what, s.cfg.CommandOption, prog)
			return
		}
		if !strings.Contains(err.Error(), prog) || setup != "" && !strings.Contains(err.Error(), setup) {
			t.Errorf("%s = %v, want it to name %s and say how to install it (%s)", what, err, prog, setup)
		}
	}
	p := s.params(t, "http://127.0.0.1:1", extra, testServer(t, "mst"))
	if pf := s.cfg.Definition.Preflight; pf != nil {
		check("Preflight", pf(p.Options))
	}
	_, err := s.open(t, p)
	check("Open", err)
}

func (s *suite) missingKey(t *testing.T) {
	p := s.params(t, "http://127.0.0.1:1", nil, testServer(t, "mst"))
	p.Env = map[string]string{}
	_, err := s.open(t, p)
	if err == nil || !strings.Contains(err.Error(), s.cfg.KeyVar) {
		t.Errorf("Open without %s = %v, want an error naming it", s.cfg.KeyVar, err)
	}
}

func (s *suite) closeAfterFailedOpen(t *testing.T) {
	type attempt struct {
		name string
		p    client.OpenParams
	}
	attempts := []attempt{{"a server that cannot start", s.params(t, "http://127.0.0.1:1", nil, testServer(t, "broken", "--fail-start"))}}
	if s.cfg.KeyVar != "" {
		p := s.params(t, "http://127.0.0.1:1", nil, testServer(t, "mst"))
		p.Env = map[string]string{}
		attempts = append(attempts, attempt{"no key", p})
	}
	if s.cfg.CommandOption != "" {
		attempts = append(attempts, attempt{"no program", s.params(t, "http://127.0.0.1:1", map[string]any{s.cfg.CommandOption: "/nonexistent/clienttest-cli"}, testServer(t, "mst"))})
	}
	attempts = append(attempts, attempt{"a session folder that cannot be made", func() client.OpenParams {
		p := s.params(t, "http://127.0.0.1:1", nil, testServer(t, "mst"))
		p.WorkDir = filepath.Join(failingProgramDir(t), "not-a-folder")
		return p
	}()})
	failed := 0
	for _, a := range attempts {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: Open or Close panicked: %v", a.name, r)
				}
			}()
			d := s.cfg.Definition
			if d.Open == nil {
				return
			}
			ctx, cancel := context.WithTimeout(t.Context(), s.cfg.TrialTimeout)
			defer cancel()
			sess, err := d.Open(ctx, a.p)
			if err != nil {
				failed++
			}
			if sess != nil {
				if cerr := sess.Close(); cerr != nil {
					t.Logf("%s: Open = %v; Close = %v", a.name, err, cerr)
				}
			}
		}()
	}
	if s.cfg.Definition.Open != nil && failed == 0 {
		t.Errorf("no Open failed (tried %d ways): the case tested nothing", len(attempts))
	}
}

// failingProgramDir returns a regular file's path, to be used as a folder
// that cannot hold anything.
func failingProgramDir(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
