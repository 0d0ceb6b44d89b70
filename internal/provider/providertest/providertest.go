package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/provider"
)

// Script tells the server how to answer. The zero Script answers every model
// request with the text "(script exhausted)".
type Script struct {
	// Conversations are tried in order: the first whose Match is a substring
	// of the conversation's first user text (see Request.FirstUserText)
	// answers. An empty Match matches any conversation. When none matches,
	// the answer is the text "(script exhausted)".
	Conversations []Conversation
	// Faults are applied in order before the conversations: each Fault
	// answers the next Times model requests (counted across all formats)
	// with its Status, then the next Fault does, then the conversations
	// answer. A Fault with Times 0 is skipped.
	Faults []Fault
	// Latency is waited before every scripted answer (not before faults or
	// errors), so that concurrent requests overlap. A client that goes away
	// ends the wait. A test of concurrency should use Gate instead, which
	// waits for the overlap itself rather than a time.
	Latency time.Duration
	// Gate, when its Conversations is set, holds scripted answers until
	// that many Conversations have a request in flight at once (see Gate).
	// It is applied before Latency.
	Gate Gate
	// Offline, when true, has MST's offline model (package
	// internal/builtin/provider/offline) answer every request in place of Conversations:
	// it reads the offered tools and the whole conversation, tool results
	// included, and decides the turn as that package documents. The tools
	// are shown to it under their servers' own names, without the prefix a
	// CLI adds (mcp__server__ for Claude Code, mcp_server_ for the Gemini
	// CLI; Codex's namespaced tools already carry their own names), and
	// its calls are answered with the names as offered. Faults, Gate and
	// Latency apply as they do to scripted answers.
	Offline bool
}

// Conversation is the scripted model side of one conversation.
type Conversation struct {
	// Match picks the conversation: a substring of the first user text, or
	// "" for any conversation.
	Match string
	// Turns are the model's answers: Turn k answers a request whose history
	// already holds k model turns. Past the last Turn the server answers with
	// the last Turn's Text alone, or "(script exhausted)" if it has none.
	Turns []Turn
}

// Turn is one model answer.
type Turn struct {
	// Text is the answer text. It may be combined with ToolCalls, in which
	// case the text comes first.
	Text string
	// ToolCalls are the tools the model asks for, in order.
	ToolCalls []Call
	// InputTokens and OutputTokens are the usage reported; zero means 10 and
	// 5.
	InputTokens, OutputTokens int64
	// Refusal, when set, makes the turn a refusal in the format's own
	// shape, with this text: Anthropic's stop_reason "refusal", a
	// Responses message whose content is a "refusal" part, a Chat
	// Completions message with "refusal" set and no content. Text and
	// ToolCalls are then not sent.
	Refusal string
}

// Call is one tool call of a scripted Turn.
type Call struct {
	// Tool names the tool. It is resolved against the tools offered in the
	// request, taking the first rule that finds one:
	//
	//  1. a tool named exactly Tool;
	//  2. a tool whose name ends in "__"+Tool or "."+Tool, then one whose
	//     name ends in "_"+Tool (the CLIs prefix MCP tools with
	//     mcp__server__);
	//  3. a tool whose name, or the part of it after its last "__" or ".",
	//     equals Tool once both are lowercased and stripped of every rune
	//     outside [a-z0-9] (so "greet (structured)" finds
	//     "greet_structured").
	//
	// For a Responses namespace tool, the inner name is matched and the call
	// carries the namespace. If no tool matches, Tool is sent as given.
	Tool string
	// Arguments are marshalled to JSON, except a json.RawMessage, which is
	// sent as it is. Nil means {}.
	Arguments any
}

// Fault is a scripted error answer, in the error shape of the request's
// format, with the headers retry-after-ms: 1 and retry-after: 0 so that SDK
// retries happen at once.
type Fault struct {
	// Status is the HTTP status, e.g. 429, 500 or 529.
	Status int
	// Times is how many requests this Fault answers.
	Times int
	// Message is the error message; "" gives a generic one.
	Message string
	// Hang, when true, makes the answer never come: the request is held
	// until its client goes away (a provider that accepts a request and
	// then says nothing). Status and Message are not used.
	Hang bool
	// Cut, when true, answers 200 with the first half of the answer the
	// conversation would have got, then drops the connection mid-body (a
	// stream cut off by the network). Status and Message are not used.
	Cut bool
}

// Formats, as recorded in Request.Format.
const (
	FormatAnthropic = "anthropic" // POST /v1/messages
	FormatResponses = "responses" // POST /v1/responses
	FormatChat      = "chat"      // POST /v1/chat/completions
	FormatGemini    = "gemini"    // POST /v1beta/models/{model}:streamGenerateContent or :generateContent
)

// Request is one request the server received.
type Request struct {
	// Format is FormatAnthropic, FormatResponses, FormatChat or
	// FormatGemini, or "" for a path the server does not serve.
	Format string
	Path   string
	Query  string // the raw query, without "?"
	Header http.Header
	// Body is the raw request body; it is not valid JSON if the client
	// sent something else.
	Body   json.RawMessage
	Model  string
	Stream bool
	// Tools are the names of the tools offered, in order. A Responses
	// namespace tool is recorded as namespace + "." + inner name, e.g.
	// "mcp__everything.echo"; a tool without a name by its type.
	Tools []string
	// FirstUserText is the text of the user messages that come before the
	// first model turn of the history, joined by "\n". With one user message
	// (the SDKs' usual case) it is that message's text; the CLIs may send
	// several, or several text blocks, and all of them count.
	FirstUserText string
	// Turn is how many model turns the history held: assistant messages for
	// Anthropic and Chat Completions, contents with role "model" for Gemini,
	// runs of consecutive model output items
	// (assistant messages, function calls, reasoning) for Responses.
	Turn int
	// Status is the HTTP status the server answered.
	Status int
}

// Server is a running fake provider. Its methods may be called from any
// goroutine.
type Server struct {
	// URL is the server's base address, e.g. http://127.0.0.1:PORT, with no
	// trailing slash. The Anthropic SDK and the Gemini CLI
	// (GOOGLE_GEMINI_BASE_URL) take it as it is; the OpenAI SDK and the Codex
	// CLI take URL + "/v1".
	URL string

	turns   [][]compiledTurn // per conversation
	matches []string
	faults  []Fault
	latency time.Duration
	formats map[string]*format
	// hold, when set, is called while a scripted answer is in flight, before
	// Latency; tests of this package use it to make requests overlap.
	hold func(ctx context.Context)
	gate *gate // nil without Script.Gate
	// offline is Script.Offline.
	offline bool

	mu          sync.Mutex
	requests    []Request
	faultIndex  int // Faults[faultIndex] answers next
	faultUsed   int // requests Faults[faultIndex] has answered
	inFlight    int
	maxInFlight int
	conns       int
	ids         map[string]int
}

// New starts a server on 127.0.0.1 that follows s, and stops it when the test
// ends. It fails the test if a Call's Arguments cannot be marshalled.
func New(t testing.TB, s Script) *Server {
	t.Helper()
	return newServer(t, s, nil)
}

func newServer(t testing.TB, s Script, hold func(ctx context.Context)) *Server {
	t.Helper()
	srv := &Server{
		faults:  append([]Fault(nil), s.Faults...),
		latency: s.Latency,
		hold:    hold,
		gate:    newGate(s.Gate),
		offline: s.Offline,
		ids:     map[string]int{},
	}
	for i, c := range s.Conversations {
		turns, err := compileTurns(c.Turns)
		if err != nil {
			t.Fatalf("providertest: conversation %d (match %q): %v", i, c.Match, err)
		}
		srv.matches = append(srv.matches, c.Match)
		srv.turns = append(srv.turns, turns)
	}
	srv.formats = map[string]*format{
		"/v1/messages":         anthropicFormat(),
		"/v1/responses":        responsesFormat(),
		"/v1/chat/completions": chatFormat(),
	}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(srv.serveHTTP))
	hs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			srv.mu.Lock()
			srv.conns++
			srv.mu.Unlock()
		}
	}
	hs.Start()
	srv.URL = hs.URL
	t.Cleanup(hs.Close)
	t.Cleanup(srv.gate.stop) // runs first: held requests end before Close waits for them
	return srv
}

// Connections reports how many connections clients have opened to the
// server so far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Requests returns a copy of every request received, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		r.Body = append(json.RawMessage(nil), r.Body...)
		r.Tools = append([]string(nil), r.Tools...)
		out[i] = r
	}
	return out
}

// MaxInFlight reports the highest number of model requests that were being
// served at the same time. A request counts from its arrival until its answer
// is fully written, Latency included.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

// format is one wire format: how to read its requests and write its answers.
type format struct {
	name string
	// parse reads a request body. It returns what it could read even when
	// the body is not valid for the format, along with an error that becomes
	// a 400 answer.
	parse func(body []byte) (parsed, error)
	// answer writes a successful answer.
	answer func(w http.ResponseWriter, p parsed, a answer, ids idSource)
	// fail writes an error in the format's own shape.
	fail func(w http.ResponseWriter, status int, message string)
}

// parsed is what the server needs from a request.
type parsed struct {
	model         string
	stream        bool
	includeUsage  bool // Chat Completions: stream_options.include_usage
	tools         []offeredTool
	firstUserText string
	turn          int
	// history is the conversation as the offline model reads it.
	history []provider.Message
}

// idSource hands out identifiers such as toolu_1 that are unique within a
// server.
type idSource func(prefix string) string

// maxBody bounds the request body the server reads.
const maxBody = 64 << 20

// serveHTTP answers one request; see the package documentation for the flow.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	rec := Request{
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
		Header: r.Header.Clone(),
		Body:   body,
	}
	f, ok := s.formats[r.URL.Path]
	if !ok {
		// Gemini names the model in the path.
		f, ok = geminiFormat(r.URL.Path)
	}
	if !ok {
		rec.Status = http.StatusNotFound
		s.record(rec)
		writeJSON(w, http.StatusNotFound, map[string]any{
			"type": "error",
			"error": map[string]any{
				"type": "not_found_error",
				"message": fmt.Sprintf("providertest: no endpoint %s %s; this fake serves POST /v1/messages, "+
					"POST /v1/responses, POST /v1/chat/completions and POST /v1beta/models/MODEL:streamGenerateContent "+
					"or :generateContent", r.Method, r.URL.Path),
			},
		})
		return
	}
	rec.Format = f.name
	if r.Method != http.MethodPost {
		rec.Status = http.StatusMethodNotAllowed
		s.record(rec)
		w.Header().Set("Allow", http.MethodPost)
		f.fail(w, http.StatusMethodNotAllowed, fmt.Sprintf("providertest: %s takes POST, not %s", r.URL.Path, r.Method))
		return
	}

	s.enter()
	defer s.leave()

	var p parsed
	var perr error
	if err != nil {
		perr = fmt.Errorf("providertest: reading the request body: %w", err)
	} else {
		p, perr = f.parse(body)
	}
	rec.Model, rec.Stream = p.model, p.stream
	rec.FirstUserText, rec.Turn = p.firstUserText, p.turn
	for _, t := range p.tools {
		rec.Tools = append(rec.Tools, t.recorded)
	}

	fault, ordinal := s.admit(&rec, perr)
	switch {
	case fault != nil && fault.Hang:
		<-r.Context().Done()
		return
	case fault != nil && fault.Cut && perr == nil:
		cut(w, func(w http.ResponseWriter) { f.answer(w, p, s.answerFor(p), s.newID) })
		return
	case fault != nil:
		msg := fault.Message
		if msg == "" {
			msg = fmt.Sprintf("providertest: scripted fault %d (HTTP %d)", ordinal, fault.Status)
		}
		w.Header().Set("retry-after-ms", "1")
		w.Header().Set("retry-after", "0")
		f.fail(w, fault.Status, msg)
		return
	case perr != nil:
		f.fail(w, http.StatusBadRequest, perr.Error())
		return
	}

	if s.hold != nil {
		s.hold(r.Context())
	}
	if !s.gate.wait(r.Context(), s.conversationIndex(p.firstUserText)) {
		return
	}
	if s.latency > 0 {
		timer := time.NewTimer(s.latency)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			return
		}
	}
	f.answer(w, p, s.answerFor(p), s.newID)
}

// cut writes the first half of what answer would write, with its status
// and headers, then aborts the connection: the client reads a body that
// ends early (an unexpected EOF).
func cut(w http.ResponseWriter, answer func(w http.ResponseWriter)) {
	rec := httptest.NewRecorder()
	answer(rec)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	body := rec.Body.Bytes()
	w.Write(body[:len(body)/2])
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	panic(http.ErrAbortHandler)
}

// enter and leave count the model requests in flight.
func (s *Server) enter() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
}

func (s *Server) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
}

func (s *Server) record(rec Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
}

// admit takes the next pending fault, if any, sets rec.Status and records
// rec, all under one lock so that the recorded order is the order in which
// faults were handed out. It returns the fault and its 1-based ordinal among
// all fault answers.
func (s *Server) admit(rec *Request, perr error) (*Fault, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.requests = append(s.requests, *rec) }()
	for s.faultIndex < len(s.faults) && s.faultUsed >= s.faults[s.faultIndex].Times {
		s.faultIndex++
		s.faultUsed = 0
	}
	if s.faultIndex < len(s.faults) {
		f := s.faults[s.faultIndex]
		s.faultUsed++
		ordinal := s.faultUsed
		for _, prev := range s.faults[:s.faultIndex] {
			ordinal += max(prev.Times, 0)
		}
		rec.Status = f.Status
		switch {
		case f.Cut:
			rec.Status = http.StatusOK
		case f.Hang:
			rec.Status = 0 // never answered
		}
		return &f, ordinal
	}
	if perr != nil {
		rec.Status = http.StatusBadRequest
	} else {
		rec.Status = http.StatusOK
	}
	return nil, 0
}

// newID returns prefix followed by a number unique among the server's
// identifiers of that prefix.
func (s *Server) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[prefix]++
	return fmt.Sprintf("%s%d", prefix, s.ids[prefix])
}

// writeJSON writes v as a JSON answer with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built by this package from plain
		// types, so this is a bug in the package.
		panic(fmt.Sprintf("providertest: marshalling an answer: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// joinTexts joins non-empty texts with newlines.
func joinTexts(texts []string) string {
	var kept []string
	for _, t := range texts {
		if t != "" {
			kept = append(kept, t)
		}
	}
	return strings.Join(kept, "\n")
}
