package codexcli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// toolServer is an MCP server over streamable HTTP in the test's process:
// the test server's tools (echo, fail, ... with no annotations), its 42
// extra tools, and tools annotated read-only, destructive and not
// destructive. It records the calls that reached it, and answers only
// requests that carry want (when set) as their Authorization header.
type toolServer struct {
	servers.Server
	mu    sync.Mutex
	calls []string
	bad   []string // Authorization headers refused
}

// Annotated tools of toolServer.
const (
	readOnlyTool    = "look_only"
	destructiveTool = "delete_all"
	harmlessTool    = "tidy_up" // destructiveHint false, not read-only
)

func newToolServer(t *testing.T, name, wantAuth string) *toolServer {
	t.Helper()
	ts := &toolServer{}
	s := testserver.New(true)
	testserver.AddMany(s)
	yes, no := true, false
	for _, tool := range []struct {
		name string
		ann  *mcp.ToolAnnotations
	}{
		{readOnlyTool, &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{destructiveTool, &mcp.ToolAnnotations{DestructiveHint: &yes}},
		{harmlessTool, &mcp.ToolAnnotations{DestructiveHint: &no}},
	} {
		mcp.AddTool(s, &mcp.Tool{Name: tool.name, Description: "Annotated tool " + tool.name + ".", Annotations: tool.ann},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct {
				Text string `json:"text"`
			}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool.name + ": " + in.Text}}}, nil, nil
			})
	}
	// Every call that reaches the server, by tool name.
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				ts.mu.Lock()
				ts.calls = append(ts.calls, p.Name)
				ts.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); wantAuth != "" && got != wantAuth {
			ts.mu.Lock()
			ts.bad = append(ts.bad, got)
			ts.mu.Unlock()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	ts.Server = servers.Server{Name: name, URL: hs.URL}
	if wantAuth != "" {
		ts.Headers = map[string]string{"Authorization": wantAuth}
	}
	return ts
}

func (ts *toolServer) called() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.calls)
}

// TestToolsRunWithoutApproval: tools with no annotations, read-only,
// destructive and not-destructive ones, on a server of 49 tools, all run
// (codex runs with approval_policy never, which refuses every tool it would
// ask about unless the servers' tools are approved in advance); a tool that
// answers an error result is recorded as one. The servers come from the
// trial (Trial.Servers, as the worker's proxies do) over streamable HTTP
// with an Authorization header, and the session's own servers are not used.
func TestToolsRunWithoutApproval(t *testing.T) {
	t.Parallel()
	const auth = "Bearer tools-e2e-token"
	srv := newToolServer(t, "tools", auth)
	call := func(tool string) providertest.Turn {
		args := map[string]any{"text": "hi " + tool}
		if tool == "fail" {
			args = map[string]any{"reason": "on purpose"}
		}
		return providertest.Turn{ToolCalls: []providertest.Call{{Tool: tool, Arguments: args}}}
	}
	tools := []string{"echo", readOnlyTool, destructiveTool, harmlessTool, "filler_40", testserver.UnicodeTool, "fail"}
	var turns []providertest.Turn
	for _, tool := range tools {
		turns = append(turns, call(tool))
	}
	turns = append(turns, providertest.Turn{Text: "all done"})
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: turns}}})
	// The session's server of that name cannot start: the trial must use
	// its own.
	s := openTest(t, fake.URL, "", servers.Server{Name: "tools", Command: "/nonexistent/server"})
	res, err := s.Run(t.Context(), client.Trial{Key: transcript.Key{Case: "c", Variant: "v", Trial: 1}, Prompt: "use every tool", Servers: []servers.Server{srv.Server}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Status != transcript.Answered {
		t.Fatalf("outcome = %+v, want answered", res.Outcome)
	}
	if got := srv.called(); !slices.Equal(got, tools) {
		t.Errorf("the server got calls %v, want %v (refused Authorization headers: %q)", got, tools, srv.bad)
	}
	if len(res.ToolCalls) != len(tools) {
		t.Fatalf("tool calls = %+v, want %d", res.ToolCalls, len(tools))
	}
	for i, c := range res.ToolCalls {
		wantErr := tools[i] == "fail"
		if c.Server != "tools" || c.Tool != tools[i] || c.Error != "" || c.IsError != wantErr || !strings.Contains(c.Result, "hi "+tools[i]) && !wantErr {
			t.Errorf("call %d = %+v, want %s run on tools (isError %v)", i, c, tools[i], wantErr)
		}
		if wantErr && c.Result != "fail: on purpose" {
			t.Errorf("the failing tool's result = %q, want its error text", c.Result)
		}
	}
	if res.Usage.ModelCalls != len(fake.Requests()) || res.Usage.ModelCalls != len(tools)+1 {
		t.Errorf("modelCalls = %d, the provider got %d requests, want %d", res.Usage.ModelCalls, len(fake.Requests()), len(tools)+1)
	}
	// The model was offered the server's 49 tools and none of the CLI's
	// own but the resource readers of the same servers.
	offered := fake.Requests()[0].Tools
	var mcpTools, own []string
	for _, n := range offered {
		if strings.HasPrefix(n, "mcp__tools.") {
			mcpTools = append(mcpTools, n)
		} else {
			own = append(own, n)
		}
	}
	if len(mcpTools) != 4+testserver.ManyTools+3 {
		t.Errorf("the model was offered %d tools of the server, want %d: %v", len(mcpTools), 4+testserver.ManyTools+3, offered)
	}
	for _, n := range own {
		if !strings.Contains(n, "mcp_resource") {
			t.Errorf("the model was offered the CLI's own tool %q with builtinTools unset (all: %v)", n, offered)
		}
	}
}

// TestParserRefusedCall: a call the CLI refuses (here, as codex 0.171
// reports a tool it would have asked approval for) is recorded as an error
// with the CLI's reason, and its tool message says so.
func TestParserRefusedCall(t *testing.T) {
	p := newParser("hi", 0)
	for _, l := range []string{
		`{"type":"item.started","item":{"id":"item_1","type":"mcp_tool_call","server":"x","tool":"plain","arguments":{"text":"a"},"result":null,"error":null,"status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"mcp_tool_call","server":"x","tool":"plain","arguments":{"text":"a"},"result":null,"error":{"message":"MCP tool call requires approval, but approval policy is never"},"status":"failed"}}`,
		`{"type":"item.started","item":{"id":"item_2","type":"mcp_tool_call","server":"x","tool":"fail","arguments":{"text":"e"},"result":null,"error":null,"status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_2","type":"mcp_tool_call","server":"x","tool":"fail","arguments":{"text":"e"},"result":{"content":[{"type":"text","text":"fail: e"}],"structured_content":null},"error":null,"status":"failed"}}`,
		`{"type":"item.started","item":{"id":"item_3","type":"command_execution","command":"/bin/bash -lc 'ls /nonexistent'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_3","type":"command_execution","command":"/bin/bash -lc 'ls /nonexistent'","aggregated_output":"ls: cannot access '/nonexistent'\n","exit_code":2,"status":"failed"}}`,
	} {
		p.line([]byte(l), time.Now())
	}
	res := p.result()
	if len(res.ToolCalls) != 3 {
		t.Fatalf("calls = %+v", res.ToolCalls)
	}
	refused, failed, shell := res.ToolCalls[0], res.ToolCalls[1], res.ToolCalls[2]
	if !refused.IsError || !strings.Contains(refused.Error, "requires approval") {
		t.Errorf("refused call = %+v, want an error with the CLI's reason", refused)
	}
	if !failed.IsError || failed.Error != "" || failed.Result != "fail: e" {
		t.Errorf("error result = %+v, want isError with the result", failed)
	}
	var args map[string]string
	if shell.Server != client.BuiltinServer || shell.Tool != "exec_command" || !shell.IsError || !strings.Contains(shell.Error, "code 2") ||
		json.Unmarshal(shell.Arguments, &args) != nil || !strings.Contains(args["command"], "ls /nonexistent") || shell.Evidence != transcript.EvidenceClient {
		t.Errorf("shell call = %+v (arguments %s)", shell, shell.Arguments)
	}
	var toolMsgs []string
	for _, m := range res.Messages {
		if m.Role == "tool" {
			toolMsgs = append(toolMsgs, m.Text)
		}
	}
	if len(toolMsgs) != 3 || !strings.Contains(toolMsgs[0], "error: MCP tool call requires approval") {
		t.Errorf("tool messages = %q", toolMsgs)
	}
}

// TestServerGetsOnlyItsOwnVariables: the CLI's environment holds every
// server's values (config.toml names them), but a stdio server gets only
// its own variables, not another server's header, nor the API key.
func TestServerGetsOnlyItsOwnVariables(t *testing.T) {
	t.Parallel()
	const own, other = "own-value-5d1e", "other-server-header-a9c3"
	remote := newToolServer(t, "remote", "Bearer "+other)
	ev := peertest.Everything(t)
	ev.Env = map[string]string{"MST_TEST_OWN_VAR": own}
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{ToolCalls: []providertest.Call{{Tool: "get-env"}}},
		{Text: "done"},
	}}}})
	s := openTest(t, fake.URL, "", ev, remote.Server)
	res := run(t, t.Context(), s, "show the environment")
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].IsError {
		t.Fatalf("calls = %+v", res.ToolCalls)
	}
	env := res.ToolCalls[0].Result
	if !strings.Contains(env, `"MST_TEST_OWN_VAR": "`+own+`"`) {
		t.Errorf("the server lacks its own variable: %s", env)
	}
	for _, leak := range []string{other, testKey, serverEnvPrefix} {
		if strings.Contains(env, leak) {
			t.Errorf("the server's environment holds %s: %s", leak, env)
		}
	}
}
