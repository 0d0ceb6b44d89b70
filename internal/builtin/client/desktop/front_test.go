package desktop

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/servers"
)

// TestFrontBetweenTrials: the front answers only with its token, and with
// no trial attached it lists no tools and answers a call with an error
// result that says why.
func TestFrontBetweenTrials(t *testing.T) {
	f, err := newFront([]string{"weather", "notes"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	ends := f.endpoints()
	if len(ends) != 2 || ends[0].Name != "weather" || ends[0].URL == ends[1].URL {
		t.Fatalf("endpoints %+v", ends)
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + f.token + "x"} {
		req, _ := http.NewRequest("POST", ends[0].URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401", auth, resp.StatusCode)
		}
	}
	// servers.Connect refuses a server that lists no tools: the error
	// says so, which is what an app sees before the first trial.
	if _, err := servers.Connect(t.Context(), ends[0]); err == nil || !strings.Contains(err.Error(), "lists no tools") {
		t.Fatalf("connecting between trials: %v", err)
	}
	// An app that calls a tool it listed earlier gets an error result.
	c := mcp.NewClient(&mcp.Implementation{Name: "app", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: ends[0].URL, HTTPClient: &http.Client{Transport: servers.WithHeaders(http.DefaultTransport, ends[0].Headers)}}
	sess, err := c.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "wx_now", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "no MST trial is running") {
		t.Fatalf("a call between trials: %+v, %v", res, err)
	}
}
