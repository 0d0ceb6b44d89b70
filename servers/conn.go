package servers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/internal/ground/tailbuf"
)

// DefaultStartupTimeout bounds connecting to a server and listing its tools
// when the declaration does not say otherwise.
const DefaultStartupTimeout = 30 * time.Second

// ErrServer marks errors caused by an MCP server (it exited, refused the
// connection, answered with a protocol error). Callers record such trials
// as errored with cause server.
var ErrServer = errors.New("mcp server failed")

// Tool is a tool as offered to the model: the server's tool with the
// variant's overrides applied.
type Tool struct {
	Server      string
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Conn is an open connection to one MCP server: over stdio or streamable
// HTTP (Connect), or by function calls to a server in this process
// (ConnectInProcess). Call is safe for concurrent use.
type Conn struct {
	Server Server
	// Tools are the tools offered to the model, in the server's order,
	// hidden ones removed.
	Tools []Tool
	// Implementation is the name and version the server reported.
	Implementation string
	// Listed is the server's own tool list, as it sent it: every tool,
	// none of the variant's overrides applied.
	Listed []*mcp.Tool

	session *mcp.ClientSession
	stderr  *tailbuf.Buffer
	cmd     *exec.Cmd // a stdio server's command; nil for HTTP
	local   InProcess // a server in this process (ConnectInProcess); nil otherwise
}

// Connect starts (stdio) or reaches (HTTP) the server, initializes an MCP
// session and lists its tools, all within the server's startup timeout. The
// error names the server and includes what it printed on stderr.
func Connect(ctx context.Context, s Server) (*Conn, error) {
	timeout := s.StartupTimeout
	if timeout <= 0 {
		timeout = DefaultStartupTimeout
	}
	c := &Conn{Server: s, stderr: tailbuf.New(4096)}
	transport, err := c.transport()
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "mst", Version: "1"}, nil)
	session, err := client.Connect(cctx, transport, nil)
	c.track()
	if err != nil {
		c.stopGroup()
		return nil, c.startError(cctx, timeout, "connecting", err)
	}
	c.session = session
	if init := session.InitializeResult(); init != nil && init.ServerInfo != nil {
		c.Implementation = strings.TrimSpace(init.ServerInfo.Name + " " + init.ServerInfo.Version)
	}
	var raw []*mcp.Tool
	for tool, err := range session.Tools(cctx, nil) {
		if err != nil {
			c.Close()
			return nil, c.startError(cctx, timeout, "listing tools", err)
		}
		raw = append(raw, tool)
	}
	if len(raw) == 0 {
		c.Close()
		return nil, fmt.Errorf("server %s: %w: it lists no tools%s", s.Name, ErrServer, c.printed())
	}
	c.Listed = raw
	tools, err := applyOverrides(s, raw)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.Tools = tools
	return c, nil
}

func (c *Conn) transport() (mcp.Transport, error) {
	s := c.Server
	if s.URL != "" {
		for k, v := range s.Headers {
			if !validHeaderName(k) {
				return nil, fmt.Errorf("header %q is not a valid HTTP header name (check servers.%s.headers)", k, s.Name)
			}
			if !validHeaderValue(v) {
				// The value is not quoted: it is often a secret.
				return nil, fmt.Errorf("the value of header %q has a line break or another control character (check servers.%s.headers)", k, s.Name)
			}
		}
		hc := &http.Client{}
		var rt http.RoundTripper = http.DefaultTransport
		if len(s.Headers) > 0 {
			rt = headerTransport{headers: s.Headers, base: rt}
		}
		if s.OAuth != nil {
			if s.Bearer == nil {
				return nil, fmt.Errorf("%w: it is a connector server, and this worker has no way to get its access token", ErrServer)
			}
			rt = bearerTransport{server: s.Name, bearer: s.Bearer, rejected: s.BearerRejected, base: rt}
		}
		if rt != http.DefaultTransport {
			hc.Transport = rt
		}
		return &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil
	}
	if s.Command == "" {
		return nil, errors.New("neither command nor url is set")
	}
	cmd := exec.Command(s.Command, s.Args...)
	cmd.Dir = s.Dir
	cmd.Env = serverEnv(s.Env)
	cmd.Stderr = c.stderr
	// A group of its own, so that Close stops what the server started
	// too; and on Linux the server dies with the process that started it,
	// whatever it does with its stdin.
	proctree.Group(cmd)
	proctree.DieWithParent(cmd, syscall.SIGKILL)
	c.cmd = cmd
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: stopGrace}, nil
}

// stopGrace is how long a stdio server gets to exit once its stdin is
// closed, and again after SIGTERM, before it is killed. Many servers (Node
// ones with a timer running, among them the npm everything server) never
// exit on their stdin's end; every trial and every readiness check would
// wait for them. A server that exits on its own does so well within it.
const stopGrace = 250 * time.Millisecond

func (c *Conn) startError(ctx context.Context, timeout time.Duration, doing string, err error) error {
	s := c.Server
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("server %s: %w: no answer within %s while %s (raise servers.%s.startupTimeout if it is slow to start)%s",
			s.Name, ErrServer, timeout, doing, s.Name, c.printed())
	}
	// Only a command that never started is the command's fault: once it
	// runs, a path error is a write to a server that stopped reading
	// (broken pipe), and what it printed says why.
	if c.cmd != nil && c.cmd.Process == nil {
		// A missing cwd fails the start as if the command were missing
		// (the kernel says ENOENT for both): check the folder first.
		if s.Dir != "" {
			if st, serr := os.Stat(s.Dir); serr != nil || !st.IsDir() {
				why := "it is a file, not a folder"
				if serr != nil {
					why = unwrapPathError(serr).Error()
				}
				return fmt.Errorf("server %s: %w: cannot start %q in its cwd %s: %s (check servers.%s.cwd: it must be an existing folder on the machine that runs the server)", s.Name, ErrServer, s.Command, s.Dir, why, s.Name)
			}
		}
		var execErr *exec.Error
		if errors.As(err, &execErr) {
			return fmt.Errorf("server %s: %w: cannot start %q: %v (check servers.%s.command)", s.Name, ErrServer, s.Command, execErr.Err, s.Name)
		}
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			return fmt.Errorf("server %s: %w: cannot start %q: %v (check servers.%s.command)", s.Name, ErrServer, s.Command, pathErr.Err, s.Name)
		}
	}
	return fmt.Errorf("server %s: %w: %s: %v%s", s.Name, ErrServer, doing, err, c.printed())
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// printed is what the server wrote on stderr, formatted to follow an error.
func (c *Conn) printed() string {
	out := strings.TrimSpace(c.stderr.String())
	if out == "" {
		return ""
	}
	return "\nthe server printed:\n  " + strings.ReplaceAll(out, "\n", "\n  ")
}

// Stderr returns the last few kilobytes the server wrote on stderr.
func (c *Conn) Stderr() string {
	if c.stderr == nil {
		return "" // in process: no stderr of its own
	}
	return c.stderr.String()
}

// CallResult is the outcome of one tool call.
type CallResult struct {
	// Text is the text content of the result (text parts joined by
	// newlines; other parts as JSON).
	Text    string
	IsError bool
}

// Call calls a tool by its name on the server. A tool that is not among
// Tools (hidden by the variant, or unknown) is not sent to the server: the
// result is an error result saying so. An error means no result came back
// (the server exited, or answered with a protocol error); it wraps
// ErrServer unless ctx ended first.
func (c *Conn) Call(ctx context.Context, tool string, args json.RawMessage) (CallResult, error) {
	if !slices.ContainsFunc(c.Tools, func(t Tool) bool { return t.Name == tool }) {
		return CallResult{Text: fmt.Sprintf("server %s offers no tool %q", c.Server.Name, tool), IsError: true}, nil
	}
	res, err := c.CallRaw(ctx, tool, args)
	if err != nil {
		return CallResult{}, err
	}
	return CallResult{Text: ResultText(res), IsError: res.IsError}, nil
}

// CallRaw calls a tool by its server name, whether or not the variant
// offers it, and returns the server's whole result (every content part,
// structured content, metadata): what MST's proxy forwards. Errors are as
// for Call; a JSON-RPC error the server answered with is wrapped, and can
// be read back with errors.As into a *jsonrpc.Error.
func (c *Conn) CallRaw(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	if c.local != nil {
		return c.callLocal(ctx, tool, args)
	}
	var arguments any = map[string]any{}
	if len(bytes.TrimSpace(args)) > 0 && string(bytes.TrimSpace(args)) != "null" {
		arguments = args
	}
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.awaitExit(err)
		return nil, fmt.Errorf("server %s: tool %s: %w: %w%s", c.Server.Name, tool, ErrServer, err, c.printed())
	}
	return res, nil
}

// ProtocolVersion is the MCP protocol version the server agreed to.
func (c *Conn) ProtocolVersion() string {
	if c.local != nil {
		return c.local.ProtocolVersion()
	}
	if init := c.session.InitializeResult(); init != nil {
		return init.ProtocolVersion
	}
	return ""
}

// Instructions are the server's instructions from its initialize answer.
func (c *Conn) Instructions() string {
	if c.local != nil {
		return c.local.Instructions()
	}
	if init := c.session.InitializeResult(); init != nil {
		return init.Instructions
	}
	return ""
}

// awaitExit waits, for at most 2s, for the session of a stdio server whose
// call failed without an answer (it exited) to end, so that its stderr has
// been read to the end when the error quotes it: the SDK fails the call as
// soon as the server's stdout closes, before it has waited for the process.
func (c *Conn) awaitExit(err error) {
	if c.cmd == nil {
		return
	}
	if _, answered := errors.AsType[*jsonrpc.Error](err); answered {
		return // the server is still there
	}
	done := make(chan struct{})
	go func() {
		c.session.Wait()
		close(done)
	}()
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
}

// Close ends the session (for stdio, closes the server's stdin, then stops
// it in steps: SIGTERM after 2s, SIGKILL 2s later), and then kills what is
// left of the server's process group: the processes it started. It is
// safe on the nil Conn a failed Connect returns. A stdio server that had
// to be stopped by a signal, or exited with a failure status once its
// stdin closed, is not an error: it is gone, as Close promises. On a Conn
// from ConnectInProcess, Close ends its calls in flight and leaves the
// server to its owner.
func (c *Conn) Close() error {
	if c != nil && c.local != nil {
		return c.local.Close()
	}
	if c == nil || c.session == nil {
		return nil
	}
	err := c.session.Close()
	c.stopGroup()
	if _, ok := errors.AsType[*exec.ExitError](err); ok && c.cmd != nil {
		return nil
	}
	return err
}

// ResultText is the text of a tool result as transcripts record it: text
// parts joined by newlines, other parts as JSON, or the structured
// content when there are no parts.
func ResultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, content := range res.Content {
		switch v := content.(type) {
		case *mcp.TextContent:
			parts = append(parts, v.Text)
		default:
			b, err := json.Marshal(v)
			if err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

func applyOverrides(s Server, raw []*mcp.Tool) ([]Tool, error) {
	if err := CheckOverrides(s, raw); err != nil {
		return nil, err
	}
	return offered(s, raw), nil
}

// offered is raw as s's tool overrides offer it, once CheckOverrides has
// found them sound.
func offered(s Server, raw []*mcp.Tool) []Tool {
	var tools []Tool
	for _, t := range raw {
		o := s.Tools[t.Name]
		if o.Hidden {
			continue
		}
		desc := t.Description
		if o.Description != nil {
			desc = *o.Description
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = []byte(`{"type":"object"}`)
		}
		tools = append(tools, Tool{Server: s.Name, Name: t.Name, Description: desc, InputSchema: schema})
	}
	return tools
}

// toolNameRE is what the MCP specification allows as a tool name.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// CheckOverrides checks a variant's changes to a server's tools (s.Tools)
// against the server's own list: each names a tool the server has, and a
// parameter of its input schema; new names are valid MCP tool names and
// no two tools are offered under one name; at least one tool stays
// offered. The error says how to fix the variant.
func CheckOverrides(s Server, listed []*mcp.Tool) error {
	byName := map[string]*mcp.Tool{}
	var have []string
	for _, t := range listed {
		byName[t.Name] = t
		have = append(have, t.Name)
	}
	var unknown []string
	for name := range s.Tools {
		if byName[name] == nil {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("server %s has no tool %s to change (it has: %s); fix the variant's tools.%s",
			s.Name, strings.Join(quoteAll(unknown), ", "), strings.Join(have, ", "), s.Name)
	}
	offered := map[string]string{} // offered name → server name
	for _, t := range listed {
		o := s.Tools[t.Name]
		if o.Hidden {
			continue
		}
		name := t.Name
		if o.Name != "" {
			if !toolNameRE.MatchString(o.Name) {
				return fmt.Errorf("server %s: tools.%s.name %q is not a valid MCP tool name: use 1 to 128 of letters, digits, '_', '-' and '.'", s.Name, t.Name, o.Name)
			}
			name = o.Name
		}
		if prev, dup := offered[name]; dup {
			return fmt.Errorf("server %s: the variant offers both %q and %q as %q; give one of them another name in the variant's tools.%s", s.Name, prev, t.Name, name, s.Name)
		}
		offered[name] = t.Name
		if len(o.Parameters) > 0 {
			props := map[string]any{}
			if m, ok := t.InputSchema.(map[string]any); ok {
				props, _ = m["properties"].(map[string]any)
			} else if b, err := json.Marshal(t.InputSchema); err == nil {
				var m struct {
					Properties map[string]any `json:"properties"`
				}
				if json.Unmarshal(b, &m) == nil {
					props = m.Properties
				}
			}
			var params []string
			for k := range props {
				params = append(params, k)
			}
			sort.Strings(params)
			var bad []string
			for p := range o.Parameters {
				if _, ok := props[p].(map[string]any); !ok {
					bad = append(bad, p)
				}
			}
			if len(bad) > 0 {
				sort.Strings(bad)
				return fmt.Errorf("server %s: tool %s has no parameter %s to describe (it has: %s); fix the variant's tools.%s.%s.parameters", s.Name, t.Name, strings.Join(quoteAll(bad), ", "), strings.Join(params, ", "), s.Name, t.Name)
			}
		}
	}
	if len(offered) == 0 {
		return fmt.Errorf("server %s: the variant hides every tool it has", s.Name)
	}
	// The dry-run and fault declarations name tools too.
	check := func(where string, names []string) error {
		var bad []string
		for _, n := range names {
			if byName[n] == nil {
				bad = append(bad, n)
			}
		}
		if len(bad) == 0 {
			return nil
		}
		sort.Strings(bad)
		return fmt.Errorf("%s names %s, which server %s does not have (it has: %s)", where, strings.Join(quoteAll(bad), ", "), s.Name, strings.Join(have, ", "))
	}
	if err := check("servers."+s.Name+".writes", s.Writes); err != nil {
		return err
	}
	var simulated []string
	for n := range s.Simulated {
		simulated = append(simulated, n)
	}
	if err := check("servers."+s.Name+".simulated", simulated); err != nil {
		return err
	}
	for i, f := range s.Faults {
		if err := check(fmt.Sprintf("the variant's faults.%s.%d.tools", s.Name, i), f.Tools); err != nil {
			return err
		}
	}
	return nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// ToolsHash is a SHA-256 over the tools as offered (names, descriptions,
// input schemas), in hex.
func ToolsHash(tools []Tool) string {
	h := sha256.New()
	for _, t := range tools {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", t.Name, t.Description, t.InputSchema)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// serverEnv is the environment of a stdio server: a minimal set taken from
// MST's own environment, so keys in the user's shell do not reach servers,
// plus the declaration's env.
func serverEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "USER", "TZ", "SYSTEMROOT"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// WithHeaders returns base with headers set on every request (replacing
// any of the same name).
func WithHeaders(base http.RoundTripper, headers map[string]string) http.RoundTripper {
	return headerTransport{headers: headers, base: base}
}

type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// bearerTransport sends a connector server's current access token with
// each request. When there is none it sends nothing and says why; the
// reason names the server and what to do, and never holds a value.
type bearerTransport struct {
	server   string
	bearer   func(ctx context.Context) (string, error)
	rejected func(value string)
	base     http.RoundTripper
}

// RoundTrip sends r with the current token. When the server refuses it
// (401), the token is reported rejected and r is sent once more with the
// next one, if r's body can be sent again.
func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := b.bearer(r.Context())
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, &TokenError{Server: b.server, Err: err}
	}
	resp, err := b.send(r, tok)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || b.rejected == nil || (r.Body != nil && r.GetBody == nil) {
		return resp, err
	}
	b.rejected(tok)
	next, err := b.bearer(r.Context())
	if err != nil || next == tok {
		// Nothing better to send: the server's answer stands.
		return resp, nil
	}
	retry := r.Clone(r.Context())
	if r.GetBody != nil {
		body, err := r.GetBody()
		if err != nil {
			return resp, nil
		}
		retry.Body = body
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return b.send(retry, next)
}

func (b bearerTransport) send(r *http.Request, tok string) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return b.base.RoundTrip(r)
}

// TokenError is a request to a connector server that went out without
// one because there was no access token for it.
type TokenError struct {
	Server string
	Err    error
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("no OAuth access token for connector server %s: %v", e.Server, e.Err)
}

func (e *TokenError) Unwrap() []error { return []error{ErrServer, e.Err} }

// validHeaderName reports whether k is an HTTP header name (an RFC 9110
// token).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v has no control characters but tabs.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}
