package mcpproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// serverProxy stands between a client and one server for one trial.
type serverProxy struct {
	decl     servers.Server
	conn     *servers.Conn
	view     *view
	simulate map[string]bool
	seed     string
	rec      *recorder
	acquire  func(ctx context.Context, server string) (func(), error)
	budget   *budget // shared by the set's proxies; nil: no limit

	mu    sync.Mutex
	calls int  // calls so far, numbered from 1
	gone  bool // a disconnect fault ended the server

	closeOnce sync.Once
	closeErr  error

	// inflight holds the cancel functions of the calls in flight, by the
	// MCP session they came on, so that a client that ends its session
	// (or a Set that closes) ends them: the SDK's server waits for a
	// session's calls before it lets the session go.
	inflight map[string]map[*int]context.CancelFunc
}

// track makes ctx end when the call's session is ended or the set closes;
// done untracks it.
func (p *serverProxy) track(ctx context.Context, session string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	key := new(int)
	p.mu.Lock()
	if p.inflight == nil {
		p.inflight = map[string]map[*int]context.CancelFunc{}
	}
	if p.inflight[session] == nil {
		p.inflight[session] = map[*int]context.CancelFunc{}
	}
	p.inflight[session][key] = cancel
	p.mu.Unlock()
	return ctx, func() {
		p.mu.Lock()
		delete(p.inflight[session], key)
		if len(p.inflight[session]) == 0 {
			delete(p.inflight, session)
		}
		p.mu.Unlock()
		cancel()
	}
}

// cancel ends the calls in flight on one MCP session, or on all of them
// when all is true.
func (p *serverProxy) cancel(session string, all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for sid, calls := range p.inflight {
		if all || sid == session {
			for _, c := range calls {
				c()
			}
		}
	}
}

// close closes the connection to the server, once.
func (p *serverProxy) close() error {
	p.closeOnce.Do(func() { p.closeErr = p.conn.Close() })
	return p.closeErr
}

// call handles one tools/call of the tool offered as offered: the whole
// policy (faults, dry run, forwarding) and the record of it.
func (p *serverProxy) call(ctx context.Context, offered string, args json.RawMessage) (*mcp.CallToolResult, error) {
	real := p.view.real[offered]
	if !p.budget.take() {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
			Text: fmt.Sprintf("Not run: this trial may make at most %d tool calls (maxActions).", p.budget.max),
		}}}, nil
	}
	if a := bytes.TrimSpace(args); len(a) == 0 || string(a) == "null" {
		args = json.RawMessage(`{}`)
	}
	p.mu.Lock()
	p.calls++
	n, gone := p.calls, p.gone
	p.mu.Unlock()
	start := time.Now()
	tc := transcript.ToolCall{
		Server: p.decl.Name, Tool: real, Arguments: slices.Clone(args),
		Started: start.UTC(), Evidence: transcript.EvidenceServer,
	}
	if real != offered {
		tc.OfferedAs = offered
	}
	id := p.rec.begin(tc)
	res, err := p.handle(ctx, &tc, n, gone, real, args)
	tc.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	p.rec.end(id)
	switch {
	case err != nil:
		tc.Error = err.Error()
	case res != nil:
		tc.Result, tc.IsError = servers.ResultText(res), res.IsError
	}
	p.rec.add(tc)
	return res, err
}

func (p *serverProxy) handle(ctx context.Context, tc *transcript.ToolCall, n int, gone bool, real string, args json.RawMessage) (*mcp.CallToolResult, error) {
	if gone {
		tc.Injected = servers.FaultDisconnect
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is not running"}
	}
	var injected []string
	defer func() {
		for i, s := range injected {
			if i > 0 {
				tc.Injected += ", "
			}
			tc.Injected += s
		}
	}()
	for i, f := range p.decl.Faults {
		if !p.hits(i, f, n, real) {
			continue
		}
		switch f.Kind {
		case servers.FaultLatency:
			injected = append(injected, "latency "+f.Delay.String())
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		case servers.FaultError:
			injected = append(injected, servers.FaultError)
			msg := f.Message
			if msg == "" {
				msg = "Internal server error"
			}
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
		case servers.FaultProtocol:
			injected = append(injected, servers.FaultProtocol)
			msg := f.Message
			if msg == "" {
				msg = "Internal error"
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
		case servers.FaultDisconnect:
			injected = append(injected, servers.FaultDisconnect)
			p.mu.Lock()
			p.gone = true
			p.mu.Unlock()
			p.close()
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is not running"}
		}
	}
	if p.simulate[real] {
		tc.Simulated = true
		return simulatedResult(p.decl, p.view.listed[real]), nil
	}
	if p.acquire != nil {
		release, err := p.acquire(ctx, p.decl.Name)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "waiting for the server's call limit: " + err.Error()}
		}
		defer release()
	}
	res, err := p.conn.CallRaw(ctx, real, args)
	if err != nil {
		// A JSON-RPC error of the server goes to the client as it came; a
		// server that failed otherwise (it exited) is an internal error.
		if rpc, ok := errors.AsType[*jsonrpc.Error](err); ok {
			return nil, rpc
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The server failed by itself (it exited, or its connection
		// broke): the trial cannot say anything about the variant.
		p.rec.fail(err.Error())
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return res, nil
}

// hits reports whether fault i hits call n (numbered from 1) of tool real.
func (p *serverProxy) hits(i int, f servers.Fault, n int, real string) bool {
	if n <= f.AfterCalls {
		return false
	}
	if len(f.Tools) > 0 && !slices.Contains(f.Tools, real) {
		return false
	}
	if f.Rate >= 1 {
		return true
	}
	return draw(p.seed, i, n) < f.Rate
}

// draw is a number in [0, 1) that depends only on its arguments: the
// first 53 bits of the SHA-256 of seed, fault and call joined by NUL bytes,
// the numbers in decimal (the bytes must not change, or a resumed run would
// see other faults).
func draw(seed string, fault, call int) float64 {
	b := make([]byte, 0, len(seed)+24)
	b = append(append(b, seed...), 0)
	b = append(strconv.AppendInt(b, int64(fault), 10), 0)
	h := sha256.Sum256(strconv.AppendInt(b, int64(call), 10))
	return float64(binary.BigEndian.Uint64(h[:8])>>11) / math.Exp2(53)
}

// simulatedResult is what a dry run answers a call of t with: the
// configured result, or a generated one (an instance of the tool's output
// schema when it has one, else "OK").
func simulatedResult(s servers.Server, t *mcp.Tool) *mcp.CallToolResult {
	if r, ok := s.Simulated[t.Name]; ok {
		return &mcp.CallToolResult{IsError: r.IsError, Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}}
	}
	if t.OutputSchema != nil {
		v := instance(objectOf(t.OutputSchema), 0)
		b, err := json.Marshal(v)
		if err == nil {
			return &mcp.CallToolResult{StructuredContent: v, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "OK"}}}
}

func objectOf(schema any) map[string]any {
	if m, ok := schema.(map[string]any); ok {
		return m
	}
	var m map[string]any
	if b, err := json.Marshal(schema); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// instance makes a small value that a JSON schema accepts in the common
// cases: its default or first example or enum value, else the zero value
// of its type with the required properties of an object filled in.
func instance(schema map[string]any, depth int) any {
	if schema == nil || depth > 8 {
		return nil
	}
	if d, ok := schema["default"]; ok {
		return d
	}
	if c, ok := schema["const"]; ok {
		return c
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if e, ok := schema["examples"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ := schema["type"]
	if l, ok := typ.([]any); ok && len(l) > 0 {
		typ = l[0]
	}
	switch typ {
	case "object", nil:
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		req, _ := schema["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			if p, ok := props[name].(map[string]any); ok {
				out[name] = instance(p, depth+1)
			}
		}
		return out
	case "array":
		return []any{}
	case "string":
		return ""
	case "integer", "number":
		return 0
	case "boolean":
		return false
	}
	return nil
}

// recorder keeps a trial's server-side record of tool calls.
type recorder struct {
	mu      sync.Mutex
	calls   []transcript.ToolCall
	pending map[int]transcript.ToolCall // calls begun and not yet ended, by begin's id
	begun   int                         // calls begun so far
	failed  string                      // the first failure of a server by itself
}

// begin notes a call in flight until end is called with the id it returns.
func (r *recorder) begin(tc transcript.ToolCall) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[int]transcript.ToolCall{}
	}
	r.begun++
	r.pending[r.begun] = tc
	return r.begun
}

// end notes that the call begin returned id for came back.
func (r *recorder) end(id int) {
	r.mu.Lock()
	delete(r.pending, id)
	r.mu.Unlock()
}

// inFlight returns the calls begun and not ended, in the order they began.
func (r *recorder) inFlight() []transcript.ToolCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Collect(maps.Values(r.pending))
	slices.SortFunc(out, func(a, b transcript.ToolCall) int { return a.Started.Compare(b.Started) })
	return out
}

// fail records a server's failure that MST did not inject; the first one
// is kept.
func (r *recorder) fail(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == "" {
		r.failed = why
	}
}

func (r *recorder) failure() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) add(tc transcript.ToolCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tc.ID = "mst-" + strconv.Itoa(len(r.calls)+1)
	r.calls = append(r.calls, tc)
}

func (r *recorder) all() []transcript.ToolCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// budget counts down the tool calls a trial may still make.
type budget struct {
	mu   sync.Mutex
	left int
	max  int
}

// take uses one call, and reports false when none is left. A nil budget
// always has room.
func (b *budget) take() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left == 0 {
		return false
	}
	b.left--
	return true
}
