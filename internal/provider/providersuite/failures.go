package providersuite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

// attempts is one run of a retry scenario.
type attempts struct {
	faults     []providertest.Fault
	maxRetries int
	want       []int // statuses the server answered
}

func (s *suite) retry(t *testing.T, r *report) {
	for _, a := range []attempts{
		{faults: []providertest.Fault{{Status: 429, Times: 1}, {Status: 500, Times: 1}}, maxRetries: -1, want: []int{429, 500, 200}},
		{faults: []providertest.Fault{{Status: 429, Times: 1}, {Status: 502, Times: 1}, {Status: 503, Times: 1}}, maxRetries: 3, want: []int{429, 502, 503, 200}},
	} {
		script := textScript()
		script.Faults = a.faults
		e := s.env(t, script, passAnswers)
		p := s.newProvider(r, e.base, a.maxRetries)
		if p == nil {
			return
		}
		what := fmt.Sprintf("MaxRetries %d, answers %v", a.maxRetries, a.want)
		resp, err := complete(t, r, p, textRequest())
		if err != nil {
			r.errorf("%s: Complete() error = %v, want the answer after the retries", what, err)
		} else {
			checkText(r, what, resp)
		}
		if got := statuses(e.srv); !slices.Equal(got, a.want) {
			r.errorf("%s: the server answered %v, want %v", what, got, a.want)
		}
	}
}

// checkError checks that err is the *provider.Error of a status the
// server sent with message.
func (s *suite) checkError(r *report, what string, err error, status int, message string) {
	var pe *provider.Error
	if !errors.As(err, &pe) {
		r.errorf("%s: Complete() error = %v (%T), want a *provider.Error with status %d", what, err, err, status)
		return
	}
	if pe.Status != status {
		r.errorf("%s: Status = %d, want %d", what, pe.Status, status)
	}
	if pe.Provider != s.cfg.Definition.Name {
		r.errorf("%s: Provider = %q, want %q (the definition's name)", what, pe.Provider, s.cfg.Definition.Name)
	}
	if !strings.Contains(pe.Message, message) {
		r.errorf("%s: Message = %q, want it to hold the server's message %q", what, pe.Message, message)
	}
}

func (s *suite) giveUp(t *testing.T, r *report) {
	for _, a := range []attempts{
		{faults: []providertest.Fault{{Status: 500, Times: 10}}, maxRetries: 0, want: []int{500}},
		{faults: []providertest.Fault{{Status: 429, Times: 10}}, maxRetries: 1, want: []int{429, 429}},
		{faults: []providertest.Fault{{Status: 503, Times: 10}}, maxRetries: -1, want: []int{503, 503, 503}},
	} {
		msg := fmt.Sprintf("suite: still failing with %d", a.faults[0].Status)
		a.faults[0].Message = msg
		script := textScript()
		script.Faults = a.faults
		e := s.env(t, script, passAnswers)
		p := s.newProvider(r, e.base, a.maxRetries)
		if p == nil {
			return
		}
		what := fmt.Sprintf("MaxRetries %d, %d every time", a.maxRetries, a.faults[0].Status)
		_, err := complete(t, r, p, textRequest())
		s.checkError(r, what, err, a.faults[0].Status, msg)
		if got := statuses(e.srv); !slices.Equal(got, a.want) {
			r.errorf("%s: the server answered %v, want %v (1+MaxRetries attempts)", what, got, a.want)
		}
	}
}

func (s *suite) noRetry(t *testing.T, r *report) {
	for _, status := range []int{400, 401, 403} {
		msg := fmt.Sprintf("suite: refused with %d", status)
		script := textScript()
		script.Faults = []providertest.Fault{{Status: status, Times: 10, Message: msg}}
		e := s.env(t, script, passAnswers)
		p := s.newProvider(r, e.base, 2)
		if p == nil {
			return
		}
		what := fmt.Sprintf("%d", status)
		_, err := complete(t, r, p, textRequest())
		s.checkError(r, what, err, status, msg)
		if got := statuses(e.srv); !slices.Equal(got, []int{status}) {
			r.errorf("%s: the server answered %v, want one request: %d is not worth a retry", what, got, status)
		}
	}
}

func (s *suite) backoff(t *testing.T, r *report) {
	script := textScript()
	script.Faults = []providertest.Fault{{Status: 429, Times: 1}}
	e := s.env(t, script, stripRetryAfter)
	p := s.newProvider(r, e.base, 1)
	if p == nil {
		return
	}
	resp, err := complete(t, r, p, textRequest())
	if err != nil {
		r.errorf("Complete() error = %v, want the answer after one retry", err)
		return
	}
	checkText(r, "Complete()", resp)
	ts := e.front.timings()
	if len(ts) != 2 {
		r.errorf("the server received %d requests, want 2", len(ts))
		return
	}
	if gap := ts[1].arrived.Sub(ts[0].answered); gap < MinBackoff {
		r.errorf("the retry came %v after the 429, want at least %v: a rate-limited provider needs a pause", gap, MinBackoff)
	}
}

// hangScript holds the first request until its client goes away.
func hangScript() providertest.Script {
	script := textScript()
	script.Faults = []providertest.Fault{{Hang: true, Times: 1}}
	return script
}

// waitClosed waits for the front to see the held request end with its
// connection closed.
func (s *suite) waitClosed(r *report, e *env) {
	select {
	case gone := <-e.front.ended:
		if !gone {
			r.errorf("the held request ended while its connection was still open")
		}
	case <-time.After(s.within):
		r.errorf("the server still had the request open %v after Complete returned: the provider did not close its connection", s.within)
	}
}

func (s *suite) cancel(t *testing.T, r *report) {
	e := s.env(t, hangScript(), passAnswers)
	if s.cancelWhen(t, r, e, e.front.arrived, "before the server answered", "") {
		if n := len(e.front.timings()); n != 1 {
			r.errorf("the server received %d requests, want 1: a cancelled turn is not retried", n)
		}
		s.waitClosed(r, e)
	}
}

// cancelWhen starts a Complete against e, cancels its context when event
// comes, and checks that it returns an error that wraps context.Canceled
// within s.within. early says what a return before the event means; where
// ("" or " mid-answer") what the cancel interrupted. It reports whether
// the checks after it should run.
func (s *suite) cancelWhen(t *testing.T, r *report, e *env, event <-chan struct{}, early, where string) bool {
	p := s.newProvider(r, e.base, -1)
	if p == nil {
		return false
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := asyncComplete(ctx, r, p, textRequest())
	select {
	case <-event:
	case err := <-done:
		r.errorf("Complete() returned %v %s", err, early)
		return false
	case <-time.After(callTimeout):
		r.errorf("the request did not reach the server within %v", callTimeout)
		return false
	}
	cancel()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, context.Canceled) {
			r.errorf("Complete() cancelled%s = %v, want an error that wraps context.Canceled", where, err)
		}
	case <-time.After(s.within):
		r.errorf("Complete() did not return within %v of its context being cancelled%s", s.within, where)
		return false
	}
	return true
}

func (s *suite) deadline(t *testing.T, r *report) {
	e := s.env(t, hangScript(), passAnswers)
	p := s.newProvider(r, e.base, -1)
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), DeadlineAfter)
	defer cancel()
	done := asyncComplete(ctx, r, p, textRequest())
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			r.errorf("Complete() past its deadline = %v, want an error that wraps context.DeadlineExceeded", err)
		}
	case <-time.After(DeadlineAfter + s.within):
		r.errorf("Complete() did not return within %v of its deadline", s.within)
		return
	}
	if len(e.front.timings()) > 0 {
		s.waitClosed(r, e)
	}
}

func (s *suite) stall(t *testing.T, r *report) {
	e := s.env(t, textScript(), stallAnswers)
	if s.cancelWhen(t, r, e, e.front.stalled, "while the answer was still coming", " mid-answer") {
		s.waitClosed(r, e)
	}
}

func (s *suite) cancelled(t *testing.T, r *report) {
	var base string
	if s.scripted() {
		base = s.env(t, textScript(), passAnswers).base
	}
	p := s.newProvider(r, base, -1)
	if p == nil {
		return
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	select {
	case err := <-asyncComplete(ctx, r, p, textRequest()):
		if err == nil || !errors.Is(err, context.Canceled) {
			r.errorf("Complete(a cancelled context) = %v, want an error that wraps context.Canceled", err)
		}
	case <-time.After(s.within):
		r.errorf("Complete(a cancelled context) did not return within %v", s.within)
	}
}

func (s *suite) cut(t *testing.T, r *report) {
	script := textScript()
	script.Faults = []providertest.Fault{{Cut: true, Times: 100}}
	e := s.env(t, script, passAnswers)
	p := s.newProvider(r, e.base, 0)
	if p == nil {
		return
	}
	resp, err := complete(t, r, p, textRequest())
	if err == nil {
		r.errorf("every answer cut mid-body: Complete() = %+v, nil; want an error, not part of an answer passed off as whole", resp)
	}

	// Only the first answer cut: a retry may bring the whole answer.
	script.Faults = []providertest.Fault{{Cut: true, Times: 1}}
	e = s.env(t, script, passAnswers)
	if p = s.newProvider(r, e.base, -1); p == nil {
		return
	}
	resp, err = complete(t, r, p, textRequest())
	if err != nil {
		t.Logf("the first answer cut mid-body, MaxRetries -1: %s gave up with %v (allowed)", s.cfg.Definition.Name, err)
		return
	}
	checkText(r, "the first answer cut mid-body, then retried", resp)
}

func (s *suite) truncated(t *testing.T, r *report) {
	for _, tc := range []struct {
		what string
		req  provider.Request
	}{
		{"a text answer", textRequest()},
		{"a tool call", toolRequest()},
	} {
		script := textScript()
		script.Conversations = append(script.Conversations, toolScript().Conversations...)
		e := s.env(t, script, truncateAnswers)
		p := s.newProvider(r, e.base, 0)
		if p == nil {
			return
		}
		resp, err := complete(t, r, p, tc.req)
		if err == nil {
			r.errorf("%s that ended early: Complete() = %+v, nil; want an error, not the part that came", tc.what, resp)
		}
	}
}

func (s *suite) down(t *testing.T, r *report) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.errorf("listening for a free port: %v", err)
		return
	}
	addr := l.Addr().String()
	l.Close()
	p := s.newProvider(r, s.cfg.BaseURL("http://"+addr), 0)
	if p == nil {
		return
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	select {
	case err := <-asyncComplete(ctx, r, p, textRequest()):
		var pe *provider.Error
		switch {
		case err == nil:
			r.errorf("Complete() with nothing listening = nil error, want one")
		case errors.As(err, &pe):
			r.errorf("Complete() with nothing listening = %v, a *provider.Error: that says the provider answered (status %d)", err, pe.Status)
		}
	case <-time.After(s.within):
		r.errorf("Complete() with nothing listening and MaxRetries 0 did not return within %v", s.within)
	}
}

func (s *suite) reset(t *testing.T, r *report) {
	const maxRetries = 1
	base, requests := resetServer(t)
	p := s.newProvider(r, s.cfg.BaseURL(base), maxRetries)
	if p == nil {
		return
	}
	_, err := complete(t, r, p, textRequest())
	var pe *provider.Error
	switch {
	case err == nil:
		r.errorf("Complete() with every connection reset = nil error, want one")
	case errors.As(err, &pe):
		r.errorf("Complete() with every connection reset = %v, a *provider.Error: that says the provider answered (status %d)", err, pe.Status)
	}
	if n := requests(); n < 1 || n > 1+maxRetries {
		r.errorf("the server got %d requests with MaxRetries %d, want 1 to %d: the retry budget bounds the whole Complete", n, maxRetries, 1+maxRetries)
	}
}
