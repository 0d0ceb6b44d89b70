//go:build unix

package claudecode

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// guardedServer serves an MCP server with one tool, whoami, over
// streamable HTTP, answering 401 to every request whose header does not
// carry token. It returns the server's URL and how many requests carried
// the token.
func guardedServer(t *testing.T, header, token string) (string, *atomic.Int64) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "guarded", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "Says who the caller is."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you hold the proxy's token"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var good atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(header) != token {
			http.Error(w, "this server wants the "+header+" header", http.StatusUnauthorized)
			return
		}
		good.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, &good
}

// TestTrialServers: a trial whose Servers the worker set (a proxy that
// wants a header) reaches them with their headers, in place of the
// session's; a trial without them keeps the session's servers.
func TestTrialServers(t *testing.T) {
	t.Parallel()
	peertest.Everything(t) // the CLI needs Node 22 and the peers
	const header, token = "X-Mst-Proxy-Token", "proxy-token-for-this-trial"
	url, good := guardedServer(t, header, token)
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "whoami"}}},
			{Text: "Done."},
		},
	}}})
	// The session's server is the same endpoint without the header: only
	// the trial's own servers can reach it.
	s := openCLI(t, fake.URL, nil, servers.Server{Name: "guarded", URL: url})

	tr := trial("who am I?")
	tr.Servers = []servers.Server{{Name: "guarded", URL: url, Headers: map[string]string{header: token}}}
	res, err := s.Run(t.Context(), tr)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if res.Outcome.Status != transcript.Answered || len(res.ToolCalls) != 1 {
		t.Fatalf("outcome %+v, calls %+v", res.Outcome, res.ToolCalls)
	}
	if c := res.ToolCalls[0]; c.Server != "guarded" || c.Tool != "whoami" || c.IsError || !strings.Contains(c.Result, "proxy's token") {
		t.Errorf("call = %+v, want whoami on guarded with its result", c)
	}
	if good.Load() == 0 {
		t.Errorf("no request reached the server with the %s header", header)
	}

	// Without trial servers the session's config holds: no header, so
	// the server refuses the CLI and the trial says so.
	res = run(t, s, t.Context(), "who am I?")
	if res.Outcome.Status != transcript.Errored || res.Outcome.Cause != transcript.CauseServer || !strings.Contains(res.Outcome.Detail, "guarded") {
		t.Errorf("without trial servers: outcome %+v, want errored (server) naming guarded", res.Outcome)
	}
}
