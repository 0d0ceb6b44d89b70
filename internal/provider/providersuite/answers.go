package providersuite

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

// The material of the scripted cases.
const (
	systemText   = "You are under test. Answer briefly."
	answerText   = "The answer is 42 — naïve café, ✓ done."
	inputTokens  = 123
	outputTokens = 45
)

// suiteTools are the tools the suite offers.
var suiteTools = []provider.Tool{
	{
		Name:        "echo",
		Description: "Echoes the text it is given.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","description":"the text to echo"},` +
			`"n":{"type":"integer","minimum":1},"nested":{"type":"object","properties":{"k":{"type":"array","items":{"type":"integer"}}}}},` +
			`"required":["s"],"additionalProperties":false}`),
	},
	{
		Name:        "add",
		Description: "Adds two numbers: a + b — «exactly».",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
	},
	{
		Name:        "no_args",
		Description: "Takes no arguments.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
	},
}

// user is a conversation of one user message.
func user(text string) []provider.Message {
	return []provider.Message{{Role: provider.User, Text: text}}
}

// oneTurn is a conversation that answers text once, picked by match in
// its first user text.
func oneTurn(match, text string) providertest.Conversation {
	return providertest.Conversation{Match: match, Turns: []providertest.Turn{{Text: text, InputTokens: inputTokens, OutputTokens: outputTokens}}}
}

// textScript answers "suite:text" with answerText.
func textScript() providertest.Script {
	return providertest.Script{Conversations: []providertest.Conversation{oneTurn("suite:text", answerText)}}
}

// textRequest is the request textScript answers.
func textRequest() provider.Request {
	return provider.Request{System: systemText, Messages: user("suite:text What is the answer?")}
}

// checkText checks that resp is the answer of textScript.
func checkText(r *report, what string, resp provider.Response) {
	if resp.Text != answerText {
		r.errorf("%s: Text = %q, want %q (the whole answer the server streamed)", what, resp.Text, answerText)
	}
	if len(resp.ToolCalls) != 0 {
		r.errorf("%s: ToolCalls = %+v, want none: the server sent only text", what, resp.ToolCalls)
	}
	want := provider.Usage{InputTokens: inputTokens, OutputTokens: outputTokens}
	if resp.Usage != want {
		r.errorf("%s: Usage = %+v, want %+v (what the server reported)", what, resp.Usage, want)
	}
}

// statuses returns the status the server answered to each request.
func statuses(srv *providertest.Server) []int {
	var out []int
	for _, q := range srv.Requests() {
		out = append(out, q.Status)
	}
	return out
}

// readOne reads request i of srv, reporting why it cannot.
func readOne(r *report, srv *providertest.Server, i int) (sent, bool) {
	reqs := srv.Requests()
	if i >= len(reqs) {
		r.errorf("the server received %d requests; the case needs request %d", len(reqs), i+1)
		return sent{}, false
	}
	w, err := read(reqs[i])
	if err != nil {
		r.errorf("request %d: %v", i+1, err)
		return sent{}, false
	}
	return w, true
}

// checkConversation compares what the server received with the messages
// sent.
func checkConversation(r *report, what string, w sent, msgs []provider.Message) {
	want := comparable(msgs, w.ErrorFlag)
	got := comparable(w.Messages, w.ErrorFlag)
	if !w.ErrorFlag && len(got) == len(want) {
		// A format without an error flag may mark an error in the
		// content; the result's own content must still be there.
		for i := range got {
			for j := range got[i].ToolResults {
				if j < len(want[i].ToolResults) && strings.Contains(got[i].ToolResults[j].Content, want[i].ToolResults[j].Content) {
					got[i].ToolResults[j].Content = want[i].ToolResults[j].Content
				}
			}
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		r.errorf("%s: the conversation the server received (%s format) differs from the Request's (-sent +received):\n%s", what, w.Format, d)
	}
}

func (s *suite) definition(t *testing.T, r *report) {
	d := s.cfg.Definition
	switch {
	case d.Name == "":
		r.errorf("Definition.Name is empty")
	case d.Name != strings.ToLower(d.Name) || strings.Contains(d.Name, "/"):
		r.errorf("Definition.Name %q must be lowercase and without \"/\": it starts a model reference", d.Name)
	}
	if strings.TrimSpace(d.Description) == "" {
		r.errorf("Definition.Description is empty; say in one line what the provider is")
	}
	if !s.scripted() {
		return
	}
	e := s.env(t, textScript(), passAnswers)
	if err := d.CheckBaseURL("Config.BaseURL", e.base); err != nil {
		r.errorf("the definition's own CheckBaseURL refuses the base URL that reaches the fake server: %v", err)
	}
	if len(d.Appends) == 0 {
		r.errorf("Definition.Appends is empty; list the paths the provider adds to a base URL (CheckBaseURL guards a base URL with them)")
	}
	p := s.newProvider(r, e.base, 0)
	if p == nil {
		return
	}
	if _, err := complete(t, r, p, textRequest()); err != nil {
		r.errorf("Complete() error = %v, want an answer", err)
	}
	u, err := url.Parse(e.base)
	if err != nil {
		r.errorf("Config.BaseURL gave %q: %v", e.base, err)
		return
	}
	basePath := strings.TrimRight(u.Path, "/")
	for i, q := range e.srv.Requests() {
		ok := false
		for _, a := range d.Appends {
			ok = ok || q.Path == basePath+a
		}
		if !ok {
			r.errorf("request %d went to %s, which is not the base URL's path %q followed by one of Appends %q", i+1, q.Path, basePath, d.Appends)
		}
	}
}

func (s *suite) text(t *testing.T, r *report) {
	if !s.scripted() {
		s.textUnscripted(t, r)
		return
	}
	e := s.env(t, textScript(), passAnswers)
	p := s.newProvider(r, e.base, 0)
	if p == nil {
		return
	}
	req := textRequest()
	resp, err := complete(t, r, p, req)
	if err != nil {
		r.errorf("Complete() error = %v, want the text %q", err, answerText)
		return
	}
	checkText(r, "Complete()", resp)
	if resp.StopReason == "" {
		r.errorf("Complete(): StopReason is empty; set it to the provider's word for why the turn ended")
	}
	reqs := e.srv.Requests()
	if len(reqs) != 1 {
		r.errorf("the server received %d requests, want 1", len(reqs))
	}
	w, ok := readOne(r, e.srv, 0)
	if !ok {
		return
	}
	if w.Model != s.cfg.Model {
		r.errorf("the request names model %q, want %q (the model given to New)", w.Model, s.cfg.Model)
	}
	if w.System != systemText {
		r.errorf("the request's system prompt is %q, want %q", w.System, systemText)
	}
	if len(w.Tools) != 0 {
		r.errorf("the request offers tools %+v; the Request offered none", w.Tools)
	}
	checkConversation(r, "the request", w, req.Messages)
	if key := s.cfg.Options.APIKey; key != "" && !carries(reqs[0], key) {
		r.errorf("the request carries the API key in none of its headers or query parameters")
	}
}

// carries reports whether q has key in a header or the query.
func carries(q providertest.Request, key string) bool {
	for _, vs := range q.Header {
		for _, v := range vs {
			if strings.Contains(v, key) {
				return true
			}
		}
	}
	vals, _ := url.ParseQuery(q.Query)
	for _, vs := range vals {
		if slices.Contains(vs, key) {
			return true
		}
	}
	return false
}

func (s *suite) textUnscripted(t *testing.T, r *report) {
	p := s.newProvider(r, "", 0)
	if p == nil {
		return
	}
	resp, err := complete(t, r, p, textRequest())
	if err != nil {
		r.errorf("Complete() error = %v, want an answer", err)
		return
	}
	if strings.TrimSpace(resp.Text) == "" {
		r.errorf("Complete() = %+v, want some text", resp)
	}
	if len(resp.ToolCalls) != 0 {
		r.errorf("Complete() called %+v, but no tools were offered", resp.ToolCalls)
	}
	if resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 {
		r.errorf("Complete(): Usage = %+v, want input and output tokens counted", resp.Usage)
	}
}

// The scripted tool turn: text, then two calls.
var (
	callText   = "Let me use the tools."
	echoArgs   = json.RawMessage(`{"s":"héllo \"world\"","n":2,"nested":{"k":[1,2,3]}}`)
	addArgs    = json.RawMessage(`{"a":2.5,"b":-3}`)
	finalText  = "Done: héllo and -0.5."
	toolPrompt = "suite:tools Echo héllo and add 2.5 and -3."
)

func toolScript() providertest.Script {
	return providertest.Script{Conversations: []providertest.Conversation{{
		Match: "suite:tools",
		Turns: []providertest.Turn{
			{Text: callText, ToolCalls: []providertest.Call{{Tool: "echo", Arguments: echoArgs}, {Tool: "add", Arguments: addArgs}}, InputTokens: 77, OutputTokens: 12},
			{Text: finalText, InputTokens: 150, OutputTokens: 9},
		},
	}}}
}

func toolRequest() provider.Request {
	return provider.Request{System: systemText, Messages: user(toolPrompt), Tools: suiteTools}
}

// firstToolTurn runs the first turn of toolScript (scripted) and checks its
// answer; ok is false when the case cannot go on.
func (s *suite) firstToolTurn(t *testing.T, r *report, p provider.Provider) (provider.Response, bool) {
	resp, err := complete(t, r, p, toolRequest())
	if err != nil {
		r.errorf("Complete() error = %v, want two tool calls", err)
		return resp, false
	}
	if resp.Text != callText {
		r.errorf("Complete(): Text = %q, want %q (sent before the calls)", resp.Text, callText)
	}
	if want := (provider.Usage{InputTokens: 77, OutputTokens: 12}); resp.Usage != want {
		r.errorf("Complete(): Usage = %+v, want %+v", resp.Usage, want)
	}
	if resp.StopReason == "" {
		r.errorf("Complete(): StopReason is empty")
	}
	if len(resp.ToolCalls) != 2 {
		r.errorf("Complete(): ToolCalls = %+v, want 2 (echo, then add)", resp.ToolCalls)
		return resp, false
	}
	for i, want := range []struct {
		name string
		args json.RawMessage
	}{{"echo", echoArgs}, {"add", addArgs}} {
		c := resp.ToolCalls[i]
		if c.Name != want.name {
			r.errorf("Complete(): ToolCalls[%d].Name = %q, want %q", i, c.Name, want.name)
		}
		if !jsonEqual(c.Arguments, want.args) {
			r.errorf("Complete(): ToolCalls[%d].Arguments = %s, want %s (equal as JSON)", i, c.Arguments, want.args)
		}
		if c.ID == "" {
			r.errorf("Complete(): ToolCalls[%d].ID is empty; the result must name its call", i)
		}
	}
	if a, b := resp.ToolCalls[0].ID, resp.ToolCalls[1].ID; a == b {
		r.errorf("Complete(): both tool calls have the ID %q; each call needs its own", a)
	}
	return resp, true
}

func (s *suite) toolCall(t *testing.T, r *report) {
	if !s.scripted() {
		s.toolsUnscripted(t, r, false)
		return
	}
	e := s.env(t, toolScript(), passAnswers)
	p := s.newProvider(r, e.base, 0)
	if p == nil {
		return
	}
	s.firstToolTurn(t, r, p)
}

// results answers the calls of resp: the first with its content, the
// others with an error.
func results(resp provider.Response) provider.Message {
	m := provider.Message{Role: provider.User}
	for i, c := range resp.ToolCalls {
		res := provider.ToolResult{CallID: c.ID, Name: c.Name, Content: "héllo \"world\""}
		if i > 0 {
			res.Content, res.IsError = "add failed: «overflow»", true
		}
		m.ToolResults = append(m.ToolResults, res)
	}
	return m
}

func (s *suite) toolResults(t *testing.T, r *report) {
	if !s.scripted() {
		s.toolsUnscripted(t, r, true)
		return
	}
	e := s.env(t, toolScript(), passAnswers)
	p := s.newProvider(r, e.base, 0)
	if p == nil {
		return
	}
	first, ok := s.firstToolTurn(t, r, p)
	if !ok {
		r.errorf("the first turn failed (see tool-call), so the results cannot be sent")
		return
	}
	req := toolRequest()
	req.Messages = append(req.Messages,
		provider.Message{Role: provider.Assistant, Text: first.Text, ToolCalls: first.ToolCalls, Reasoning: first.Reasoning},
		results(first))
	resp, err := complete(t, r, p, req)
	if err != nil {
		r.errorf("Complete(with tool results) error = %v, want the final answer", err)
		return
	}
	if resp.Text != finalText || len(resp.ToolCalls) != 0 {
		r.errorf("Complete(with tool results) = text %q, calls %+v; want the text %q and no calls", resp.Text, resp.ToolCalls, finalText)
	}
	if want := (provider.Usage{InputTokens: 150, OutputTokens: 9}); resp.Usage != want {
		r.errorf("Complete(with tool results): Usage = %+v, want %+v", resp.Usage, want)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 2 {
		r.errorf("the server received %d requests, want 2", len(reqs))
		return
	}
	if reqs[1].Turn != 1 {
		r.errorf("the server counted %d model turns in the second request's history, want 1", reqs[1].Turn)
	}
	w, ok := readOne(r, e.srv, 1)
	if !ok {
		return
	}
	checkConversation(r, "the request with the tool results", w, req.Messages)
}

// toolsUnscripted checks a model that cannot be scripted on the tool
// turn, and with followUp on the turn that answers its calls (with a call
// of its own made up when it made none).
func (s *suite) toolsUnscripted(t *testing.T, r *report, followUp bool) {
	p := s.newProvider(r, "", 0)
	if p == nil {
		return
	}
	req := provider.Request{System: systemText, Messages: user("Please echo the text 'héllo' back to me."), Tools: suiteTools}
	resp, err := complete(t, r, p, req)
	if err != nil {
		r.errorf("Complete() error = %v, want an answer", err)
		return
	}
	if len(resp.ToolCalls) == 0 && strings.TrimSpace(resp.Text) == "" {
		r.errorf("Complete() = %+v, want text or tool calls", resp)
	}
	if resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 {
		r.errorf("Complete(): Usage = %+v, want input and output tokens counted", resp.Usage)
	}
	ids := map[string]bool{}
	for i, c := range resp.ToolCalls {
		if !slices.ContainsFunc(suiteTools, func(tool provider.Tool) bool { return tool.Name == c.Name }) {
			r.errorf("ToolCalls[%d] names %q, which was not offered", i, c.Name)
		}
		if c.ID == "" || ids[c.ID] {
			r.errorf("ToolCalls[%d].ID %q is empty or repeated", i, c.ID)
		}
		ids[c.ID] = true
		var args map[string]any
		if json.Unmarshal(c.Arguments, &args) != nil || args == nil {
			r.errorf("ToolCalls[%d].Arguments %s is not a JSON object", i, c.Arguments)
		}
	}
	if !followUp {
		return
	}
	if len(resp.ToolCalls) == 0 {
		resp.ToolCalls = []provider.ToolCall{{ID: "call_1", Name: "echo", Arguments: json.RawMessage(`{"s":"héllo"}`)}}
	}
	req.Messages = append(req.Messages, provider.Message{Role: provider.Assistant, Text: resp.Text, ToolCalls: resp.ToolCalls, Reasoning: resp.Reasoning}, results(resp))
	next, err := complete(t, r, p, req)
	if err != nil {
		r.errorf("Complete(with tool results) error = %v, want an answer", err)
		return
	}
	if len(next.ToolCalls) == 0 && strings.TrimSpace(next.Text) == "" {
		r.errorf("Complete(with tool results) = %+v, want text or tool calls", next)
	}
}

func (s *suite) tools(t *testing.T, r *report) {
	e := s.env(t, textScript(), passAnswers)
	p := s.newProvider(r, e.base, 0)
	if p == nil {
		return
	}
	req := textRequest()
	req.Tools = suiteTools
	if _, err := complete(t, r, p, req); err != nil {
		r.errorf("Complete() error = %v, want an answer", err)
		return
	}
	w, ok := readOne(r, e.srv, 0)
	if !ok {
		return
	}
	if len(w.Tools) != len(suiteTools) {
		r.errorf("the request offers %d tools, want %d (%+v)", len(w.Tools), len(suiteTools), w.Tools)
		return
	}
	for i, want := range suiteTools {
		got := w.Tools[i]
		if got.Name != want.Name || got.Description != want.Description {
			r.errorf("tool %d reached the server as %q (%q), want %q (%q)", i, got.Name, got.Description, want.Name, want.Description)
		}
		if !jsonEqual(got.InputSchema, want.InputSchema) {
			r.errorf("tool %q's input schema reached the server as %s, want %s (equal as JSON)", want.Name, got.InputSchema, want.InputSchema)
		}
	}
}

func (s *suite) maxTokens(t *testing.T, r *report) {
	e := s.env(t, textScript(), passAnswers)
	p := s.newProvider(r, e.base, 0)
	if p == nil {
		return
	}
	for i, tc := range []struct{ in, want int64 }{{0, 4096}, {1234, 1234}} {
		req := textRequest()
		req.MaxTokens = int(tc.in)
		if _, err := complete(t, r, p, req); err != nil {
			r.errorf("Complete(MaxTokens %d) error = %v", tc.in, err)
			return
		}
		w, ok := readOne(r, e.srv, i)
		if !ok {
			return
		}
		if w.MaxTokens != tc.want {
			r.errorf("MaxTokens %d reached the server as %d, want %d", tc.in, w.MaxTokens, tc.want)
		}
	}
}

func (s *suite) stateless(t *testing.T, r *report) {
	a := provider.Request{System: systemText, Messages: user("suite:first Hello."), Tools: suiteTools[:1]}
	b := provider.Request{Messages: user("suite:second Goodbye.")}
	if !s.scripted() {
		p := s.newProvider(r, "", 0)
		if p == nil {
			return
		}
		var out []provider.Response
		for _, req := range []provider.Request{a, b, a} {
			resp, err := complete(t, r, p, req)
			if err != nil {
				r.errorf("Complete() error = %v", err)
				return
			}
			out = append(out, resp)
		}
		if d := cmp.Diff(out[0], out[2]); d != "" {
			r.errorf("the same request, before and after another, got different answers (-first +second):\n%s", d)
		}
		return
	}
	e := s.env(t, providertest.Script{Conversations: []providertest.Conversation{oneTurn("suite:first", "one"), oneTurn("suite:second", "two")}}, passAnswers)
	p := s.newProvider(r, e.base, 0)
	if p == nil {
		return
	}
	for i, req := range []provider.Request{a, b, a} {
		resp, err := complete(t, r, p, req)
		if err != nil {
			r.errorf("Complete(request %d) error = %v", i+1, err)
			return
		}
		if want := []string{"one", "two", "one"}[i]; resp.Text != want {
			r.errorf("Complete(request %d): Text = %q, want %q", i+1, resp.Text, want)
		}
	}
	reqs := e.srv.Requests()
	if len(reqs) != 3 {
		r.errorf("the server received %d requests, want 3", len(reqs))
		return
	}
	if !jsonEqual(reqs[0].Body, reqs[2].Body) {
		r.errorf("the same Request sent twice gave different bodies:\n%s\n%s", reqs[0].Body, reqs[2].Body)
	}
	if w, ok := readOne(r, e.srv, 1); ok {
		checkConversation(r, "the second request", w, b.Messages)
		if w.System != "" || len(w.Tools) != 0 {
			r.errorf("the second request has system %q and tools %+v, which only the first Request had", w.System, w.Tools)
		}
	}
}

func (s *suite) concurrent(t *testing.T, r *report) {
	reqs := make([]provider.Request, Goroutines)
	var convs []providertest.Conversation
	for i := range reqs {
		reqs[i] = provider.Request{Messages: user(fmt.Sprintf("suite:concurrent-%d.", i))}
		convs = append(convs, oneTurn(fmt.Sprintf("suite:concurrent-%d.", i), fmt.Sprintf("answer %d", i)))
	}
	var p provider.Provider
	var e *env
	if s.scripted() {
		e = s.env(t, providertest.Script{Conversations: convs, Gate: providertest.Gate{Conversations: Goroutines, Within: 2 * s.within}}, passAnswers)
		p = s.newProvider(r, e.base, 0)
	} else {
		p = s.newProvider(r, "", 0)
		reqs = slices.Repeat([]provider.Request{{Messages: user("Please echo 'héllo'."), Tools: suiteTools}}, Goroutines)
	}
	if p == nil {
		return
	}
	var lone provider.Response
	if e == nil {
		var err error
		if lone, err = complete(t, r, p, reqs[0]); err != nil {
			r.errorf("Complete() error = %v", err)
			return
		}
	}
	out := make([]provider.Response, Goroutines)
	errs := make([]error, Goroutines)
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { out[i], errs[i] = complete(t, r, p, reqs[i]) })
	}
	wg.Wait()
	for i := range reqs {
		switch {
		case errs[i] != nil:
			r.errorf("call %d of %d at once: Complete() error = %v", i, Goroutines, errs[i])
		case e != nil && out[i].Text != fmt.Sprintf("answer %d", i):
			r.errorf("call %d of %d at once: Text = %q, want %q", i, Goroutines, out[i].Text, fmt.Sprintf("answer %d", i))
		case e == nil && !cmp.Equal(out[i], lone):
			r.errorf("call %d of %d at once differs from a lone call (-lone +concurrent):\n%s", i, Goroutines, cmp.Diff(lone, out[i]))
		}
	}
	if e != nil {
		if got := e.srv.Gathered(); got != Goroutines {
			r.errorf("at most %d of the %d calls reached the server at once, want all: Complete must not serialize callers", got, Goroutines)
		}
	}
}

func (s *suite) missingKey(t *testing.T, r *report) {
	d := s.cfg.Definition
	o := s.cfg.Options
	o.APIKey, o.MaxRetries = "", 0
	if d.KeyRequired("") {
		o.BaseURL = ""
		p, err := s.build(o)
		switch {
		case err == nil:
			r.errorf("New(%q) without a key for the public address = %T, nil; want an error naming %s", s.cfg.Model, p, d.KeyVar)
		case !strings.Contains(err.Error(), d.KeyVar):
			r.errorf("New(%q) without a key: %v; the error should name %s, where the key goes", s.cfg.Model, err, d.KeyVar)
		}
	}
	if !s.scripted() {
		return
	}
	e := s.env(t, textScript(), passAnswers)
	o.BaseURL = e.base
	p, err := s.build(o)
	if d.KeyRequired(e.base) {
		if err == nil {
			r.errorf("New(%q) without a key, at a base URL = %T, nil; want an error naming %s (KeyOptionalWithBaseURL is false)", s.cfg.Model, p, d.KeyVar)
		}
		return
	}
	if err != nil {
		r.errorf("New(%q) without a key, at a base URL: %v; KeyOptionalWithBaseURL says the key may be left out there", s.cfg.Model, err)
		return
	}
	resp, err := complete(t, r, p, textRequest())
	if err != nil {
		r.errorf("Complete() without a key, at a base URL: %v, want the answer", err)
		return
	}
	checkText(r, "Complete() without a key", resp)
}
