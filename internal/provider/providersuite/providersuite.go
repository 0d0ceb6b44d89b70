package providersuite

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

// Case names one behaviour the suite checks; each runs as a subtest of
// that name.
type Case string

// The cases, in the order Run runs them. "Scripted" is a provider that
// reaches the fake server (Config.BaseURL set); the others (the offline
// model) are checked on what any model must do, by the shape of their
// answers.
const (
	// DefinitionData: the definition's Name is lowercase without "/", it
	// has a Description, and, for a scripted provider, the base URL of
	// Config.BaseURL passes its CheckBaseURL and every request goes to
	// that base URL's path followed by one of its Appends.
	DefinitionData Case = "definition"
	// Text: a plain answer comes back as Response.Text, whole (streamed in
	// pieces, non-ASCII included), with no tool calls, the usage the server
	// reported (input and output tokens) and a StopReason. The server got
	// one request, for the model given to New, with the system prompt,
	// the conversation, no tools, and the API key somewhere in its
	// headers or query. Unscripted: some text and non-zero usage.
	Text Case = "text"
	// ToolCall: two tool calls in one turn (text first) come back as two
	// ToolCalls in order, with the names and the JSON arguments the
	// server sent, and distinct non-empty IDs. Unscripted: every call
	// names an offered tool, has an ID and a JSON object of arguments.
	ToolCall Case = "tool-call"
	// ToolResults: the turn after ToolCall, carrying the assistant's calls
	// and one result for each (one of them an error), reaches the server
	// in the format's own shape: the decoded conversation equals the one
	// sent (call ids, names and arguments, result contents, and the
	// error flag where the format has one); the answer comes back.
	// Unscripted: the follow-up is answered.
	ToolResults Case = "tool-results"
	// Tools: the tools offered reach the server with their names,
	// descriptions and input schemas (equal as JSON), in order.
	Tools Case = "tools"
	// MaxTokens: Request.MaxTokens 0 is sent as 4096, and 1234 as 1234.
	MaxTokens Case = "max-tokens"
	// Stateless: a provider keeps no state between calls: conversation A,
	// then B, then A again; the server gets the same body for both A's
	// and nothing of A in B's. Unscripted: A gives the same answer twice.
	Stateless Case = "stateless"
	// Retry: 429 then 500 are retried with the default MaxRetries (-1:
	// 2), and 429, 502, 503 with MaxRetries 3; the answer then comes
	// back, and the server got exactly one request per attempt.
	Retry Case = "retry"
	// GiveUp: a 429 or 5xx that persists is tried 1+MaxRetries times (0, 1
	// and the default 2), then gives an *provider.Error with the
	// provider's name, the status and the server's message.
	GiveUp Case = "give-up"
	// NoRetry: 400, 401 and 403 are not retried: one request, then an
	// *provider.Error with that status.
	NoRetry Case = "no-retry"
	// Backoff: a 429 without retry-after headers is retried only after a
	// pause of at least MinBackoff from the 429's answer.
	Backoff Case = "backoff"
	// Cancel: a server that never answers; once the request has arrived
	// the context is cancelled, and Complete returns within Config.Within
	// with an error that wraps context.Canceled, after one request only,
	// and the server sees the connection closed.
	Cancel Case = "cancel"
	// Deadline: the same server; a context whose deadline passes
	// (DeadlineAfter) ends Complete within Config.Within with an error
	// that wraps context.DeadlineExceeded, and the request, if it was
	// sent, sees its connection closed.
	Deadline Case = "deadline"
	// Stall: the server sends the status, the headers and the first half
	// of the answer, then nothing more; cancelling the context ends
	// Complete within Config.Within with an error that wraps
	// context.Canceled, and the server sees the connection closed.
	Stall Case = "stall"
	// Cancelled: a context already cancelled gives an error that wraps
	// context.Canceled, within Config.Within.
	Cancelled Case = "cancelled"
	// Cut: an answer whose connection drops mid-body gives an error
	// (MaxRetries 0, every answer cut) or, when only the first is cut
	// and the provider retries, the whole answer; never part of it.
	Cut Case = "cut"
	// Truncated: an answer that ends cleanly but early (an event stream
	// without its last events, half a JSON body) gives an error, not
	// the part that came.
	Truncated Case = "truncated"
	// Down: nothing listens at the base URL; Complete returns an error
	// promptly (MaxRetries 0), and not an *provider.Error, which means
	// the provider answered.
	Down Case = "down"
	// Reset: a server that reads each request and then resets the
	// connection, before any answer, gets at most 1+MaxRetries requests
	// (MaxRetries 1): a retry budget bounds the whole Complete, however
	// many layers retry. The error is not an *provider.Error.
	Reset Case = "reset"
	// Concurrent: Goroutines calls of one Provider at once, each with its
	// own conversation, all reach the server at the same time (it holds
	// them until all have arrived) and each gets its own answer.
	// Unscripted: each gets the answer a lone call gets. Run the tests
	// with -race to catch data races too.
	Concurrent Case = "concurrent"
	// MissingKey: for a definition with a KeyVar, New without a key
	// fails, naming KeyVar, where the key is required (the public
	// address; a base URL unless KeyOptionalWithBaseURL), and, where it
	// is optional, builds a provider that answers without one.
	MissingKey Case = "missing-key"
)

// Cases lists every case in the order Run runs them.
func Cases() []Case {
	return []Case{DefinitionData, Text, ToolCall, ToolResults, Tools, MaxTokens, Stateless, Retry, GiveUp, NoRetry,
		Backoff, Cancel, Deadline, Stall, Cancelled, Cut, Truncated, Down, Reset, Concurrent, MissingKey}
}

// httpCases need the fake server: they do not apply without Config.BaseURL.
var httpCases = []Case{Tools, MaxTokens, Retry, GiveUp, NoRetry, Backoff, Cancel, Deadline, Stall, Cut, Truncated, Down, Reset}

// Goroutines is how many calls Concurrent makes at once.
const Goroutines = 8

// MinBackoff is the least pause Backoff accepts before a retry the server
// gave no time for. The SDKs wait about half a second.
const MinBackoff = 100 * time.Millisecond

// DeadlineAfter is how far in the future Deadline sets its deadline.
const DeadlineAfter = 500 * time.Millisecond

// callTimeout bounds a call the suite expects to end by itself, so that a
// provider that hangs fails its case instead of the whole test binary.
const callTimeout = 2 * time.Minute

// defaultWithin is Config.Within when zero.
const defaultWithin = 15 * time.Second

// Config describes the provider under test.
type Config struct {
	// Definition is the provider's definition, as registered. Its New
	// builds every provider of the suite.
	Definition *provider.Definition
	// Model is the model name given to New: the part of a model reference
	// after "name/" ("claude-test"), or "" (offline).
	Model string
	// Options are given to New, with BaseURL and MaxRetries set by each
	// case: the key (APIKey), the wire format (API).
	Options provider.Options
	// BaseURL turns the fake server's base address (http://127.0.0.1:PORT,
	// which serves /v1/messages, /v1/responses and /v1/chat/completions)
	// into the Options.BaseURL that reaches it: url itself for anthropic,
	// url+"/v1" for openai. Nil for a provider that makes no HTTP
	// requests (offline): the cases that need the server do not apply,
	// and the others check the shape of its answers, taking it to be
	// deterministic.
	BaseURL func(url string) string
	// Cannot lists the cases the provider cannot pass yet, each with the
	// reason. They still run and must still fail: a case that passes is an
	// error until its entry is removed, so a known gap is never forgotten. A case that does not apply by the
	// configuration (the server's cases without BaseURL, MissingKey
	// without KeyVar) needs no entry.
	Cannot map[Case]string
	// Within bounds how long Complete may take to return once its context
	// is done (15 s when zero): long enough for a slow machine, short
	// enough to catch a hang. Concurrent waits twice as long for the
	// calls to meet.
	Within time.Duration
}

// Run runs every case against the provider cfg describes, each as a
// parallel subtest named for its case.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	s, err := newSuite(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Cases() {
		// A case that does not apply to this configuration (the server's
		// cases for a provider without HTTP) has no subtest: there is
		// nothing of it to run.
		if why := s.notApplicable(c); why != "" {
			t.Logf("%s: does not apply: %s", c, why)
			continue
		}
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			errs := s.run(t, c)
			if why, ok := cfg.Cannot[c]; ok {
				if len(errs) == 0 {
					t.Errorf("%s passes %s now; remove it from Config.Cannot (%s)", cfg.Definition.Name, c, why)
				}
				for _, err := range errs {
					t.Logf("known (%s): %v", why, err)
				}
				return
			}
			for _, err := range errs {
				t.Error(err)
			}
		})
	}
}

type suite struct {
	cfg    Config
	within time.Duration
	cases  map[Case]func(*testing.T, *report)
}

func newSuite(cfg Config) (*suite, error) {
	if cfg.Definition == nil || cfg.Definition.New == nil {
		return nil, errors.New("providersuite: Config.Definition needs New (a definition without New has no provider to check)")
	}
	for c, why := range cfg.Cannot {
		if strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("providersuite: Config.Cannot[%s] has no reason", c)
		}
		if !slices.Contains(Cases(), c) {
			return nil, fmt.Errorf("providersuite: Config.Cannot names an unknown case %q (known: %v)", c, Cases())
		}
	}
	s := &suite{cfg: cfg, within: cfg.Within}
	if s.within <= 0 {
		s.within = defaultWithin
	}
	s.cases = map[Case]func(*testing.T, *report){
		DefinitionData: s.definition, Text: s.text, ToolCall: s.toolCall, ToolResults: s.toolResults,
		Tools: s.tools, MaxTokens: s.maxTokens, Stateless: s.stateless, Retry: s.retry, GiveUp: s.giveUp,
		NoRetry: s.noRetry, Backoff: s.backoff, Cancel: s.cancel, Deadline: s.deadline, Cancelled: s.cancelled,
		Stall: s.stall, Cut: s.cut, Truncated: s.truncated, Down: s.down, Reset: s.reset, Concurrent: s.concurrent,
		MissingKey: s.missingKey,
	}
	return s, nil
}

// notApplicable says why a case does not apply by the configuration, or "".
func (s *suite) notApplicable(c Case) string {
	switch {
	case !s.scripted() && slices.Contains(httpCases, c):
		return s.cfg.Definition.Name + " makes no HTTP requests (Config.BaseURL is nil)"
	case c == MissingKey && s.cfg.Definition.KeyVar == "":
		return s.cfg.Definition.Name + " reads no key (KeyVar is empty)"
	}
	return ""
}

// run runs one case and returns the problems it found.
func (s *suite) run(t *testing.T, c Case) []error {
	r := &report{}
	s.cases[c](t, r)
	return r.problems
}

func (s *suite) scripted() bool { return s.cfg.BaseURL != nil }

// report collects the problems of one case; it is safe for concurrent use.
type report struct {
	mu       sync.Mutex
	problems []error
}

func (r *report) errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Errorf(format, args...))
}

// env is one case's fake server, behind a front.
type env struct {
	srv   *providertest.Server
	front *front
	base  string // Options.BaseURL
}

func (s *suite) env(t *testing.T, script providertest.Script, mode frontMode) *env {
	t.Helper()
	srv := providertest.New(t, script)
	f := newFront(t, srv.URL, mode)
	return &env{srv: srv, front: f, base: s.cfg.BaseURL(f.URL)}
}

// newProvider builds the provider under test with base as its base URL.
func (s *suite) newProvider(r *report, base string, maxRetries int) provider.Provider {
	o := s.cfg.Options
	o.BaseURL, o.MaxRetries = base, maxRetries
	p, err := s.build(o)
	if err != nil || p == nil {
		r.errorf("New(%q, %+v) = %v, %v; want a Provider", s.cfg.Model, redact(o), p, err)
		return nil
	}
	return p
}

// build calls New, turning a panic into an error.
func (s *suite) build(o provider.Options) (p provider.Provider, err error) {
	defer func() {
		if v := recover(); v != nil {
			p, err = nil, fmt.Errorf("providersuite: New panicked: %v\n%s", v, debug.Stack())
		}
	}()
	return s.cfg.Definition.New(s.cfg.Model, o)
}

// redact hides the key of o, for messages.
func redact(o provider.Options) provider.Options {
	if o.APIKey != "" {
		o.APIKey = "(set)"
	}
	return o
}

// errPanicked is the error call returns for a Complete that panicked; the
// panic is reported already.
var errPanicked = errors.New("providersuite: Complete panicked")

// call calls p.Complete, turning a panic into a problem.
func call(ctx context.Context, r *report, p provider.Provider, req provider.Request) (resp provider.Response, err error) {
	defer func() {
		if v := recover(); v != nil {
			r.errorf("Complete panicked: %v\n%s", v, debug.Stack())
			resp, err = provider.Response{}, errPanicked
		}
	}()
	return p.Complete(ctx, req)
}

// complete calls p.Complete with a ceiling that only a hang reaches.
func complete(t *testing.T, r *report, p provider.Provider, req provider.Request) (provider.Response, error) {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	return call(ctx, r, p, req)
}

// asyncComplete calls p.Complete on another goroutine; the channel gets its
// error.
func asyncComplete(ctx context.Context, r *report, p provider.Provider, req provider.Request) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := call(ctx, r, p, req)
		done <- err
	}()
	return done
}
