package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// Definition is the api client's definition. The client runs the models of
// the providers in providers that MST can build (those with New), and reads
// each one's key from the variable its definition names.
func Definition(providers *provider.Registry) *client.Definition {
	return &client.Definition{
		Name:        "api",
		Description: "The model alone, through its provider's API, with the servers' tools (no app, no agent harness).",
		Requirements: client.Requirements{
			OS:          []string{"linux", "darwin", "windows"},
			Credentials: credentials(providers),
		},
		Options:        optionsSchema(providers),
		Timeout:        defaultTimeout,
		ProviderKeys:   true,
		ModelProviders: provider.Buildable(providers),
		Concurrent:     true,
		ProxiedServers: true,
		// The session runs in the worker: it calls the proxies' own
		// functions, with no MCP hop (docs/proxy.md, "Overhead").
		InProcessServers: true,
		CaseOverrides:    []string{"model", "clientOptions"},
		Check: func(model string, options json.RawMessage) error {
			return CheckOptions(providers, model, options)
		},
		Open: func(ctx context.Context, p client.OpenParams) (client.Session, error) {
			return open(ctx, providers, p)
		},
	}
}

// credentials says, per provider the client runs, which variable holds its
// key: "ANTHROPIC_API_KEY for anthropic/ models", "none for offline".
func credentials(providers *provider.Registry) []string {
	var out []string
	for _, name := range provider.Buildable(providers) {
		def, _ := providers.Lookup(name)
		switch {
		case def.KeyVar == "":
			out = append(out, "none for "+name)
		case def.KeyOptionalWithBaseURL:
			out = append(out, def.KeyVar+" for "+name+"/ models (none for a server at a baseURL that needs no key)")
		default:
			out = append(out, def.KeyVar+" for "+name+"/ models")
		}
	}
	return out
}

// open connects to the variant's servers and prepares the model's provider.
func open(ctx context.Context, providers *provider.Registry, p client.OpenParams) (client.Session, error) {
	opts, err := decodeOptions(p.Options)
	if err != nil {
		return nil, err
	}
	prov, err := newProvider(providers, p, opts)
	if err != nil {
		return nil, err
	}
	_, model := provider.Split(p.Model)
	s := &session{params: p, opts: opts, prov: prov, model: model}
	if p.Proxied {
		// Every trial brings its servers (MST's proxies).
		return s, nil
	}
	s.base, err = connectTools(ctx, p.Servers)
	if err != nil {
		return s, err
	}
	return s, nil
}

type session struct {
	params client.OpenParams
	opts   Options
	prov   provider.Provider
	model  string // the model's name as its provider knows it

	mu   sync.RWMutex // guards base; Reset takes it for writing
	base *toolset     // the session's servers; nil when trials bring their own
}

// toolset is a set of connected servers and the tools they offer the
// model, under names its provider accepts.
type toolset struct {
	conns []*servers.Conn
	tools []provider.Tool
	refs  map[string]toolRef
	infos []transcript.ServerInfo
}

// connectTools connects to every server of list.
func connectTools(ctx context.Context, list []servers.Server) (*toolset, error) {
	var conns []*servers.Conn
	for _, srv := range list {
		c, err := servers.Connect(ctx, srv)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, c)
	}
	return newToolset(conns), nil
}

// newToolset offers the tools of conns to the model; the toolset owns
// conns.
func newToolset(conns []*servers.Conn) *toolset {
	names, refs := nameTools(conns)
	ts := &toolset{conns: conns, refs: refs}
	i := 0
	for _, c := range conns {
		info := transcript.ServerInfo{Name: c.Server.Name, Transport: c.Server.Transport(), ToolsHash: servers.ToolsHash(c.Tools), Implementation: c.Implementation}
		for _, t := range c.Tools {
			ts.tools = append(ts.tools, provider.Tool{Name: names[i], Description: t.Description, InputSchema: t.InputSchema})
			info.Tools = append(info.Tools, t.Name)
			i++
		}
		ts.infos = append(ts.infos, info)
	}
	return ts
}

func (ts *toolset) close() error {
	if ts == nil {
		return nil
	}
	var errs []error
	for _, c := range ts.conns {
		errs = append(errs, c.Close())
	}
	ts.conns = nil
	return errors.Join(errs...)
}

// Reset reconnects every server of the session; trials that bring their
// own servers need nothing.
func (s *session) Reset(ctx context.Context) error {
	if s.params.Proxied {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base.close()
	s.base = nil
	var err error
	s.base, err = connectTools(ctx, s.params.Servers)
	return err
}

func (s *session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.base.close()
	s.base = nil
	return err
}

// toolsFor connects the servers a trial brings (MST's proxies, in this
// process or as endpoints); for a trial that brings none it returns nil,
// and Run uses the session's.
func (s *session) toolsFor(ctx context.Context, t client.Trial) (*toolset, error) {
	if t.Conns != nil {
		return newToolset(t.Conns), nil
	}
	if t.Servers == nil {
		if s.params.Proxied {
			return nil, errors.New("api: the trial brings no servers, and the session has none of its own (OpenParams.Proxied)")
		}
		return nil, nil
	}
	return connectTools(ctx, t.Servers)
}

// Run runs one trial: ask the model, call the tools it asks for, give it the
// results, until it answers without calling a tool.
func (s *session) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	ts, err := s.toolsFor(ctx, t)
	if err != nil {
		return client.Result{}, err
	}
	if ts != nil {
		defer ts.close()
	} else {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if ts = s.base; ts == nil || ts.conns == nil {
			return client.Result{}, errors.New("the session has no server connections (a reset failed)")
		}
	}
	// No ClientVersion: the api client is MST itself, and the worker
	// records MST's version for a built-in client.
	res := client.Result{Servers: ts.infos}
	req := provider.Request{
		Model:           s.model,
		System:          s.opts.System,
		Tools:           ts.tools,
		MaxTokens:       s.opts.MaxTokens,
		ReasoningEffort: s.opts.ReasoningEffort,
		Messages:        []provider.Message{{Role: provider.User, Text: t.Prompt}},
	}
	res.Messages = append(res.Messages, transcript.Message{Role: "user", Text: t.Prompt})
	actions := 0
	for {
		resp, err := s.prov.Complete(ctx, req)
		if err != nil {
			// When ctx ended, the worker decides whether the trial timed
			// out or was cancelled; the client only says what it had, and
			// that it was waiting on the model.
			if ctx.Err() != nil {
				res.WaitingOn = transcript.WaitingModel
				return res, ctx.Err()
			}
			res.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseProvider, Detail: err.Error()}
			return res, nil
		}
		res.Usage.Add(transcript.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, CachedTokens: resp.Usage.CachedTokens, ModelCalls: 1})
		msg := transcript.Message{Role: "assistant", Text: resp.Text}
		for _, call := range resp.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, call.ID)
		}
		res.Messages = append(res.Messages, msg)
		req.Messages = append(req.Messages, provider.Message{Role: provider.Assistant, Text: resp.Text, ToolCalls: resp.ToolCalls, Reasoning: resp.Reasoning})
		if len(resp.ToolCalls) == 0 {
			res.Answer = resp.Text
			if strings.TrimSpace(resp.Text) == "" {
				res.Outcome = transcript.Outcome{Status: transcript.NoAnswer, Detail: "the model ended its turn without text (stop reason " + resp.StopReason + ")"}
			} else {
				res.Outcome = transcript.Outcome{Status: transcript.Answered}
			}
			return res, nil
		}
		var results []provider.ToolResult
		for _, call := range resp.ToolCalls {
			if actions >= s.opts.MaxActions {
				res.Outcome = transcript.Outcome{Status: transcript.NoAnswer, Detail: fmt.Sprintf("maxActions (%d) reached: the model asked for another tool call", s.opts.MaxActions)}
				return res, nil
			}
			actions++
			tc, result, err := ts.call(ctx, call)
			res.ToolCalls = append(res.ToolCalls, tc)
			res.Messages = append(res.Messages, transcript.Message{Role: "tool", Text: result.Content, ToolCall: call.ID})
			if err != nil && ctx.Err() != nil {
				res.WaitingOn = transcript.WaitingTool
				return res, ctx.Err()
			}
			// A call that failed (a protocol error, a server that is gone)
			// is answered to the model as an error result, and the
			// conversation goes on, as every CLI client does. Whether the
			// trial counts is decided from the proxies' record: a server
			// that failed by itself makes it errored (server); a fault
			// MST injected does not (docs/proxy.md, "Faults").
			if err != nil {
				res.Next = client.Reset
			}
			results = append(results, result)
		}
		req.Messages = append(req.Messages, provider.Message{Role: provider.User, ToolResults: results})
	}
}

// call runs one tool call. An unknown tool name is answered to the model as
// an error result, as real clients do; a failed server is returned as err.
func (s *toolset) call(ctx context.Context, call provider.ToolCall) (transcript.ToolCall, provider.ToolResult, error) {
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	tc := transcript.ToolCall{ID: call.ID, Tool: call.Name, Arguments: args, Started: time.Now().UTC()}
	result := provider.ToolResult{CallID: call.ID, Name: call.Name}
	ref, ok := s.refs[call.Name]
	if !ok {
		tc.IsError = true
		tc.Error = fmt.Sprintf("the model called %q, which no server offers", call.Name)
		result.Content, result.IsError = tc.Error, true
		return tc, result, nil
	}
	tc.Server, tc.Tool = ref.conn.Server.Name, ref.tool.Name
	if !json.Valid(args) {
		tc.IsError = true
		tc.Error = "the model sent arguments that are not valid JSON"
		result.Content, result.IsError = tc.Error, true
		return tc, result, nil
	}
	r, err := ref.conn.Call(ctx, ref.tool.Name, args)
	tc.DurationMs = float64(time.Since(tc.Started).Microseconds()) / 1000
	if err != nil {
		tc.Error = err.Error()
		result.Content, result.IsError = "error: "+err.Error(), true
		return tc, result, err
	}
	tc.Result, tc.IsError = r.Text, r.IsError
	result.Content, result.IsError = r.Text, r.IsError
	return tc, result, nil
}
